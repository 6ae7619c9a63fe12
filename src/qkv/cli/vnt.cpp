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
  register_point_train(parent, action, tasks::classification_train_task, "classification");
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a vnt checkpoint; prints JSON (accuracy, mean class accuracy, "
                                             "confusion matrix)");
  struct Opts {
    RunOptions run;
    tasks::PointEvalSettings settings;
  };
  auto o = std::make_shared<Opts>();
  add_eval_options(cmd, o->settings.checkpoint, o->settings.split, o->run);
  add_field_options(cmd, o->settings);
  on_run(cmd, action, [o] {
    auto s = o->settings;
    s.seed = o->run.seed;
    const auto metrics = tasks::evaluate_classifier_run(s, apply_run_options(o->run));
    // For the reader, scikit-learn's layout on stderr; stdout stays JSON.
    if (metrics.contains("per_class"))
      std::fprintf(stderr, "%s", train::format_classification_report(metrics, metrics.at("accuracy")).c_str());
    for (const auto& w : train::degenerate_result_warnings(metrics)) std::fprintf(stderr, "warning: %s\n", w.c_str());
    print_json(metrics);
    return 0;
  });
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("predict", "classify one shape file (a mesh or a point cloud, --input); "
                                                "prints class probabilities");
  struct Opts {
    RunOptions common;
    std::string checkpoint;
    tasks::ShapePredictSettings s;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)");
  add_field_options(cmd, o->s);
  cmd->add_flag("--json", o->json, "print all class probabilities as JSON");
  add_common_options(cmd, o->common, "");
  on_run(cmd, action, [o] {
    const auto& s = o->s;
    const auto result = tasks::classify_shape_file(o->checkpoint, s.input, s.rotate, o->common.seed, s.votes,
                                                   apply_run_options(o->common));
    if (o->json)
      print_json(result.to_json(s.input, s.rotate));
    else
      std::printf("%s", result.text(s.input, s.top).c_str());
    return 0;
  });
}

void register_attention(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "attention", "write the shape and a rotated copy as PLY point clouds and PNG pictures coloured by one attention row (Figure 1)");
  struct Opts {
    RunOptions common;
    std::string checkpoint;
    tasks::AttentionSettings settings;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/attention";
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint of a vnt or vnt+n run");
  add_field_options(cmd, o->settings);
  add_common_options(cmd, o->common,
                     "folder for shape.ply/.png and rotated.ply/.png (PLY: per-point 'attention' property)");
  on_run(cmd, action, [o] {
    const c10::Device device = apply_run_options(o->common);
    print_json(tasks::write_attention_pictures(o->checkpoint, o->settings, o->common.seed, o->common.out,
                                               o->common.overwrite, device));
    return 0;
  });
}

void register_compare(CLI::App* parent, Action& action) {
  register_point_compare(
      parent, action, "table of finished vnt runs: accuracy under each test rotation and the measured invariance error",
      tasks::kClassificationCommand, 32, tasks::compare_classifier_runs, tasks::classifier_compare_text);
}

}  // namespace

void register_vnt(CLI::App& app, Action& action) {
  add_command_group(app, action, "vnt",
                    "rotation-invariant point-cloud classification: VNT-Net, VN-DGCNN and an xyz baseline",
                    {register_train, register_eval, register_predict, register_attention, register_compare});
}

}  // namespace qkv::cli
