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

#include "qkv/cli/common.h"
#include "qkv/cli/pointcloud_cli.h"
#include "qkv/cli/commands.h"
#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/runtime.h"
#include "qkv/models/vnt_net.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/modelnet.h"
#include "qkv/pointcloud/point_dataset.h"
#include "qkv/pointcloud/render.h"
#include "qkv/pointcloud/synth_shapes.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/train/checkpoint.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::cli {
namespace {

namespace pc = qkv::pointcloud;

const char* const kTrainCommand = "vnt train";

// Where the clouds come from and how the model sees them; stored in
// config.json so that eval, predict and --resume rebuild the same views.
struct VntData {
  std::string source = "synthetic";  // "synthetic" or a ModelNet40 folder
  std::string synth_dir;             // synthetic: where the OFF tree is written (default <out>/synthetic)
  pc::SynthShapesOptions synth;
  pc::ModelNetLoadOptions load;
  pc::PointViewOptions view;  // seed, points, augmentation; view_of sets mode and rotation per split
  std::string protocol = "z/z";
  double val_fraction = 0.1;
  std::vector<std::string> class_names;  // filled once loaded

  nlohmann::json to_json() const {
    return {{"source", source},
            {"synth_dir", synth_dir},
            {"synth_train_per_class", synth.train_per_class},
            {"synth_test_per_class", synth.test_per_class},
            {"synth_classes", synth.classes},
            {"points_per_shape", load.points_per_shape},
            {"max_per_class", load.max_per_class},
            {"points", view.num_points},
            {"sampling", view.sampling},
            {"normalize", view.normalize},
            {"up_axis", view.up_axis},
            {"random_scale", view.random_scale},
            {"random_shift", view.random_shift},
            {"normals", view.use_normals},
            {"protocol", protocol},
            {"val_fraction", val_fraction},
            {"seed", view.seed},
            {"class_names", class_names}};
  }

  static VntData from_json(const nlohmann::json& j) {
    VntData d;
    try {
      d.source = j.at("source");
      d.synth_dir = j.at("synth_dir");
      d.synth.train_per_class = j.at("synth_train_per_class");
      d.synth.test_per_class = j.at("synth_test_per_class");
      d.synth.classes = j.at("synth_classes").get<std::vector<std::string>>();
      d.load.points_per_shape = j.at("points_per_shape");
      d.load.max_per_class = j.at("max_per_class");
      d.view.num_points = j.at("points");
      d.view.sampling = j.at("sampling");
      d.view.normalize = j.at("normalize");
      d.view.up_axis = j.at("up_axis");
      d.view.random_scale = j.at("random_scale");
      d.view.random_shift = j.at("random_shift");
      d.view.use_normals = j.at("normals");
      d.protocol = j.at("protocol");
      d.val_fraction = j.at("val_fraction");
      d.view.seed = j.at("seed");
      d.class_names = j.at("class_names").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      throw DataError(std::string("the run's data configuration is incomplete (") + e.what() + ")");
    }
    d.copy_view_settings();
    return d;
  }

  // The seed and the normals flag are stored once, in `view`; the shape
  // generator and the loader take copies.
  void copy_view_settings() {
    synth.seed = load.seed = view.seed;
    load.with_normals = view.use_normals;
  }

