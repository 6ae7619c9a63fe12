// qkv seg train|eval|predict|compare: rotation-invariant part segmentation (VNT-Net,
// VN-DGCNN and the non-invariant xyz baseline) on ShapeNet-part in its public
// layouts or on the built-in synthetic part shapes, under the I/I, I/z,
// I/SO(3), z/SO(3) and SO(3)/SO(3) protocols, scored by instance and class mIoU.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "qkv/cli/common.h"
#include "qkv/cli/commands.h"
#include "qkv/cli/pointcloud_cli.h"
#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/render.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_parts.h"
#include "qkv/train/part_iou.h"

namespace qkv::cli {
namespace {

namespace pc = qkv::pointcloud;

const char* const kTrainCommand = "seg train";

// Where the shapes come from and how the model sees them; stored in
// config.json so that eval, predict and --resume rebuild the same views.
struct SegData {
  std::string source = "synthetic";  // "synthetic" or a ShapeNet-part folder
  std::string synth_dir;             // synthetic: where the text layout is written (default <out>/synthetic)
  pc::SynthPartsOptions synth;
  pc::ShapeNetPartLoadOptions load;
  pc::PointViewOptions view;
  std::string protocol = "i/i";

  SegData() {
    view.num_points = 2048;
    view.sampling = "random";  // the reader's points are already a random sample: take them all, shuffled
  }

  nlohmann::json to_json() const {
    return {{"source", source},
            {"synth_dir", synth_dir},
            {"synth_train_per_category", synth.train_per_category},
            {"synth_val_per_category", synth.val_per_category},
            {"synth_test_per_category", synth.test_per_category},
            {"synth_points_per_shape", synth.points_per_shape},
            {"synth_categories", synth.categories},
            {"points_per_shape", load.points_per_shape},
            {"max_per_category", load.max_per_category},
            {"categories", load.categories},
            {"points", view.num_points},
            {"sampling", view.sampling},
            {"normalize", view.normalize},
            {"up_axis", view.up_axis},
            {"random_scale", view.random_scale},
            {"random_shift", view.random_shift},
            {"normals", view.use_normals},
            {"protocol", protocol},
            {"seed", view.seed}};
  }

  static SegData from_json(const nlohmann::json& j) {
    SegData d;
    try {
      d.source = j.at("source");
      d.synth_dir = j.at("synth_dir");
      d.synth.train_per_category = j.at("synth_train_per_category");
      d.synth.val_per_category = j.at("synth_val_per_category");
      d.synth.test_per_category = j.at("synth_test_per_category");
      d.synth.points_per_shape = j.at("synth_points_per_shape");
      d.synth.categories = j.at("synth_categories").get<std::vector<std::string>>();
      d.load.points_per_shape = j.at("points_per_shape");
      d.load.max_per_category = j.at("max_per_category");
      d.load.categories = j.at("categories").get<std::vector<std::string>>();
      d.view.num_points = j.at("points");
      d.view.sampling = j.at("sampling");
      d.view.normalize = j.at("normalize");
      d.view.up_axis = j.at("up_axis");
      d.view.random_scale = j.at("random_scale");
      d.view.random_shift = j.at("random_shift");
      d.view.use_normals = j.at("normals");
      d.protocol = j.at("protocol");
      d.view.seed = j.at("seed");
    } catch (const nlohmann::json::exception& e) {
      throw DataError(std::string("the run's data configuration is incomplete (") + e.what() + ")");
    }
    d.copy_view_settings();
    return d;
  }

  // The seed and the normals flag are stored once, in `view`.
  void copy_view_settings() {
    synth.seed = load.seed = view.seed;
    load.with_normals = view.use_normals;
  }

