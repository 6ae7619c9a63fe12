// qkv vnt train|eval|predict|attention|compare: rotation-invariant point-cloud
// classification (VNT-Net, VN-DGCNN and the non-invariant xyz baseline) on
// ModelNet40 in its public layouts or on the built-in synthetic shapes, under
// the z/z, z/SO(3) and SO(3)/SO(3) protocols.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/point_commands.h"
#include "qkv/cli/train_command.h"
#include "qkv/tasks/classification.h"
#include "qkv/train/metrics.h"
#include "qkv/train/result_warnings.h"

namespace qkv::cli {
namespace {

void register_train(CLI::App* parent, Action& action) {
  auto s = std::make_shared<tasks::ClassificationTrainSettings>();
  register_train_command(
      parent, action, tasks::classification_train_task(s),
      [s](CLI::App* cmd) {
        add_field_options(cmd, s->data);
        accept_axis_names(cmd);
      },
      [s](CLI::App* cmd) { add_point_model_options(cmd, s->model, "classification", 16, 24); });
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a vnt checkpoint; prints JSON (accuracy, mean class accuracy, "
                                             "confusion matrix)");
  struct Opts {
    EvalOptions eval;
    tasks::PointEvalSettings settings;
  };
  auto o = std::make_shared<Opts>();
  add_eval_options(cmd, o->eval);
  add_votes_option(cmd, o->settings.votes);
  add_point_eval_options(cmd, o->settings, "none", "logit");
  cmd->callback([o, &action] {
    action = [o] {
      auto s = o->settings;
      s.checkpoint = o->eval.checkpoint;
      s.split = o->eval.split;
      s.seed = o->eval.common.seed;
      const auto metrics = tasks::evaluate_classifier_run(s, apply_common_options(o->eval.common));
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
      const c10::Device device = apply_common_options(o->common);
      const auto result = tasks::classify_shape_file(o->checkpoint, o->input, o->rotate, o->common.seed, o->votes, device);
      if (o->json)
        print_json(result.to_json(o->input, o->rotate));
      else
        std::printf("%s", result.text(o->input, o->top).c_str());
      return 0;
    };
  });
}

void register_attention(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "attention", "write the shape and a rotated copy as PLY point clouds and PNG pictures coloured by one attention row (Figure 1)");
  struct Opts {
    CommonOptions common;
    std::string checkpoint;
    tasks::AttentionSettings settings;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/attention";
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint of a vnt or vnt+n run");
  add_field_options(cmd, o->settings);
  cmd->get_option("--input")->required();
  add_common_options(cmd, o->common,
                     "folder for shape.ply/.png and rotated.ply/.png (PLY: per-point 'attention' property)");
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      print_json(tasks::write_attention_pictures(o->checkpoint, o->settings, o->common.seed, o->common.out,
                                                 o->common.overwrite, device));
      return 0;
    };
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
  register_point_compare(
      cmd, action, "table of finished vnt runs: accuracy under each test rotation and the measured invariance error",
      tasks::kClassificationCommand, 32, tasks::compare_classifier_runs, tasks::classifier_compare_text);
}

}  // namespace qkv::cli