  // Writes the synthetic shapes (the same options give the same files) and
  // loads the folder. A tree left by other options is replaced, so that no
  // stale shape is loaded; a non-empty folder that is not such a tree is
  // refused rather than deleted.
  pc::ModelNetData load_data() const {
    std::string dir = source;
    if (source == "synthetic") {
      dir = synth_dir;
      clear_synthetic_dir(dir, "qkv data synth-shapes", "--synth-dir");
      pc::SynthShapesOptions o = synth;
      const auto summary = pc::write_synth_shapes(dir, o);
      std::fprintf(stderr, "synthetic shapes: %zu classes, %lld files in %s\n", summary.classes.size(),
                   static_cast<long long>(summary.files()), dir.c_str());
    }
    auto data = pc::load_modelnet40(dir, load);
    std::fprintf(stderr, "%s (%s): %lld train / %lld test shapes, %zu classes\n", dir.c_str(), data.layout.c_str(),
                 static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                 data.train.class_names.size());
    return data;
  }
};

struct VntSplits {
  data::Splits splits;
  std::vector<std::pair<std::string, data::DatasetPtr>> extra_tests;  // the other test rotations
  std::vector<std::string> class_names;
};

// ModelNet has no validation split: a seeded shuffle of its train set gives
// {train, val} indices.
std::pair<std::vector<int64_t>, std::vector<int64_t>> train_val_indices(const VntData& d, int64_t shapes) {
  std::vector<int64_t> order(static_cast<size_t>(shapes));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(d.view.seed);
  std::shuffle(order.begin(), order.end(), rng);
  const auto n_val = static_cast<std::ptrdiff_t>(d.val_fraction * static_cast<double>(order.size()));
  return {std::vector<int64_t>(order.begin() + n_val, order.end()),
          std::vector<int64_t>(order.begin(), order.begin() + n_val)};
}

// Train and val from ModelNet's train set, test from its test set rotated as
// the protocol says, and the test set again under the training rotation and
// under SO(3) where those differ from the protocol's test rotation.
VntSplits make_splits(const VntData& d, const pc::ModelNetData& data) {
  const auto [train_rotation, test_rotation] = parse_protocol(d.protocol);
  auto train_set = std::make_shared<const pc::PointCloudSet>(data.train);
  auto test_set = std::make_shared<const pc::PointCloudSet>(data.test);
  const auto [train_idx, val_idx] = train_val_indices(d, train_set->size());
  VntSplits s;
  s.splits.train = std::make_shared<data::SubsetDataset>(view_of(train_set, d.view, true, train_rotation), train_idx);
  s.splits.val = std::make_shared<data::SubsetDataset>(view_of(train_set, d.view, false, train_rotation), val_idx);
  s.splits.test = view_of(test_set, d.view, false, test_rotation);
  for (const auto rotation : {train_rotation, pc::Rotation::SO3})
    if (rotation != test_rotation &&
        std::none_of(s.extra_tests.begin(), s.extra_tests.end(),
                     [&](const auto& e) { return e.first == pc::rotation_name(rotation); }))
      s.extra_tests.emplace_back(pc::rotation_name(rotation), view_of(test_set, d.view, false, rotation));
  s.class_names = data.train.class_names;
  return s;
}

void add_data_options(CLI::App* cmd, VntData& d) {
  cmd->add_option("--data", d.source,
                  "'synthetic' (built-in shapes) or a ModelNet40 folder: OFF tree, modelnet40_normal_resampled "
                  "or modelnet40_ply_hdf5_2048")
      ->capture_default_str();
  cmd->add_option("--synth-dir", d.synth_dir, "where --data synthetic writes its OFF tree; default OUT/synthetic");
  cmd->add_option("--synth-train-per-class", d.synth.train_per_class, "synthetic shapes per class for training")
      ->capture_default_str();
  cmd->add_option("--synth-test-per-class", d.synth.test_per_class, "synthetic shapes per class for testing")
      ->capture_default_str();
  cmd->add_option("--synth-classes", d.synth.classes, "synthetic classes to use (comma-separated); default all")
      ->delimiter(',');
  cmd->add_option("--points-per-shape", d.load.points_per_shape,
                  "points stored per shape (mesh surface samples, or the first of pre-sampled files)")
      ->capture_default_str();
  cmd->add_option("--max-per-class", d.load.max_per_class, "keep at most this many shapes per class; 0 = all")
      ->capture_default_str();
  add_view_options(cmd, d.view, "how they are picked: fps (random start in training), random, first",
                   "axis of the z rotations: 0 x, 1 y (ModelNet40), 2 z");
  cmd->add_option("--protocol", d.protocol, "train/test rotations: z/z, z/so3, so3/so3 (also none/...)")
      ->capture_default_str();
  cmd->add_option("--val-fraction", d.val_fraction, "share of the training shapes held out for model selection")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
}

void register_train(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("train", "train a point-cloud classifier; writes the run folder --out");
  struct Opts {
    CommonOptions common;
    VntData data;
    PointModelOptions model;
    train::TrainConfig train;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/vnt";
  o->model.model = "vnt";
  set_paper_training_defaults(o->train, o->data.view);
  add_common_options(cmd, o->common, "run folder: config.json, metrics.jsonl, summary.json, report.html, checkpoints/");
  add_data_options(cmd, o->data);
  add_point_model_options(cmd, o->model, {"vnt", "vnt+n", "vn-dgcnn", "xyz-transformer"},
                          "vnt, vnt+n (xyz and normals), vn-dgcnn or xyz-transformer (not invariant)", 16, 24);
  add_train_options(cmd, o->train);
  cmd->callback([o, cmd, &action] {
    action = [o, cmd] {
      const auto& m = o->model;
      TrainRequest request{kTrainCommand, m.model, {}, {}, m.init_weights, false};
      train::TrainConfig config = o->train;
      resolve_parallel(*cmd, config);
      VntData d = o->data;
      CommonOptions common = o->common;
      if (!m.resume.empty()) {
        d = VntData::from_json(adopt_resumed_run(m.resume, *cmd, common, config, request).at("data"));
      } else {
        parse_protocol(d.protocol);  // a bad protocol fails before any work
        d.view.seed = common.seed;
        d.view.use_normals = m.model == "vnt+n";
        d.copy_view_settings();
        if (d.source == "synthetic" && d.synth_dir.empty()) d.synth_dir = common.out + "/synthetic";
        const bool vnt = m.model == "vnt" || m.model == "vnt+n";
        request.model_options = model_options_from_cli(m.model_options, m.model, vnt, m.model != "vn-dgcnn",
                                                       m.linear_dim, m.heads, m.head_dim);
      }
      config.seed = common.seed;
      apply_common_options(common);
      SyntheticDataDir synth_dir(d.source == "synthetic" ? d.synth_dir : "", config.parallel.rank);
      VntData load_view = d;
      if (d.source == "synthetic") load_view.synth_dir = synth_dir.path();
      const auto loaded = load_view.load_data();
      auto s = make_splits(d, loaded);
      if (!m.resume.empty() && s.class_names != d.class_names)
        throw DataError("--resume " + m.resume + ": the data's classes differ from the stored run's");
      d.class_names = s.class_names;
      request.model_options["classes"] = static_cast<int64_t>(s.class_names.size());
      request.data = d.to_json();
      train::TrainHooks hooks;
      hooks.extra_tests = s.extra_tests;
      const auto names = s.class_names;
      hooks.final_metrics = [names] { return std::make_unique<train::AccuracyMetric>(names); };
      return run_training(request, s.splits, config, common, hooks);
    };
  });
}

// Model, run configuration and data description of a `vnt train` checkpoint.
struct LoadedRun {
  models::ModelPtr model;
  nlohmann::json config;
  VntData data;
};

LoadedRun load_run(const std::string& checkpoint, const c10::Device& device) {
  LoadedRun r;
  r.model = load_model_from_checkpoint(checkpoint, &r.config, kTrainCommand);
  r.model->to(device);
  r.model->eval();
  r.data = VntData::from_json(r.config.at("data"));
  return r;
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a vnt checkpoint; prints JSON (accuracy, mean class accuracy, "
                                             "confusion matrix)");
  struct Opts {
    EvalOptions eval;
    std::string data, rotate = "so3";
    int64_t invariance_shapes = 0;
  };
  auto o = std::make_shared<Opts>();
  add_eval_options(cmd, o->eval);
  cmd->add_option("--data", o->data, "data folder or 'synthetic'; default: the run's own data");
  cmd->add_option("--rotate", o->rotate, "rotations of the evaluated clouds: none, z or so3")->capture_default_str();
  cmd->add_option("--invariance", o->invariance_shapes,
                  "also measure the largest logit change under 4 random rotations on this many shapes")
      ->capture_default_str();
  cmd->callback([o, &action] {
    action = [o] {
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->eval.common);
      auto run = load_run(o->eval.checkpoint, device);
      VntData d = run.data;
      if (!o->data.empty()) d.source = o->data;
      const auto loaded = d.load_data();
      if (loaded.train.class_names != run.data.class_names)
        throw DataError(d.source + ": its classes differ from those the checkpoint was trained on");
      // The chosen split (val and train as the run cut them), viewed in eval
      // mode under the requested rotation.
      const bool test = o->eval.split == "test";
      auto set = std::make_shared<const pc::PointCloudSet>(test ? loaded.test : loaded.train);
      data::DatasetPtr part = view_of(set, d.view, false, rotation);
      if (!test) {
        const auto [train_idx, val_idx] = train_val_indices(d, set->size());
        part = std::make_shared<data::SubsetDataset>(part, o->eval.split == "val" ? val_idx : train_idx);
      }
      const int64_t batch = run.config.at("train").at("batch_size");
      const auto names = run.data.class_names;
      auto metrics = train::evaluate(*run.model, *part, batch, device,
                                     [names] { return std::make_unique<train::AccuracyMetric>(names); });
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

// One file as the run's model sees it: sampled, normalised and rotated by
// `rotation` (seeded), as a one-cloud batch.
data::Batch single_cloud_batch(const VntData& d, const std::string& path, pc::Rotation rotation, uint64_t seed) {
  pc::PointViewOptions view = d.view;
  view.rotation = rotation;
  view.seed = seed;
  view.train = false;
  const auto mesh = pc::read_shape_file(path);
  data::Batch batch;
  at::Tensor normals;
  batch.inputs["points"] = pc::prepare_single_cloud(mesh, view, view.use_normals ? &normals : nullptr, path);
  if (view.use_normals) batch.inputs["normals"] = normals;
  batch.target = torch::zeros({1}, torch::kLong);
  return batch;
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("predict", "classify one shape file (.off .ply .txt .xyz); prints class "
                                                "probabilities");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, input, rotate = "none";
    int64_t top = 5;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--input", o->input, "shape file: OFF or PLY mesh, or x y z [nx ny nz] lines (.txt, .xyz)")
      ->required();
  cmd->add_option("--rotate", o->rotate, "rotate the shape first: none, z or so3 (seeded by --seed)")
      ->capture_default_str();
  cmd->add_option("--top", o->top, "classes to print (text output)")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print all class probabilities as JSON");
  add_common_options(cmd, o->common, "");
  cmd->callback([o, &action] {
    action = [o] {
      const auto rotation = pc::parse_rotation(o->rotate);
      const c10::Device device = apply_common_options(o->common);
      auto run = load_run(o->checkpoint, device);
      const auto batch = single_cloud_batch(run.data, o->input, rotation, o->common.seed);
      torch::NoGradGuard no_grad;
      const auto probs = torch::softmax(run.model->forward(batch.to(device)), -1)[0].to(torch::kCPU);
      const auto& names = run.data.class_names;
      const auto order = std::get<1>(probs.sort(0, /*descending=*/true));
      const auto best = names.at(static_cast<size_t>(order[0].item<int64_t>()));
      if (o->json) {
        nlohmann::json p = nlohmann::json::object();
        for (size_t c = 0; c < names.size(); ++c) p[names[c]] = probs[static_cast<int64_t>(c)].item<double>();
        std::printf("%s\n", nlohmann::json{{"input", o->input}, {"rotate", o->rotate}, {"prediction", best},
                                           {"probabilities", p}}.dump(2).c_str());
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

// A blue -> red ramp for attention weights in [0, 1].
std::array<uint8_t, 3> heat_colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double r = std::clamp(1.5 * t, 0.0, 1.0), g = std::clamp(1.5 - std::abs(3 * t - 1.5), 0.0, 1.0),
               b = std::clamp(1.5 * (1 - t), 0.0, 1.0);
  return {static_cast<uint8_t>(40 + 215 * r), static_cast<uint8_t>(40 + 215 * g), static_cast<uint8_t>(40 + 215 * b)};
}

void register_attention(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "attention", "write the shape and a rotated copy as PLY point clouds and PNG pictures coloured by one attention row (Figure 1)");
  struct Opts {
    CommonOptions common;
    std::string checkpoint, input;
    int64_t query = 0, block = 0;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/attention";
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint of a vnt or vnt+n run")->required()->check(CLI::ExistingFile);
  cmd->add_option("--input", o->input, "shape file (.off .ply .txt .xyz)")->required();
  cmd->add_option("--query", o->query, "index of the query point whose attention row colours the cloud")
      ->capture_default_str();
  cmd->add_option("--block", o->block, "which basic block's attention (0-based), averaged over its heads")
      ->capture_default_str();
  add_common_options(cmd, o->common, "folder for shape.ply/.png and rotated.ply/.png");
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      auto run = load_run(o->checkpoint, device);
      auto* vnt = dynamic_cast<models::VNTBackbone*>(run.model.get());
      if (!vnt) throw UsageError("--checkpoint " + o->checkpoint + ": attention maps need a vnt or vnt+n model");
      if (o->block < 0 || o->block >= vnt->options().blocks)
        throw UsageError("--block " + std::to_string(o->block) + ": the model has " +
                         std::to_string(vnt->options().blocks) + " blocks");
      const auto batch = single_cloud_batch(run.data, o->input, pc::Rotation::None, o->common.seed);
      const int64_t n = batch.input("points").size(2);
      if (o->query < 0 || o->query >= n)
        throw UsageError("--query " + std::to_string(o->query) + ": the cloud has " + std::to_string(n) + " points");
      auto gen = at::make_generator<at::CPUGeneratorImpl>(o->common.seed + 1);
      const auto turned = rotated(batch, pc::random_so3(gen).to(torch::kFloat));
      torch::NoGradGuard no_grad;
      make_directories(o->common.out);
      nlohmann::json report = {{"input", o->input}, {"query", o->query}, {"block", o->block}};
      std::vector<at::Tensor> rows;
      for (const data::Batch* b : {&batch, &turned}) {
        std::vector<at::Tensor> attention;
        vnt->point_features(b->to(device), &attention);
        rows.push_back(attention.at(static_cast<size_t>(o->block))[0].mean(0)[o->query].to(torch::kCPU));  // [N]
      }
      // Colours span the row's own range (attention rows are often close to
      // uniform); both clouds use the first one's range, so equal weights get
      // equal colours.
      const double top = rows[0].max().item<double>(), bottom = rows[0].min().item<double>();
      const double span = std::max(top - bottom, 1e-30);
      const std::string names[] = {"shape.ply", "rotated.ply"};
      for (size_t i = 0; i < 2; ++i) {
        const auto pts = (i == 0 ? batch : turned).input("points")[0].t().contiguous();  // [N, 3]
        pc::Mesh cloud;
        for (int64_t p = 0; p < n; ++p) {
          cloud.vertices.push_back({pts[p][0].item<float>(), pts[p][1].item<float>(), pts[p][2].item<float>()});
          cloud.colors.push_back(heat_colour((rows[i][p].item<double>() - bottom) / span));
        }
        const std::string path = o->common.out + "/" + names[i];
        pc::write_ply(path, cloud);
        pc::write_points_png(path.substr(0, path.size() - 4) + ".png", cloud);
        report[i == 0 ? "shape" : "rotated"] = path;
      }
      report["max_attention_difference"] = (rows[0] - rows[1]).abs().max().item<double>();
      report["max_attention"] = top;
      std::printf("%s\n", report.dump(2).c_str());
      return 0;
    };
  });
}

void register_compare(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "compare", "table of finished vnt runs: accuracy under each test rotation and the measured invariance error");
  struct Opts {
    CommonOptions common;
    std::vector<std::string> runs;
    int64_t shapes = 32;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("runs", o->runs, "run folders of `qkv vnt train`")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--shapes", o->shapes, "test shapes for the invariance measurement")->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON instead of a table");
  add_common_options(cmd, o->common, "");
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& dir : o->runs) {
        const auto summary = read_summary(dir);
        auto run = load_run(train::RunPaths{dir}.best_checkpoint(), device);
        const auto [train_rotation, test_rotation] = parse_protocol(run.data.protocol);
        nlohmann::json row = {{"run", dir},
                              {"model", run.config.at("model").at("name")},
                              {"protocol", run.data.protocol},
                              {"parameters", summary.value("parameters", 0)}};
        nlohmann::json acc = nlohmann::json::object();
        for (const auto& item : summary.items()) {
          if (item.key() == "test") acc[pc::rotation_name(test_rotation)] = item.value().value("accuracy", 0.0);
          if (item.key().rfind("test_", 0) == 0) acc[item.key().substr(5)] = item.value().value("accuracy", 0.0);
        }
        row["test_accuracy"] = acc;
        const auto loaded = run.data.load_data();
        auto view = view_of(std::make_shared<const pc::PointCloudSet>(loaded.test), run.data.view, false,
                            pc::Rotation::None);
        row["invariance"] = measure_invariance(*run.model, *view, o->shapes, 4, o->common.seed, device);
        rows.push_back(row);
      }
      if (o->json) {
        std::printf("%s\n", rows.dump(2).c_str());
        return 0;
      }
      std::printf("%-18s %-9s %10s %10s %10s %10s %14s\n", "model", "protocol", "params", "test z", "test so3",
                  "test none", "max |dlogit|");
      auto cell = [](const nlohmann::json& acc, const char* k) {
        char buf[32];
        if (!acc.contains(k)) return std::string("-");
        std::snprintf(buf, sizeof buf, "%.4f", acc.at(k).get<double>());
        return std::string(buf);
      };
      for (const auto& r : rows)
        std::printf("%-18s %-9s %10lld %10s %10s %10s %14.3g\n", r.at("model").get<std::string>().c_str(),
                    r.at("protocol").get<std::string>().c_str(), static_cast<long long>(r.at("parameters")),
                    cell(r.at("test_accuracy"), "z").c_str(), cell(r.at("test_accuracy"), "so3").c_str(),
                    cell(r.at("test_accuracy"), "none").c_str(),
                    r.at("invariance").at("float32").at("max_abs_logit_change").get<double>());
      std::printf("(max |dlogit|: largest change of any logit over %lld test shapes under 4 random SO(3) rotations, "
                  "float32; float64 in --json)\n",
                  static_cast<long long>(o->shapes));
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
  register_compare(cmd, action);
}

}  // namespace qkv::cli
