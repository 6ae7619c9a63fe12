// qkv vnt train|eval|predict|attention|compare: rotation-invariant point-cloud
// classification (VNT-Net, VN-DGCNN and the non-invariant xyz baseline) on
// ModelNet40 in its public layouts or on the built-in synthetic shapes, under
// the z/z, z/SO(3) and SO(3)/SO(3) protocols.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/point_commands.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/render.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/tasks/classification.h"
#include "qkv/tasks/voting.h"
#include "qkv/train/result_warnings.h"
#include "qkv/train/run.h"

namespace qkv::cli {
namespace {

namespace pc = qkv::pointcloud;
using tasks::ClassificationData;

// --votes if given (> 0), else the votes the run was trained to use.
int64_t resolved_votes(int64_t option, const ClassificationData& run) { return option > 0 ? option : run.votes; }

void register_train(CLI::App* parent, Action& action) {
  struct State {
    ClassificationData data;
    PointModelOptions model;
  };
  auto s = std::make_shared<State>();
  s->model.model = "vnt";
  TrainCommand spec;
  spec.command = tasks::kClassificationCommand;
  spec.description = "train a point-cloud classifier; writes the run folder --out";
  spec.default_out = "runs/vnt";
  tasks::set_paper_training_defaults(spec.defaults, s->data.view);
  spec.add_data_options = [s](CLI::App* cmd) {
    add_field_options(cmd, s->data);
    accept_axis_names(cmd);
    cmd->add_flag("--strict", s->data.load.strict,
                  "a file in a class folder that is not a shape file is an error (by default it is skipped and counted)");
  };
  spec.add_model_options = [s](CLI::App* cmd) { add_point_model_options(cmd, s->model, "classification", 16, 24); };
  spec.prepare = [s](const CLI::App&, train::RunRequest& r, const std::string& out) {
    r.model_name = s->model.model;
    r.model_options = model_options_from_cli(s->model);
    tasks::prepare_point_data(s->data, r, out);
  };
  spec.check_outputs = tasks::check_point_outputs<ClassificationData>;
  spec.load = [](train::RunRequest& r, const LoadContext& context) {
    auto d = ClassificationData::from_json(r.data);
    const auto loaded = load_point_data(d, context);
    auto s = tasks::make_splits(d, loaded);
    if (context.resume && s.class_names != d.class_names)
      throw DataError("--resume " + context.run_dir + ": the data's classes differ from the stored run's");
    d.class_names = s.class_names;
    r.data = d.to_json();
    r.model_options["classes"] = static_cast<int64_t>(s.class_names.size());
    TaskRun run;
    run.splits = s.splits;
    run.hooks.extra_tests = s.extra_tests;
    run.hooks.test_model = tasks::voted_test_model(d.votes);
    const auto names = s.class_names;
    run.hooks.final_metrics = [names] { return std::make_unique<train::AccuracyMetric>(names); };
    run.test_label = pc::rotation_name(tasks::parse_protocol(d.protocol).second);
    return run;
  };
  register_train_command(parent, action, std::move(spec));
}

auto load_run(const std::string& checkpoint, const c10::Device& device) {
  return tasks::load_point_run<ClassificationData>(checkpoint, device, tasks::kClassificationCommand);
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a vnt checkpoint; prints JSON (accuracy, mean class accuracy, "
                                             "confusion matrix)");
  struct Opts {
    EvalOptions eval;
    std::string data, rotate = "so3";
    int64_t invariance_shapes = 0, votes = 0;
  };
  auto o = std::make_shared<Opts>();
  add_eval_options(cmd, o->eval);
  add_votes_option(cmd, o->votes);
  cmd->add_option("--data", o->data, "data folder or 'synthetic'; default: the run's own data");
  cmd->add_option("--rotate", o->rotate, "rotations of the evaluated clouds: none, z or so3 (so3 by default: eval tests invariance; predict takes the file as it is)")->capture_default_str();
  add_ranged_option(cmd, "--invariance", o->invariance_shapes,
                    "also measure the largest logit change under 4 random rotations on this many shapes", 0, 100000);
  cmd->callback([o, &action] {
    action = [o] {
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->eval.common);
      auto run = load_run(o->eval.checkpoint, device);
      ClassificationData d = run.data;
      if (!o->data.empty()) d.source = o->data;
      const auto loaded = d.load_data();
      if (loaded.train.class_names != run.data.class_names)
        throw DataError(d.source + ": its classes differ from those the checkpoint was trained on");
      // The chosen split (val and train as the run cut them), viewed in eval
      // mode under the requested rotation.
      const int64_t votes = resolved_votes(o->votes, run.data);
      const auto part = tasks::eval_split(d, loaded, o->eval.split, rotation, votes);
      const int64_t batch = run.config.at("train").at("batch_size");
      const auto names = run.data.class_names;
      tasks::VoteAveraged voted(*run.model, votes);
      auto metrics = train::evaluate(voted, *part, batch, device,
                                     [names] { return std::make_unique<train::AccuracyMetric>(names); });
      metrics["split"] = o->eval.split;
      metrics["rotate"] = pc::rotation_name(rotation);
      metrics["votes"] = votes;
      metrics["size"] = part->size();
      if (o->invariance_shapes > 0)
        metrics["invariance"] = tasks::measure_invariance(*run.model, *part, o->invariance_shapes, 4, o->eval.common.seed,
                                                   device);
      // For the reader, scikit-learn's layout on stderr; stdout stays JSON.
      if (metrics.contains("per_class"))
        std::fprintf(stderr, "%s", train::format_classification_report(metrics, metrics.at("accuracy")).c_str());
      for (const auto& w : train::degenerate_result_warnings(metrics)) std::fprintf(stderr, "warning: %s\n", w.c_str());
      print_json(metrics);
      return 0;
    };
  });
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("predict", "classify one shape file (a mesh or a point cloud, --input); "
                                                "prints class probabilities");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, input, rotate = "none";
    int64_t top = 5, votes = 0;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)");
  cmd->add_option("--input", o->input, "shape file: a mesh (.off .ply .obj .stl) or a point cloud (.ply .pcd, or x y z [nx ny nz] lines in .txt .xyz "
                  ".csv)")
      ->required();
  cmd->add_option("--rotate", o->rotate, "rotate the shape first: none, z or so3 (seeded by --seed); none by default: the file as it is")
      ->capture_default_str();
  add_ranged_option(cmd, "--top", o->top, "classes to print (text output)", 1, 100000);
  cmd->add_flag("--json", o->json, "print all class probabilities as JSON");
  add_votes_option(cmd, o->votes);
  add_common_options(cmd, o->common, "");
  cmd->callback([o, &action] {
    action = [o] {
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->common);
      auto run = load_run(o->checkpoint, device);
      const int64_t votes = resolved_votes(o->votes, run.data);
      const auto batch = tasks::single_cloud_batch(run.data, o->input, rotation, o->common.seed, votes);
      torch::NoGradGuard no_grad;
      const auto log_probs = tasks::average_votes(run.model->forward(batch.to(device)), votes);
      const auto probs = log_probs.exp()[0].to(torch::kCPU);
      const auto& names = run.data.class_names;
      const auto order = std::get<1>(probs.sort(0, /*descending=*/true));
      const auto best = names.at(static_cast<size_t>(order[0].item<int64_t>()));
      if (o->json) {
        nlohmann::json p = nlohmann::json::object();
        for (size_t c = 0; c < names.size(); ++c) p[names[c]] = probs[static_cast<int64_t>(c)].item<double>();
        print_json({{"input", o->input}, {"rotate", o->rotate}, {"votes", votes}, {"prediction", best},
                    {"probabilities", p}});
      } else {
        std::printf("%s: %s\n", o->input.c_str(), best.c_str());
        for (int64_t i = 0; i < std::min<int64_t>(o->top, probs.size(0)); ++i) {
          const int64_t c = order[i].item<int64_t>();
          std::printf("  %-16s %.4f\n", names.at(static_cast<size_t>(c)).c_str(), probs[c].item<double>());
        }
      }
      return 0;
    };
  });
}