  // Writes the synthetic shapes (the same options give the same files) and
  // loads the folder.
  pc::ShapeNetPartData load_data() const {
    std::string dir = source;
    if (source == "synthetic") {
      dir = synth_dir;
      clear_synthetic_dir(dir, "qkv data synth-parts", "--synth-dir");
      const auto summary = pc::write_synth_parts(dir, synth);
      std::fprintf(stderr, "synthetic parts: %zu categories, %lld shapes in %s\n", summary.categories.size(),
                   static_cast<long long>(summary.files()), dir.c_str());
    }
    auto data = pc::load_shapenet_part(dir, load);
    std::fprintf(stderr, "%s (%s): %lld train / %lld val / %lld test shapes\n", dir.c_str(), data.layout.c_str(),
                 static_cast<long long>(data.train.size()), static_cast<long long>(data.val.size()),
                 static_cast<long long>(data.test.size()));
    return data;
  }
};

// The scores of ShapeNet-part: mIoU with each shape's category's parts.
train::MetricFactory part_iou_metric() {
  return [] {
    std::vector<std::vector<int64_t>> parts;
    for (const auto& c : pc::shapenet_part_categories()) {
      parts.emplace_back(static_cast<size_t>(c.parts));
      std::iota(parts.back().begin(), parts.back().end(), c.first_part);
    }
    return std::make_unique<train::PartIoUMetric>(parts, pc::shapenet_part_category_names());
  };
}

struct SegSplits {
  data::Splits splits;
  std::vector<std::pair<std::string, data::DatasetPtr>> extra_tests;  // the other test rotations
};

// Train and val under the training rotation, test under the protocol's test
// rotation, and the test set again under each other rotation (none, z, so3),
// so that one run gives I/I, I/z and I/SO(3) alike.
SegSplits make_splits(const SegData& d, const pc::ShapeNetPartData& data) {
  const auto [train_rotation, test_rotation] = parse_protocol(d.protocol);
  auto train_set = std::make_shared<const pc::PointCloudSet>(data.train);
  auto val_set = std::make_shared<const pc::PointCloudSet>(data.val);
  auto test_set = std::make_shared<const pc::PointCloudSet>(data.test);
  SegSplits s;
  s.splits.train = view_of(train_set, d.view, true, train_rotation);
  s.splits.val = view_of(val_set, d.view, false, train_rotation);
  s.splits.test = view_of(test_set, d.view, false, test_rotation);
  for (const auto rotation : {pc::Rotation::None, pc::Rotation::Up, pc::Rotation::SO3})
    if (rotation != test_rotation)
      s.extra_tests.emplace_back(pc::rotation_name(rotation), view_of(test_set, d.view, false, rotation));
  return s;
}

void add_data_options(CLI::App* cmd, SegData& d) {
  cmd->add_option("--data", d.source,
                  "'synthetic' (built-in part shapes) or a ShapeNet-part folder: "
                  "shapenetcore_partanno_segmentation_benchmark_v0_normal or hdf5_data")
      ->capture_default_str();
  cmd->add_option("--synth-dir", d.synth_dir, "where --data synthetic writes its shapes; default OUT/synthetic");
  cmd->add_option("--synth-train-per-category", d.synth.train_per_category, "synthetic training shapes per category")
      ->capture_default_str();
  cmd->add_option("--synth-val-per-category", d.synth.val_per_category, "synthetic validation shapes per category")
      ->capture_default_str();
  cmd->add_option("--synth-test-per-category", d.synth.test_per_category, "synthetic test shapes per category")
      ->capture_default_str();
  cmd->add_option("--synth-points-per-shape", d.synth.points_per_shape, "surface points written per synthetic shape")
      ->capture_default_str();
  cmd->add_option("--synth-categories", d.synth.categories,
                  "synthetic categories to write (comma-separated; qkv data synth-parts --list); default all")
      ->delimiter(',');
  cmd->add_option("--categories", d.load.categories, "load only these categories (names or synsets); default all")
      ->delimiter(',');
  cmd->add_option("--points-per-shape", d.load.points_per_shape,
                  "points each shape is resampled to when loaded (2048 as in the standard readers)")
      ->capture_default_str();
  cmd->add_option("--max-per-category", d.load.max_per_category,
                  "keep at most this many shapes per category and split; 0 = all")
      ->capture_default_str();
  add_view_options(cmd, d.view, "how they are picked: random (a fresh subset each epoch), fps, first",
                   "axis of the z rotations: 0 x, 1 y (ShapeNet), 2 z");
  cmd->add_option("--protocol", d.protocol,
                  "train/test rotations: i/i, i/z, i/so3, z/z, z/so3, so3/so3 (i = none); every run also scores "
                  "the test set under the other rotations")
      ->capture_default_str();
}

// Model, run configuration and data description of a `seg train` checkpoint.
struct LoadedRun {
  models::ModelPtr model;
  nlohmann::json config;
  SegData data;
};

LoadedRun load_run(const std::string& checkpoint, const c10::Device& device) {
  LoadedRun r;
  r.model = load_model_from_checkpoint(checkpoint, &r.config, kTrainCommand);
  r.model->to(device);
  r.model->eval();
  r.data = SegData::from_json(r.config.at("data"));
  return r;
}

void register_train(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("train", "train a part segmenter; writes the run folder --out");
  struct Opts {
    CommonOptions common;
    SegData data;
    PointModelOptions model;
    train::TrainConfig train;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/seg";
  o->model.model = "vnt-seg";
  set_paper_training_defaults(o->train, o->data.view);
  o->train.select_metric = "instance_miou";
  add_common_options(cmd, o->common, "run folder: config.json, metrics.jsonl, summary.json, report.html, checkpoints/");
  add_data_options(cmd, o->data);
  add_point_model_options(cmd, o->model, {"vnt-seg", "vn-dgcnn-seg", "xyz-transformer-seg"},
                          "vnt-seg, vn-dgcnn-seg or xyz-transformer-seg (not invariant)", 128, 14);
  add_train_options(cmd, o->train);
  cmd->callback([o, cmd, &action] {
    action = [o, cmd] {
      const auto& m = o->model;
      TrainRequest request{kTrainCommand, m.model, {}, {}, m.init_weights, false};
      train::TrainConfig config = o->train;
      resolve_parallel(*cmd, config);
      SegData d = o->data;
      CommonOptions common = o->common;
      if (!m.resume.empty()) {
        d = SegData::from_json(adopt_resumed_run(m.resume, *cmd, common, config, request).at("data"));
      } else {
        parse_protocol(d.protocol);  // a bad protocol fails before any work
        request.model_options = model_options_from_cli(m.model_options, m.model, m.model == "vnt-seg",
                                                       m.model != "vn-dgcnn-seg", m.linear_dim, m.heads, m.head_dim);
        // The model's shape is fixed by the data set: 16 categories, 50 parts.
        for (const char* key : {"categories", "parts"})
          if (request.model_options.contains(key))
            throw UsageError(std::string("--model-options: '") + key + "' is fixed by ShapeNet-part (16 categories, 50 parts)");
        request.model_options["categories"] = static_cast<int64_t>(pc::shapenet_part_categories().size());
        request.model_options["parts"] = pc::kShapeNetPartCount;
        d.view.seed = common.seed;
        d.view.use_normals = request.model_options.value("normals", false);
        d.copy_view_settings();
        if (d.source == "synthetic" && d.synth_dir.empty()) d.synth_dir = common.out + "/synthetic";
      }
      config.seed = common.seed;
      apply_common_options(common);
      SyntheticDataDir synth_dir(d.source == "synthetic" ? d.synth_dir : "", config.parallel.rank);
      SegData load_view = d;
      if (d.source == "synthetic") load_view.synth_dir = synth_dir.path();
      const auto loaded = load_view.load_data();
      auto s = make_splits(d, loaded);
      request.data = d.to_json();
      train::TrainHooks hooks;
      hooks.extra_tests = s.extra_tests;
      hooks.metrics = part_iou_metric();
      hooks.title = "qkv seg train";
      return run_training(request, s.splits, config, common, hooks);
    };
  });
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
  cmd->add_option("--rotate", o->rotate, "rotations of the evaluated clouds: none (i), z or so3")->capture_default_str();
  cmd->add_option("--invariance", o->invariance_shapes,
                  "also measure the largest per-point logit change under 4 random rotations on this many shapes")
      ->capture_default_str();
  cmd->callback([o, &action] {
    action = [o] {
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->eval.common);
      auto run = load_run(o->eval.checkpoint, device);
      SegData d = run.data;
      if (!o->data.empty()) d.source = o->data;
      const auto loaded = d.load_data();
      const auto& set = o->eval.split == "train" ? loaded.train : o->eval.split == "val" ? loaded.val : loaded.test;
      const auto part = view_of(std::make_shared<const pc::PointCloudSet>(set), d.view, false, rotation);
      const int64_t batch = run.config.at("train").at("batch_size");
      auto metrics = train::evaluate(*run.model, *part, batch, device, part_iou_metric());
      metrics["split"] = o->eval.split;
      metrics["rotate"] = pc::rotation_name(rotation);
      metrics["size"] = part->size();
      if (o->invariance_shapes > 0)
        metrics["invariance"] = measure_invariance(*run.model, *part, o->invariance_shapes, 4, o->eval.common.seed,
                                                   device);
      std::printf("%s\n", metrics.dump(2).c_str());
      return 0;
    };
  });
}

// Distinct colours for the parts of one category (at most 6 in ShapeNet-part).
std::array<uint8_t, 3> part_colour(int64_t local_part) {
  static const std::array<uint8_t, 3> palette[] = {{228, 26, 28},  {55, 126, 184}, {77, 175, 74},  {152, 78, 163},
                                                   {255, 127, 0},  {166, 86, 40},  {247, 129, 191}, {153, 153, 153}};
  return palette[static_cast<size_t>(local_part) % (sizeof palette / sizeof palette[0])];
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "predict", "label the parts of one shape (.txt .xyz .off .ply); writes a PLY and PNG coloured by part");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, input, category, rotate = "none";
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--input", o->input,
                  "shape: a point cloud (x y z [nx ny nz] lines, or ShapeNet-part's 'x y z nx ny nz part' lines, "
                  "whose labels are then scored) whose every point is labelled, or an OFF/PLY mesh, sampled to the "
                  "run's --points")
      ->required();
  cmd->add_option("--category", o->category, "the object's category (ShapeNet-part name or synset)")->required();
  cmd->add_option("--rotate", o->rotate, "rotate the shape first: none, z or so3 (seeded by --seed)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print the per-point part labels as JSON");
  add_common_options(cmd, o->common, "PLY file to write (a PNG picture is written next to it); default: "
                                     "<input name>.parts.ply in the current folder");
  cmd->callback([o, &action] {
    action = [o] {
      const int64_t category = pc::find_part_category(o->category, "--category");
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->common);
      auto run = load_run(o->checkpoint, device);
      const auto& view = run.data.view;
      const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(category)];

      // The points to label: every point of a cloud, or surface samples of a mesh.
      pc::Mesh mesh;
      std::vector<int64_t> truth;
      if (pc::looks_like_part_text(o->input)) {
        auto text = pc::read_part_text(o->input, &cat);
        for (const auto& r : text.rows) {
          mesh.vertices.push_back({r[0], r[1], r[2]});
          mesh.normals.push_back({r[3], r[4], r[5]});
        }
        truth = std::move(text.parts);
      } else {
        mesh = pc::read_shape_file(o->input);
      }
      pc::PointViewOptions every = view;
      every.rotation = rotation;
      every.seed = o->common.seed;
      at::Tensor normals;
      const auto points = pc::prepare_every_point(mesh, every, view.use_normals ? &normals : nullptr, o->input);
      const int64_t n = points.size(2);
      data::Batch batch;
      batch.inputs["points"] = points;
      if (normals.defined()) batch.inputs["normals"] = normals;
      batch.inputs["category"] = torch::full({1}, category, torch::kLong);
      batch.target = torch::zeros({1, n}, torch::kLong);

      torch::NoGradGuard no_grad;
      const auto logits = run.model->forward(batch.to(device))[0].to(torch::kCPU);  // [N, 50]
      const auto local = logits.slice(1, cat.first_part, cat.first_part + cat.parts).argmax(1);
      const auto labels = local + cat.first_part;

      std::string out = o->common.out;
      if (out.empty()) out = std::filesystem::path(o->input).stem().string() + ".parts.ply";
      pc::Mesh cloud;
      const auto pts = points[0].t().contiguous();  // [N, 3]
      for (int64_t i = 0; i < n; ++i) {
        cloud.vertices.push_back({pts[i][0].item<float>(), pts[i][1].item<float>(), pts[i][2].item<float>()});
        cloud.colors.push_back(part_colour(local[i].item<int64_t>()));
      }
      pc::write_ply(out, cloud);
      const auto png = (out.size() > 4 && out.substr(out.size() - 4) == ".ply" ? out.substr(0, out.size() - 4) : out) + ".png";
      pc::write_points_png(png, cloud);

      nlohmann::json report = {{"input", o->input}, {"category", cat.name}, {"points", n}, {"rotate", o->rotate},
                               {"ply", out}, {"png", png}};
      nlohmann::json counts = nlohmann::json::object();
      for (int64_t p = 0; p < cat.parts; ++p)
        counts[std::to_string(cat.first_part + p)] = (local == p).sum().item<int64_t>();
      report["points_per_part"] = counts;
      if (!truth.empty()) {
        const auto t = torch::tensor(truth, torch::kLong);
        std::vector<int64_t> parts(static_cast<size_t>(cat.parts));
        std::iota(parts.begin(), parts.end(), cat.first_part);
        report["accuracy"] = (labels == t).to(torch::kDouble).mean().item<double>();
        report["miou"] = train::shape_part_miou(labels, t, parts);
      }
      if (o->json) {
        report["labels"] = std::vector<int64_t>(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + n);
        std::printf("%s\n", report.dump(2).c_str());
      } else {
        std::printf("%s: %s, %lld points -> %s\n", o->input.c_str(), cat.name.c_str(), static_cast<long long>(n),
                    out.c_str());
        for (const auto& item : counts.items())
          std::printf("  part %-3s %lld points\n", item.key().c_str(), static_cast<long long>(item.value()));
        if (report.contains("miou"))
          std::printf("  against the file's labels: accuracy %.4f, mIoU %.4f\n", report["accuracy"].get<double>(),
                      report["miou"].get<double>());
      }
      return 0;
    };
  });
}

