// qkv spirals train|eval: the trainer's own end-to-end job on built-in data
// (K interleaved spirals, an MLP). It exercises everything a model's train
// command has: splits, checkpoints, resume, reports, weights.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/common.h"
#include "qkv/cli/commands.h"
#include "qkv/core/errors.h"
#include "qkv/core/runtime.h"
#include "qkv/data/spirals.h"
#include "qkv/models/mlp.h"

namespace qkv::cli {
namespace {

struct SpiralsData {
  data::SpiralsOptions spirals;
  double val_fraction = 0.15;
  double test_fraction = 0.15;
  uint64_t split_seed = 0;  // copied from --seed

  nlohmann::json to_json() const {
    return {{"source", "built-in spirals"},
            {"classes", spirals.classes},
            {"points_per_class", spirals.points_per_class},
            {"noise", spirals.noise},
            {"turns", spirals.turns},
            {"val_fraction", val_fraction},
            {"test_fraction", test_fraction},
            {"split_seed", split_seed}};
  }
  static SpiralsData from_json(const nlohmann::json& j) {
    SpiralsData d;
    d.spirals.classes = j.at("classes");
    d.spirals.points_per_class = j.at("points_per_class");
    d.spirals.noise = j.at("noise");
    d.spirals.turns = j.at("turns");
    d.val_fraction = j.at("val_fraction");
    d.test_fraction = j.at("test_fraction");
    d.split_seed = j.at("split_seed");
    return d;
  }
  data::Splits make() const {
    return data::random_split(data::make_spirals(spirals, split_seed), val_fraction, test_fraction, split_seed);
  }
};

void add_data_options(CLI::App* cmd, SpiralsData& d) {
  cmd->add_option("--classes", d.spirals.classes, "number of spiral arms (classes)")->capture_default_str();
  cmd->add_option("--points-per-class", d.spirals.points_per_class, "points on each arm")->capture_default_str();
  cmd->add_option("--noise", d.spirals.noise, "angular jitter (radians, std)")->capture_default_str();
  cmd->add_option("--turns", d.spirals.turns, "full turns of each arm")->capture_default_str();
  cmd->add_option("--val-fraction", d.val_fraction, "share of points held out for model selection")
      ->capture_default_str();
  cmd->add_option("--test-fraction", d.test_fraction, "share of points held out for the final test")
      ->capture_default_str();
}

void register_train(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("train", "train an MLP on built-in spirals; writes the run folder --out");
  struct Opts {
    CommonOptions common;
    SpiralsData data;
    models::MLPOptions mlp;
    train::TrainConfig train;
    std::string init_weights, resume;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/spirals";
  o->train.epochs = 40;
  o->train.batch_size = 64;
  o->train.optim.lr = 1e-2;
  add_common_options(cmd, o->common, "run folder: config.json, metrics.jsonl, summary.json, report.html, checkpoints/");
  add_data_options(cmd, o->data);
  cmd->add_option("--hidden", o->mlp.hidden, "hidden width")->capture_default_str();
  cmd->add_option("--layers", o->mlp.layers, "hidden layers")->capture_default_str();
  cmd->add_option("--dropout", o->mlp.dropout, "dropout after each hidden layer")->capture_default_str();
  add_train_options(cmd, o->train);
  cmd->add_option("--init-weights", o->init_weights, "start from a name->tensor .pt dict (export-weights, torch.save)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--resume", o->resume, "continue the run in this folder from its last checkpoint")
      ->check(CLI::ExistingDirectory);
  cmd->callback([o, cmd, &action] {
    action = [o, cmd] {
      TrainRequest request{"spirals train", "mlp", {}, {}, o->init_weights, false};
      train::TrainConfig config = o->train;
      resolve_parallel(*cmd, config);
      SpiralsData data = o->data;
      CommonOptions common = o->common;
      if (!o->resume.empty()) {
        data = SpiralsData::from_json(adopt_resumed_run(o->resume, *cmd, common, config, request).at("data"));
      } else {
        data.split_seed = common.seed;
        o->mlp.classes = data.spirals.classes;
        request.model_options = o->mlp.to_json();
      }
      config.seed = common.seed;
      request.data = data.to_json();
      apply_common_options(common);
      return run_training(request, data.make(), config, common);
    };
  });
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a spirals checkpoint on its run's split; prints JSON");
  auto o = std::make_shared<EvalOptions>();
  add_eval_options(cmd, *o);
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      nlohmann::json config;
      auto model = load_model_from_checkpoint(o->checkpoint, &config, "spirals train");
      model->to(device);
      const auto splits = SpiralsData::from_json(config.at("data")).make();
      const auto& part = pick_split(splits, o->split);
      const int64_t batch = config.at("train").at("batch_size");
      auto metrics = train::evaluate(*model, *part, batch, device);
      metrics["split"] = o->split;
      metrics["size"] = part->size();
      std::printf("%s\n", metrics.dump(2).c_str());
      return 0;
    };
  });
}

}  // namespace

void register_spirals(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("spirals", "the trainer's end-to-end demo: an MLP on built-in 2-D spirals");
  cmd->require_subcommand(1);
  register_train(cmd, action);
  register_eval(cmd, action);
}

}  // namespace qkv::cli
