// qkv seg train|eval|predict|compare: rotation-invariant part segmentation (VNT-Net,
// VN-DGCNN and the non-invariant xyz baseline) on ShapeNet-part in its public
// layouts or on the built-in synthetic part shapes, under the I/I, I/z,
// I/SO(3), z/SO(3) and SO(3)/SO(3) protocols, scored by instance and class mIoU.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/point_commands.h"
#include "qkv/cli/train_command.h"
#include "qkv/tasks/part_segmentation.h"

namespace qkv::cli {
namespace {

void register_train(CLI::App* parent, Action& action) {
  register_point_train(parent, action, tasks::part_segmentation_train_task, "segmentation");
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "eval", "evaluate a seg checkpoint; prints JSON (instance and class mIoU, per-category mIoU, point accuracy)");
  struct Opts {
    RunOptions run;
    tasks::PointEvalSettings settings;
  };
  auto o = std::make_shared<Opts>();
  add_eval_options(cmd, o->settings.checkpoint, o->settings.split, o->run);
  add_field_options(cmd, o->settings, {"votes"});
  on_run(cmd, action, [o] {
    auto s = o->settings;
    s.seed = o->run.seed;
    print_json(tasks::evaluate_segmenter_run(s, apply_run_options(o->run)));
    return 0;
  });
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "predict", "label the parts of one shape (a point cloud or a mesh, --input); writes a PLY and PNG coloured by part");
  struct Opts {
    RunOptions common;
    tasks::PartPredictSettings settings;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto& s = o->settings;
  o->common.out = s.out;
  add_checkpoint_option(cmd, s.checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)");
  add_field_options(cmd, s);
  cmd->add_flag("--json", o->json, "print the per-point part labels as JSON");
  add_common_options(cmd, o->common,
                     "folder for <input name>.parts.ply (per-point 'label' property) and <input name>.parts.png; "
                     "predictions of several shapes can share it");
  on_run(cmd, action, [o] {
    auto s = o->settings;
    s.out = o->common.out;
    s.overwrite = o->common.overwrite;
    s.seed = o->common.seed;
    auto result = tasks::predict_parts_to_files(s, apply_run_options(o->common));
    if (o->json) {
      result.report["labels"] = result.labels;
      print_json(result.report);
    } else {
      std::printf("%s", result.text.c_str());
    }
    return 0;
  });
}

void register_compare(CLI::App* parent, Action& action) {
  register_point_compare(
      parent, action, "table of finished seg runs: instance and class mIoU under each test rotation, invariance error",
      tasks::kPartSegmentationCommand, 16, tasks::compare_segmenter_runs, tasks::segmenter_compare_text);
}

}  // namespace

void register_seg(CLI::App& app, Action& action) {
  add_command_group(app, action, "seg",
                    "rotation-invariant part segmentation: VNT-Net, VN-DGCNN and an xyz baseline on ShapeNet-part",
                    {register_train, register_eval, register_predict, register_compare});
}

}  // namespace qkv::cli