void register_attention(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "attention", "write the shape and a rotated copy as PLY point clouds and PNG pictures coloured by one attention row (Figure 1)");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, input;
    int64_t query = 0, block = 0;
    std::string scale = "absolute";
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/attention";
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint of a vnt or vnt+n run");
  cmd->add_option("--input", o->input, "shape file: a mesh (.off .ply .obj .stl) or a point cloud (.ply .pcd .txt .xyz .csv)")->required();
  add_ranged_option(cmd, "--query", o->query, "index of the query point whose attention row colours the cloud", 0,
                    1 << 20);
  add_ranged_option(cmd, "--block", o->block, "which basic block's attention (0-based), averaged over its heads", 0,
                    1024);
  cmd->add_option("--scale", o->scale,
                  "colour scale: absolute (0 to the row's largest weight, so a near-uniform row looks uniform) or row "
                  "(the row's smallest to largest weight: contrast stretched)")
      ->capture_default_str()
      ->check(CLI::IsMember({"absolute", "row"}));
  add_common_options(cmd, o->common,
                     "folder for shape.ply/.png and rotated.ply/.png (PLY: per-point 'attention' property)");
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      auto run = load_run(o->checkpoint, device);
      auto pictures = tasks::attention_pictures(*run.model, run.data, o->input, o->query, o->block, o->scale,
                                                o->common.seed, device);
      claim_output_dir(o->common.out, "--out", o->common.overwrite, {"vnt attention", {}});
      auto& report = pictures.report;
      const char* names[] = {"shape", "rotated"};
      for (size_t i = 0; i < 2; ++i) {
        const std::string stem = o->common.out + "/" + names[i];
        pc::write_ply_sized(stem + ".ply", pictures.clouds[i]);
        pc::write_points_png(stem + ".png", pictures.clouds[i], pictures.pictures[i]);
        report[names[i]] = stem + ".ply";
        report[std::string(names[i]) + "_png"] = stem + ".png";
      }
      print_json(report);
      return 0;
    };
  });
}

