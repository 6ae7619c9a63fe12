// qkv vnt train|eval|predict|embed|attention|compare: rotation-invariant point-cloud
// classification (VNT-Net, VN-DGCNN and the non-invariant xyz baseline) on
// ModelNet40 in its public layouts or on the built-in synthetic shapes, under
// the z/z, z/SO(3) and SO(3)/SO(3) protocols.
#include <CLI/CLI.hpp>
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

void register_vnt_eval(CLI::App* parent, Action& action) {
  add_settings_command<tasks::PointEvalSettings>(
      parent, action,
      CommandText("eval", "evaluate a vnt checkpoint; prints JSON (accuracy, mean class accuracy, confusion matrix)")
          .heading("Evaluation")
          .checkpoint(kEvalCheckpointHelp),
      [](const auto& o, const c10::Device& device) {
        const auto metrics = tasks::evaluate_classifier_run(point_eval_settings(o), device);
        // For the reader, scikit-learn's layout on stderr; stdout stays JSON.
        if (metrics.contains("per_class"))
          std::fprintf(stderr, "%s", train::format_classification_report(metrics, metrics.at("accuracy")).c_str());
        for (const auto& w : train::degenerate_result_warnings(metrics))
          std::fprintf(stderr, "warning: %s\n", w.c_str());
        print_json(metrics);
        return 0;
      },
      add_point_eval_split);
}

void register_vnt_predict(CLI::App* parent, Action& action) {
  add_settings_command<tasks::ShapePredictSettings>(
      parent, action,
      CommandText("predict", "classify one shape file (a mesh or a point cloud, --input); prints class probabilities")
          .heading("Prediction")
          .checkpoint(kEvalCheckpointHelp)
          .json("print all class probabilities as JSON"),
      [](const auto& o, const c10::Device& device) {
        const auto& s = o.settings;
        const auto result = tasks::classify_shape_file(o.checkpoint, s.input, s.rotate, o.run.seed, s.votes, device);
        if (o.json)
          print_json(result.to_json(s.input, s.rotate));
        else
          std::printf("%s", result.text(s.input, s.top).c_str());
        return 0;
      });
}

void register_vnt_attention(CLI::App* parent, Action& action) {
  add_settings_command<tasks::AttentionSettings>(
      parent, action,
      CommandText("attention",
                  "write the shape and a rotated copy as PLY point clouds and PNG pictures coloured by one attention "
                  "row (Figure 1)")
          .heading("Attention map")
          .checkpoint("checkpoint of a vnt or vnt+n run")
          .out("folder for shape.ply/.png and rotated.ply/.png (PLY: per-point 'attention' property)",
               "runs/attention"),
      [](const auto& o, const c10::Device& device) {
        print_json(
            tasks::write_attention_pictures(o.checkpoint, o.settings, o.run.seed, o.run.out, o.run.overwrite, device));
        return 0;
      });
}

void register_vnt_embed(CLI::App* parent, Action& action) {
  add_settings_command<tasks::ShapeEmbedSettings>(
      parent, action,
      CommandText("embed",
                  "write the model's rotation-invariant embedding of shapes (files, a folder, or a split of the "
                  "run's data) as embeddings.npy and embeddings.csv, one row per shape")
          .heading("Embedding")
          .checkpoint("checkpoint of a vnt, vnt+n, vnt-local or vn-dgcnn run")
          .out("folder for embeddings.npy ([shapes, dims] float32) and embeddings.csv (shape, class, values)",
               "runs/embed"),
      [](const auto& o, const c10::Device& device) {
        print_json(
            tasks::write_shape_embeddings(o.checkpoint, o.settings, o.run.seed, o.run.out, o.run.overwrite, device));
        return 0;
      });
}

}  // namespace

void register_vnt(CLI::App& app, Action& action) {
  add_command_group(
      app, action, "vnt", "rotation-invariant point-cloud classification: VNT-Net, VN-DGCNN and an xyz baseline",
      {point_train_command(tasks::classification_train_task, "classification"), register_vnt_eval, register_vnt_predict,
       register_vnt_embed, register_vnt_attention, point_compare_command(tasks::kClassificationCompare)});
}

}  // namespace qkv::cli