void register_compare(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "compare", "table of finished seg runs: instance and class mIoU under each test rotation, invariance error");
  struct Opts {
    CommonOptions common;
    std::vector<std::string> runs;
    int64_t shapes = 16;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("runs", o->runs, "run folders of `qkv seg train`")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--shapes", o->shapes, "test shapes for the invariance measurement (0: skip it)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  add_common_options(cmd, o->common, "");
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& dir : o->runs) {
        const auto summary = read_summary(dir);
        auto run = load_run(train::RunPaths{dir}.best_checkpoint(), device);
        const auto test_rotation = parse_protocol(run.data.protocol).second;
        nlohmann::json row = {{"run", dir},
                              {"model", run.config.at("model").at("name")},
                              {"protocol", run.data.protocol},
                              {"parameters", summary.value("parameters", 0)}};
        nlohmann::json scores = nlohmann::json::object();
        for (const auto& item : summary.items()) {
          const auto& key = item.key();
          if (key != "test" && key.rfind("test_", 0) != 0) continue;
          const auto rotation = key == "test" ? pc::rotation_name(test_rotation) : key.substr(5);
          scores[rotation] = {{"instance_miou", item.value().value("instance_miou", 0.0)},
                              {"class_miou", item.value().value("class_miou", 0.0)}};
        }
        row["test"] = scores;
        if (o->shapes > 0) {
          const auto loaded = run.data.load_data();
          const auto view = view_of(std::make_shared<const pc::PointCloudSet>(loaded.test), run.data.view, false,
                                    pc::Rotation::None);
          row["invariance"] = measure_invariance(*run.model, *view, o->shapes, 4, o->common.seed, device);
        }
        rows.push_back(row);
      }
      if (o->json) {
        std::printf("%s\n", rows.dump(2).c_str());
        return 0;
      }
      // Protocol names as the papers write them: I/I, I/SO(3), ...
      auto paper = [](std::string r) { return r == "none" ? std::string("I") : r == "so3" ? std::string("SO(3)") : r; };
      std::printf("%-20s %-12s %9s  %-22s %-22s %-22s %12s\n", "model", "protocol", "params", "test I: inst / class",
                  "test z: inst / class", "test SO(3): inst / class", "max |dlogit|");
      for (const auto& r : rows) {
        const auto protocol = r.at("protocol").get<std::string>();
        const auto slash = protocol.find('/');
        const auto train_name = paper(pc::rotation_name(pc::parse_rotation(protocol.substr(0, slash))));
        std::string cells[3];
        int i = 0;
        for (const char* rotation : {"none", "z", "so3"}) {
          char buf[64] = "-";
          if (r.at("test").contains(rotation))
            std::snprintf(buf, sizeof buf, "%.4f / %.4f", r.at("test").at(rotation).at("instance_miou").get<double>(),
                          r.at("test").at(rotation).at("class_miou").get<double>());
          cells[i++] = buf;
        }
        char inv[32] = "-";
        if (r.contains("invariance"))
          std::snprintf(inv, sizeof inv, "%.3g", r.at("invariance").at("float32").at("max_abs_logit_change").get<double>());
        std::printf("%-20s %-12s %9lld  %-22s %-22s %-22s %12s\n", r.at("model").get<std::string>().c_str(),
                    (train_name + "/" + paper(pc::rotation_name(pc::parse_rotation(protocol.substr(slash + 1))))).c_str(),
                    static_cast<long long>(r.at("parameters")), cells[0].c_str(), cells[1].c_str(), cells[2].c_str(),
                    inv);
      }
      std::printf("(inst / class: instance and class mIoU on the test set rotated as the column says; max |dlogit|: "
                  "largest change of any per-point logit over %lld test shapes under 4 random SO(3) rotations, "
                  "float32; float64 in --json)\n",
                  static_cast<long long>(o->shapes));
      return 0;
    };
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
