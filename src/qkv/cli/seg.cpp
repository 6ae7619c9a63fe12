// qkv seg train|eval|predict|compare: rotation-invariant part segmentation (VNT-Net,
// VN-DGCNN and the non-invariant xyz baseline) on ShapeNet-part in its public
// layouts or on the built-in synthetic part shapes, under the I/I, I/z,
// I/SO(3), z/SO(3) and SO(3)/SO(3) protocols, scored by instance and class mIoU.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/point_commands.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/render.h"
#include "qkv/tasks/part_segmentation.h"
#include "qkv/train/run.h"

namespace qkv::cli {
namespace {

namespace pc = qkv::pointcloud;
using tasks::PartSegData;

void register_train(CLI::App* parent, Action& action) {
  struct State {
    PartSegData data;
    PointModelOptions model;
  };
  auto s = std::make_shared<State>();
  s->model.model = "vnt-seg";
  TrainCommand spec;
  spec.command = tasks::kPartSegmentationCommand;
  spec.description = "train a part segmenter; writes the run folder --out";
  spec.default_out = "runs/seg";
  tasks::set_paper_training_defaults(spec.defaults, s->data.view);
  spec.defaults.select_metric = "instance_miou";
  spec.add_data_options = [s](CLI::App* cmd) {
    add_field_options(cmd, s->data);
    accept_axis_names(cmd);
    // ShapeNet-part calls its object classes categories; qkv says class
    // everywhere (vnt, seg, data), and keeps the old spellings for a release.
    add_old_spelling(cmd, "--max-per-category", "--max-per-class", s->data.load.max_per_category);
    add_old_spelling(cmd, "--categories", "--classes", s->data.load.categories);
    add_old_spelling(cmd, "--synth-categories", "--synth-classes", s->data.synth.categories);
    add_old_spelling(cmd, "--synth-train-per-category", "--synth-train-per-class", s->data.synth.train_per_category);
    add_old_spelling(cmd, "--synth-val-per-category", "--synth-val-per-class", s->data.synth.val_per_category);
    add_old_spelling(cmd, "--synth-test-per-category", "--synth-test-per-class", s->data.synth.test_per_category);
  };
  spec.add_model_options = [s](CLI::App* cmd) { add_point_model_options(cmd, s->model, "segmentation", 128, 14); };
  spec.prepare = [s](const CLI::App&, train::RunRequest& r, const std::string& out) {
    r.model_name = s->model.model;
    r.model_options = model_options_from_cli(s->model);
    // The model's shape is fixed by the data set: 16 categories, 50 parts.
    for (const char* key : {"categories", "parts"})
      if (r.model_options.contains(key))
        throw UsageError(std::string("--model-options: '") + key +
                         "' is fixed by ShapeNet-part (16 categories, 50 parts)");
    r.model_options["categories"] = static_cast<int64_t>(pc::shapenet_part_categories().size());
    r.model_options["parts"] = pc::kShapeNetPartCount;
    tasks::prepare_point_data(s->data, r, out);
  };
  spec.check_outputs = tasks::check_point_outputs<PartSegData>;
  spec.load = [](train::RunRequest& r, const LoadContext& context) {
    auto d = PartSegData::from_json(r.data);
    const auto loaded = load_point_data(d, context);
    auto s = tasks::make_splits(d, loaded);
    d.trained_categories.clear();
    if (loaded.train.size() > 0) {
      const auto present = std::get<0>(torch::_unique(loaded.train.labels));
      for (int64_t i = 0; i < present.numel(); ++i)
        d.trained_categories.push_back(
            pc::shapenet_part_categories().at(static_cast<size_t>(present[i].item<int64_t>())).name);
    }
    r.data = d.to_json();
    TaskRun run;
    run.splits = s.splits;
    run.hooks.extra_tests = s.extra_tests;
    run.hooks.metrics = tasks::part_iou_metric();
    run.hooks.title = "qkv seg train: " + r.model_name;
    run.test_label = pc::rotation_name(tasks::parse_protocol(d.protocol).second);
    return run;
  };
  register_train_command(parent, action, std::move(spec));
}

auto load_run(const std::string& checkpoint, const c10::Device& device) {
  return tasks::load_point_run<PartSegData>(checkpoint, device, tasks::kPartSegmentationCommand);
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "eval", "evaluate a seg checkpoint; prints JSON (instance and class mIoU, per-category mIoU, point accuracy)");
  struct Opts {
    EvalOptions eval;
    std::string data, rotate = "so3";
    int64_t invariance_shapes = 0;
  };
  auto o = std::make_shared<Opts>();
  add_eval_options(cmd, o->eval);
  cmd->add_option("--data", o->data, "data folder or 'synthetic'; default: the run's own data");
  cmd->add_option("--rotate", o->rotate, "rotations of the evaluated clouds: none (i), z or so3 (so3 by default: eval tests invariance; predict takes the file as it is)")->capture_default_str();
  add_ranged_option(cmd, "--invariance", o->invariance_shapes,
                    "also measure the largest per-point logit change under 4 random rotations on this many shapes", 0,
                    100000);
  cmd->callback([o, &action] {
    action = [o] {
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->eval.common);
      auto run = load_run(o->eval.checkpoint, device);
      PartSegData d = run.data;
      if (!o->data.empty()) d.source = o->data;
      const auto loaded = d.load_data();
      const auto& set = o->eval.split == "train" ? loaded.train : o->eval.split == "val" ? loaded.val : loaded.test;
      const auto part = tasks::view_of(std::make_shared<const pc::PointCloudSet>(set), d.view, false, rotation);
      const int64_t batch = run.config.at("train").at("batch_size");
      auto metrics = train::evaluate(*run.model, *part, batch, device, tasks::part_iou_metric());
      metrics["split"] = o->eval.split;
      metrics["rotate"] = pc::rotation_name(rotation);
      metrics["size"] = part->size();
      if (o->invariance_shapes > 0)
        metrics["invariance"] = tasks::measure_invariance(*run.model, *part, o->invariance_shapes, 4, o->eval.common.seed,
                                                   device);
      print_json(metrics);
      return 0;
    };
  });
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "predict", "label the parts of one shape (a point cloud or a mesh, --input); writes a PLY and PNG coloured by part");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, input, category, rotate = "none";
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/seg-predict";
  add_checkpoint_option(cmd, o->checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)");
  cmd->add_option("--input", o->input,
                  "shape: a point cloud (x y z [nx ny nz] lines, or ShapeNet-part's 'x y z nx ny nz part' lines, "
                  "whose labels are then scored; or .xyz .csv .ply .pcd) whose every point is labelled, or a mesh (.off "
                  ".ply .obj .stl) sampled to the run's --points")
      ->required();
  cmd->add_option("--class", o->category,
                  "the object's class: a ShapeNet-part category name or synset, e.g. Table or 04379243 (REQUIRED)");
  add_old_spelling(cmd, "--category", "--class", o->category);
  cmd->add_option("--rotate", o->rotate, "rotate the shape first: none, z or so3 (seeded by --seed); none by default: the file as it is")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print the per-point part labels as JSON");
  add_common_options(cmd, o->common,
                     "folder for <input name>.parts.ply (per-point 'label' property) and <input name>.parts.png; "
                     "predictions of several shapes can share it");
  cmd->callback([o, &action] {
    action = [o] {
      if (o->category.empty()) throw UsageError("seg predict: --class is required (the object's ShapeNet-part category)");
      const int64_t category = pc::find_part_category(o->category, "--class");
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->common);
      auto run = load_run(o->checkpoint, device);
      const std::string dir = o->common.out;
      if (dir.size() > 4 && dir.substr(dir.size() - 4) == ".ply")
        throw UsageError("--out " + dir + ": --out is a folder (it receives <input name>.parts.ply and .png)");
      const std::string stem = (std::filesystem::path(dir) / std::filesystem::path(o->input).stem()).string();
      const std::string out = stem + ".parts.ply", png = stem + ".parts.png";
      check_output_file(out, "--out", o->common.overwrite);
      check_output_file(png, "--out", o->common.overwrite);

      auto prediction = tasks::predict_parts(*run.model, run.data, o->input, category, rotation, o->common.seed, device);
      claim_output_file(out, "--out", o->common.overwrite, {"seg predict", {}});
      claim_output_file(png, "--out", o->common.overwrite, {"seg predict", {}});
      pc::write_ply_sized(out, prediction.cloud);
      pc::write_points_png(png, prediction.cloud, prediction.picture);
      auto& report = prediction.report;
      report["rotate"] = o->rotate;
      report["ply"] = out;
      report["png"] = png;
      const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(category)];
      const auto& part_names = prediction.part_names;
      const auto& per_part = prediction.per_part;
      const int64_t n = report.at("points");
      if (o->json) {
        report["labels"] = prediction.labels;
        print_json(report);
      } else {
        std::printf("%s: %s, %lld points -> %s\n", o->input.c_str(), cat.name.c_str(), static_cast<long long>(n),
                    out.c_str());
        size_t width = 0;
        for (const auto& name : part_names) width = std::max(width, name.size());
        for (int64_t p = 0; p < cat.parts; ++p)
          std::printf("  %2lld %-*s %6lld points\n", static_cast<long long>(cat.first_part + p), static_cast<int>(width),
                      part_names[static_cast<size_t>(p)].c_str(), static_cast<long long>(per_part[static_cast<size_t>(p)]));
        if (report.contains("miou"))
          std::printf("  against the file's labels: accuracy %.4f, mIoU %.4f\n", report["accuracy"].get<double>(),
                      report["miou"].get<double>());
      }
      return 0;
    };
  });
}

