// qkv spirals train|eval: the trainer's own end-to-end job on built-in data
// (K interleaved spirals, an MLP). It exercises everything a model's train
// command has: splits, checkpoints, resume, reports, weights.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/models/mlp.h"
#include "qkv/tasks/spirals_task.h"

namespace qkv::cli {
namespace {

void register_train(CLI::App* parent, Action& action) {
  struct State {
    tasks::SpiralsData data;
    models::MLPOptions mlp;
  };
  auto s = std::make_shared<State>();
  TrainCommand spec;
  spec.command = tasks::kSpiralsCommand;
  spec.description = "train an MLP on built-in spirals; writes the run folder --out";
  spec.default_out = "runs/spirals";
  spec.batch_norm = false;
  spec.defaults.epochs = 40;
  spec.defaults.batch_size = 64;
  spec.defaults.optim.lr = 1e-2;
  spec.add_data_options = [s](CLI::App* cmd) {
    add_field_options(cmd, s->data);
    // --classes is a list of class names elsewhere (data synth-shapes, seg train).
    add_old_spelling(cmd, "--classes", "--arms", s->data.spirals.classes);
    add_old_spelling(cmd, "--points-per-class", "--points-per-arm", s->data.spirals.points_per_class);
  };
  spec.add_model_options = [s](CLI::App* cmd) {
    add_ranged_option(cmd, "--hidden", s->mlp.hidden, "hidden width", 1, 65536);
    add_ranged_option(cmd, "--layers", s->mlp.layers, "hidden layers", 0, 1024);
    add_ranged_option(cmd, "--dropout", s->mlp.dropout, "dropout after each hidden layer", 0, 0.99);
  };
  spec.prepare = [s](const CLI::App&, train::RunRequest& r, const std::string&) {
    tasks::SpiralsData data = s->data;
    data.split_seed = r.seed;
    data.validate();
    models::MLPOptions mlp = s->mlp;
    mlp.classes = data.spirals.classes;
    r.model_name = "mlp";
    r.model_options = mlp.to_json();
    r.data = data.to_json();
  };
  spec.load = [](train::RunRequest& r, const LoadContext&) {
    TaskRun run;
    run.splits = tasks::SpiralsData::from_json(r.data).make();
    return run;
  };
  register_train_command(parent, action, std::move(spec));
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a spirals checkpoint on its run's split; prints JSON");
  auto o = std::make_shared<EvalOptions>();
  add_eval_options(cmd, *o);
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      nlohmann::json config;
      auto model = train::load_model_from_checkpoint(o->checkpoint, &config, tasks::kSpiralsCommand);
      model->to(device);
      const auto splits = tasks::SpiralsData::from_json(config.at("data")).make();
      const auto& part = pick_split(splits, o->split);
      const int64_t batch = config.at("train").at("batch_size");
      auto metrics = train::evaluate(*model, *part, batch, device);
      metrics["split"] = o->split;
      metrics["size"] = part->size();
      print_json(metrics);
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
