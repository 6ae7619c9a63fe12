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

void register_seg_eval(CLI::App* parent, Action& action) {
  add_settings_command<tasks::PointEvalSettings>(
      parent, action,
      CommandText("eval",
                  "evaluate a seg checkpoint; prints JSON (instance and class mIoU, per-category mIoU, point accuracy)")
          .heading("Evaluation")
          .checkpoint(kEvalCheckpointHelp),
      [](const auto& o, const c10::Device& device) {
        print_json(tasks::evaluate_segmenter_run(point_eval_settings(o), device));
        return 0;
      },
      add_point_eval_split, {"votes"});
}

void register_seg_predict(CLI::App* parent, Action& action) {
  add_settings_command<tasks::PartPredictSettings>(
      parent, action,
      CommandText(
          "predict",
          "label the parts of one shape (a point cloud or a mesh, --input); writes a PLY and PNG coloured by part")
          .heading("Prediction")
          .checkpoint(kEvalCheckpointHelp)
          .json("print the per-point part labels as JSON")
          .out("folder for <input name>.parts.ply (per-point 'label' property) and <input name>.parts.png; "
               "predictions of several shapes can share it",
               tasks::PartPredictSettings{}.out),
      [](const auto& o, const c10::Device& device) {
        auto s = o.settings;
        s.checkpoint = o.checkpoint;
        s.out = o.run.out;
        s.overwrite = o.run.overwrite;
        s.seed = o.run.seed;
        auto result = tasks::predict_parts_to_files(s, device);
        if (o.json) {
          result.report["labels"] = result.labels;
          print_json(result.report);
        } else {
          std::printf("%s", result.text.c_str());
        }
        return 0;
      });
}

}  // namespace

void register_seg(CLI::App& app, Action& action) {
  add_command_group(app, action, "seg",
                    "rotation-invariant part segmentation: VNT-Net, VN-DGCNN and an xyz baseline on ShapeNet-part",
                    {point_train_command(tasks::part_segmentation_train_task, "segmentation"), register_seg_eval,
                     register_seg_predict, point_compare_command(tasks::kPartSegmentationCompare)});
}

}  // namespace qkv::cli
