#include "qkv/tasks/classification.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "qkv/core/errors.h"
#include "qkv/core/png.h"
#include "qkv/models/vnt_net.h"
#include "qkv/core/output_policy.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/tasks/voting.h"

namespace qkv::tasks {

namespace pc = qkv::pointcloud;

OutputMarker synth_shapes_marker(const pc::SynthShapesOptions& o) {
  return {"qkv data synth-shapes",
          {{"train_per_class", o.train_per_class},
           {"test_per_class", o.test_per_class},
           {"classes", o.classes},
           {"seed", o.seed}}};
}

namespace {


// ModelNet has no validation split: a seeded shuffle of its train set gives
// {train, val} indices.
std::pair<std::vector<int64_t>, std::vector<int64_t>> train_val_indices(const ClassificationData& d, int64_t shapes) {
  std::vector<int64_t> order(static_cast<size_t>(shapes));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(d.view.seed);
  std::shuffle(order.begin(), order.end(), rng);
  const auto n_val = static_cast<std::ptrdiff_t>(d.val_fraction * static_cast<double>(order.size()));
  return {std::vector<int64_t>(order.begin() + n_val, order.end()),
          std::vector<int64_t>(order.begin(), order.begin() + n_val)};
}

}  // namespace

ClassificationData::ClassificationData() {
  view.up_axis = kUpAxisFromLayout;          // the layout's (resolve_up_axis)
  load.points_per_shape = 0;  // every stored point: FPS chooses among all of them, as the paper's sampling does
}

ClassificationData ClassificationData::from_json(const nlohmann::json& j) {
  auto d = fields_from_json<ClassificationData>(j, "the run's data settings");
  d.copy_view_settings();
  return d;
}

void ClassificationData::validate() const {
  if (source.empty()) throw ConfigError("source", "must be 'synthetic' or a folder");
  if (!pc::is_layout_choice(load.layout))
    throw ConfigError("layout", load.layout + ": expected auto, modelnet, split, flat, resampled or hdf5");
  if (source == "synthetic" && load.layout != "auto" && load.layout != "modelnet")
    throw ConfigError("layout", load.layout + ": the synthetic shapes are written as a ModelNet40 tree (auto or modelnet)");
  if (synth.train_per_class < 1) throw ConfigError("synth_train_per_class", "must be at least 1");
  if (synth.test_per_class < 1) throw ConfigError("synth_test_per_class", "must be at least 1");
  if (load.points_per_shape < 0) throw ConfigError("points_per_shape", "must be >= 0 (0 = every stored point)");
  if (load.max_per_class < 0) throw ConfigError("max_per_class", "must be >= 0 (0 = all)");
  if (!(val_fraction >= 0 && val_fraction <= 0.9)) throw ConfigError("val_fraction", "must be in [0, 0.9]");
  if (votes < 1 || votes > 64) throw ConfigError("votes", "must be in [1, 64]");
  validate_view(view);
  if (load.points_per_shape > 0 && view.num_points > load.points_per_shape)
    throw ConfigError("points", std::to_string(view.num_points) + " is more than the " +
                                    std::to_string(load.points_per_shape) + " points stored per shape");
  parse_protocol(protocol);
}

void ClassificationData::copy_view_settings() {
  synth.seed = load.seed = view.seed;
  load.with_normals = view.use_normals;
}

void ClassificationData::check_synthetic_dir(const std::string& dir, bool overwrite) const {
  if (source == "synthetic") claim_synthetic_dir(dir, "synth_dir", overwrite, synth_shapes_marker(synth), true);
}

pc::ModelNetData ClassificationData::load_data(const std::string& synth_dir_now, bool overwrite) const {
  std::string dir = source;
  if (source == "synthetic") {
    dir = synth_dir_now;
    if (claim_synthetic_dir(dir, "synth_dir", overwrite, synth_shapes_marker(synth))) {
      pc::SynthShapesOptions o = synth;
      o.overwrite = true;  // the claim above decided what may be replaced
      const auto summary = pc::write_synth_shapes(dir, o);
      mark_output_complete(dir);
      std::fprintf(stderr, "synthetic shapes: %zu classes, %lld files in %s\n", summary.classes.size(),
                   static_cast<long long>(summary.files()), dir.c_str());
    }
  }
  auto data = pc::load_modelnet40(dir, load);
  std::fprintf(stderr, "%s (%s layout%s): %lld train / %lld test shapes, %zu classes\n", dir.c_str(),
               data.layout.c_str(), load.layout == "auto" ? ", detected" : "",
               static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
               data.train.class_names.size());
  if (!data.skipped.empty()) std::fprintf(stderr, "%s: %s\n", dir.c_str(), data.skipped.c_str());
  return data;
}

ClassificationSplits make_splits(const ClassificationData& d, const pc::ModelNetData& data) {
  const auto [train_rotation, test_rotation] = parse_protocol(d.protocol);
  auto train_set = std::make_shared<const pc::PointCloudSet>(data.train);
  auto test_set = std::make_shared<const pc::PointCloudSet>(data.test);
  const auto [train_idx, val_idx] = train_val_indices(d, train_set->size());
  ClassificationSplits s;
  s.splits.train = std::make_shared<data::SubsetDataset>(view_of(train_set, d.view, true, train_rotation), train_idx);
  s.splits.val = std::make_shared<data::SubsetDataset>(view_of(train_set, d.view, false, train_rotation), val_idx);
  s.splits.test = voted_view_of(test_set, d.view, test_rotation, d.votes);
  for (const auto rotation : {train_rotation, pc::Rotation::SO3})
    if (rotation != test_rotation &&
        std::none_of(s.extra_tests.begin(), s.extra_tests.end(),
                     [&](const auto& e) { return e.first == pc::rotation_name(rotation); }))
      s.extra_tests.emplace_back(pc::rotation_name(rotation), voted_view_of(test_set, d.view, rotation, d.votes));
  s.class_names = data.train.class_names;
  return s;
}

data::DatasetPtr voted_view_of(const std::shared_ptr<const pc::PointCloudSet>& set, const pc::PointViewOptions& view,
                               pc::Rotation rotation, int64_t votes) {
  if (votes <= 1) return view_of(set, view, false, rotation);
  std::vector<data::DatasetPtr> views;
  for (int64_t v = 0; v < votes; ++v) {
    pc::PointViewOptions one = view;
    one.vote = v;
    views.push_back(view_of(set, one, false, rotation));
  }
  return std::make_shared<VotedViews>(std::move(views));
}

std::function<models::ModelPtr(models::Model&)> voted_test_model(int64_t votes) {
  if (votes <= 1) return {};
  return [votes](models::Model& trained) { return std::make_shared<VoteAveraged>(trained, votes); };
}

data::DatasetPtr eval_split(const ClassificationData& d, const pc::ModelNetData& data, const std::string& split,
                            pc::Rotation rotation, int64_t votes) {
  const bool test = split == "test";
  auto set = std::make_shared<const pc::PointCloudSet>(test ? data.test : data.train);
  data::DatasetPtr part = voted_view_of(set, d.view, rotation, votes);
  if (test) return part;
  const auto [train_idx, val_idx] = train_val_indices(d, set->size());
  return std::make_shared<data::SubsetDataset>(part, split == "val" ? val_idx : train_idx);
}

data::Batch single_cloud_batch(const ClassificationData& d, const std::string& path, pc::Rotation rotation,
                               uint64_t seed, int64_t votes) {
  pc::PointViewOptions view = d.view;
  view.rotation = rotation;
  view.seed = seed;
  view.train = false;
  const auto mesh = pc::read_shape_file(path);
  std::vector<at::Tensor> points, normals;
  for (int64_t v = 0; v < std::max<int64_t>(1, votes); ++v) {
    view.vote = v;
    at::Tensor n;
    points.push_back(pc::prepare_single_cloud(mesh, view, view.use_normals ? &n : nullptr, path));
    normals.push_back(n);
  }
  data::Batch batch;
  batch.inputs["points"] = torch::cat(points, 0);
  if (view.use_normals) batch.inputs["normals"] = torch::cat(normals, 0);
  batch.target = torch::zeros({1}, torch::kLong);
  return batch;
}

AttentionPictures attention_pictures(models::Model& model, const ClassificationData& data, const std::string& input,
                                     int64_t query, int64_t block, const std::string& scale, uint64_t seed,
                                     const c10::Device& device) {
  auto* vnt = dynamic_cast<models::VNTBackbone*>(&model);
  if (!vnt) throw UsageError("attention maps need a vnt or vnt+n model");
  if (scale != "absolute" && scale != "row") throw UsageError("scale " + scale + ": expected absolute or row");
  if (block < 0 || block >= vnt->options().blocks)
    throw UsageError("block " + std::to_string(block) + ": the model has " + std::to_string(vnt->options().blocks) +
                     " blocks");
  const auto batch = single_cloud_batch(data, input, pc::Rotation::None, seed);
  const int64_t n = batch.input("points").size(2);
  if (query < 0 || query >= n)
    throw UsageError("query " + std::to_string(query) + ": the cloud has " + std::to_string(n) + " points");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
  const auto turned = rotated(batch, pc::random_so3(gen).to(torch::kFloat));
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> rows;
  for (const data::Batch* b : {&batch, &turned}) {
    std::vector<at::Tensor> attention;
    vnt->point_features(b->to(device), &attention);
    rows.push_back(attention.at(static_cast<size_t>(block))[0].mean(0)[query].to(torch::kCPU, torch::kDouble));  // [N]
  }
  // Both clouds use the first one's scale, so equal weights get equal
  // colours. A row of N weights sums to 1: uniform attention is 1/N
  // everywhere, which the absolute scale shows as one colour.
  const double top = rows[0].max().item<double>(), bottom = rows[0].min().item<double>();
  const double lo = scale == "row" ? bottom : 0.0;
  const double span = std::max(top - lo, 1e-30);
  const double uniform = 1.0 / static_cast<double>(n);
  AttentionPictures out;
  for (size_t i = 0; i < 2; ++i) {
    const auto pts = (i == 0 ? batch : turned).input("points")[0].t().contiguous();  // [N, 3]
    const float* xyz = pts.data_ptr<float>();
    const auto row = rows[i].contiguous();
    const double* weights = row.data_ptr<double>();
    pc::Mesh& cloud = out.clouds[i];
    pc::VertexProperty weight{"attention", false, {}};
    for (int64_t p = 0; p < n; ++p) {
      cloud.vertices.push_back({xyz[3 * p], xyz[3 * p + 1], xyz[3 * p + 2]});
      cloud.colors.push_back(heat_colour((weights[p] - lo) / span));
      weight.values.push_back(weights[p]);
    }
    cloud.vertex_properties.push_back(std::move(weight));
    pc::PointPicture& picture = out.pictures[i];
    picture.title = std::string(i == 0 ? "Input" : "Rotated (random SO(3))") + ": attention of point " +
                    std::to_string(query) + ", block " + std::to_string(block);
    picture.marked_point = query;
    picture.marked_label = "query";
    picture.colourbar = true;
    picture.bar_lo = lo;
    picture.bar_hi = lo + span;
    picture.bar_label = "attention";
    picture.notes = {"mean over heads; " + std::to_string(n) + " points, uniform = 1/" + std::to_string(n) + " = " +
                         compact_number(uniform),
                     "scale " + scale + ": " + compact_number(lo) + " .. " + compact_number(lo + span) +
                         (scale == "row" ? " (stretched to the row's range)" : "")};
  }
  out.report = {{"input", input},
                {"query", query},
                {"block", block},
                {"scale", scale},
                {"max_attention_difference", (rows[0] - rows[1]).abs().max().item<double>()},
                {"max_attention", top},
                {"min_attention", bottom},
                {"uniform_attention", uniform}};
  return out;
}

}  // namespace qkv::tasks