void register_compare(CLI::App* parent, Action& action) {
  register_point_compare<ClassificationData>(
      parent, action,
      "table of finished vnt runs: accuracy under each test rotation and the measured invariance error",
      tasks::kClassificationCommand, 32, "test_accuracy",
      [](const nlohmann::json& split) { return split.value("accuracy", 0.0); },
      [](const nlohmann::json& rows, int64_t shapes) {
        const std::string note =
            shapes > 0 ? "(max |dlogit|: largest change of any logit over " + std::to_string(shapes) +
                             " test shapes under 4 random SO(3) rotations, float32; float64 in --json)"
                       : "";
        print_compare_table(
            rows, "test_accuracy", [](const nlohmann::json& r) { return r.at("protocol").get<std::string>(); },
            {"test z", "test so3", "test none"},
            [](const nlohmann::json& accuracy) {
              std::vector<std::string> cells;
              for (const char* rotation : {"z", "so3", "none"}) {
                char buf[32] = "-";
                if (accuracy.contains(rotation))
                  std::snprintf(buf, sizeof buf, "%.4f", accuracy.at(rotation).get<double>());
                cells.push_back(buf);
              }
              return cells;
            },
            note);
      });
}

}  // namespace

void register_vnt(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "vnt", "rotation-invariant point-cloud classification: VNT-Net, VN-DGCNN and an xyz baseline");
  cmd->require_subcommand(1);
  register_train(cmd, action);
  register_eval(cmd, action);
  register_predict(cmd, action);
  register_attention(cmd, action);
  register_compare(cmd, action);
}

}  // namespace qkv::cli