void register_compare(CLI::App* parent, Action& action) {
  register_point_compare<PartSegData>(
      parent, action,
      "table of finished seg runs: instance and class mIoU under each test rotation, invariance error",
      tasks::kPartSegmentationCommand, 16, "test",
      [](const nlohmann::json& split) {
        return nlohmann::json{{"instance_miou", split.value("instance_miou", 0.0)},
                              {"class_miou", split.value("class_miou", 0.0)}};
      },
      [](const nlohmann::json& rows, int64_t shapes) {
        // Protocol names as the papers write them: I/I, I/SO(3), ...
        auto paper = [](const std::string& r) {
          const auto name = pc::rotation_name(pc::parse_rotation(r));
          return name == "none" ? std::string("I") : name == "so3" ? std::string("SO(3)") : name;
        };
        print_compare_table(
            rows, "test",
            [&](const nlohmann::json& r) {
              const auto protocol = r.at("protocol").get<std::string>();
              const auto slash = protocol.find('/');
              return paper(protocol.substr(0, slash)) + "/" + paper(protocol.substr(slash + 1));
            },
            {"test I: inst / class", "test z: inst / class", "test SO(3): inst / class"},
            [](const nlohmann::json& test) {
              std::vector<std::string> cells;
              for (const char* rotation : {"none", "z", "so3"}) {
                char buf[64] = "-";
                if (test.contains(rotation))
                  std::snprintf(buf, sizeof buf, "%.4f / %.4f", test.at(rotation).at("instance_miou").get<double>(),
                                test.at(rotation).at("class_miou").get<double>());
                cells.push_back(buf);
              }
              return cells;
            },
            "(inst / class: instance and class mIoU on the test set rotated as the column says; max |dlogit|: "
            "largest change of any per-point logit over " +
                std::to_string(shapes) + " test shapes under 4 random SO(3) rotations, float32; float64 in --json)");
      });
}

}  // namespace

void register_seg(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "seg", "rotation-invariant part segmentation: VNT-Net, VN-DGCNN and an xyz baseline on ShapeNet-part");
  cmd->require_subcommand(1);
  register_train(cmd, action);
  register_eval(cmd, action);
  register_predict(cmd, action);
  register_compare(cmd, action);
}

}  // namespace qkv::cli
