#include "qkv/pointcloud/point_dataset.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/pointcloud/point_features.h"
#include "qkv/pointcloud/sampling.h"
#include "qkv/pointcloud/transforms.h"

namespace qkv::pointcloud {
namespace {

constexpr double kScaleLow = 0.8, kScaleHigh = 1.25;  // per-shape scale augmentation (PointNet++/DGCNN range)
constexpr double kMaxShift = 0.1;                     // per-shape translation augmentation
constexpr int64_t kMinSurfaceSamples = 2048;          // surface points a mesh is sampled to before the view

// Everything random about one shape's view, drawn before any geometry so that
// the draws stay sequential while the geometry runs in parallel.
struct ViewDraws {
  int64_t fps_start = 0;
  at::Tensor subset;  // [N] int64, for sampling "random"
  double scale = 1;
  at::Tensor shift;     // [3] float64, or undefined
  at::Tensor rotation;  // [3, 3] float64, or undefined
  at::Tensor dropped;   // [N] bool: points replaced by the first one, or undefined
};

// Test-time view v > 0 of shape `index` draws its sampling from here.
constexpr uint64_t kVoteSalt = 0x766f746500000000ULL;  // "vote"
at::Generator vote_generator(uint64_t seed, int64_t vote, int64_t index) {
  return at::make_generator<at::CPUGeneratorImpl>(
      seed_mix(seed_mix(seed, kVoteSalt + static_cast<uint64_t>(vote)), static_cast<uint64_t>(index)));
}

// `sampling_gen`, when given, draws the FPS start and the random subset
// instead of `gen` (a test-time vote); the rest comes from `gen` as in view 0.
ViewDraws draw(const PointViewOptions& o, int64_t stored, bool train, OptionalGenerator gen,
               OptionalGenerator sampling_gen = c10::nullopt) {
  ViewDraws d;
  if (o.sampling == "fps" && train) d.fps_start = torch::randint(stored, {1}, gen, torch::kLong).item<int64_t>();
  if (o.sampling == "random") d.subset = torch::randperm(stored, gen, torch::kLong).slice(0, 0, o.num_points);
  if (sampling_gen) {
    if (o.sampling == "fps") d.fps_start = torch::randint(stored, {1}, sampling_gen, torch::kLong).item<int64_t>();
    if (o.sampling == "random")
      d.subset = torch::randperm(stored, sampling_gen, torch::kLong).slice(0, 0, o.num_points);
  }
  if (train && o.point_dropout > 0) {
    const double ratio = o.point_dropout * torch::rand({1}, gen, torch::kDouble).item<double>();
    d.dropped = torch::rand({o.num_points}, gen, torch::kDouble) <= ratio;
  }
  if (train && o.random_scale)
    d.scale = kScaleLow + (kScaleHigh - kScaleLow) * torch::rand({1}, gen, torch::kDouble).item<double>();
  if (train && o.random_shift) d.shift = kMaxShift * (2 * torch::rand({3}, gen, torch::kDouble) - 1);
  if (o.rotation == Rotation::Up) d.rotation = random_rotation_about_axis(o.up_axis, gen);
  if (o.rotation == Rotation::SO3) d.rotation = random_so3(gen);
  return d;
}

// A shape's stored rows to go with the view's points: normals [P, 3] and
// features [P, F], each undefined when not read, and the rows to write them to.
struct ViewRows {
  at::Tensor normals, features;
  at::Tensor out_normals, out_features;
};

// One shape's view: points [P, 3] (and the rows of `rows`) to [N, 3] (and
// [N, 3], [N, F]), written to the given rows. Features follow their points
// (picked, dropped) and are otherwise left as they are: rotation, scale and
// shift do not act on them. Returns which stored points were taken ([N] int64).
at::Tensor make_view(const at::Tensor& points, const ViewRows& rows, const PointViewOptions& o, const ViewDraws& d,
                     at::Tensor out_points) {
  at::Tensor index;
  if (o.sampling == "fps")
    index = farthest_point_sample(points, o.num_points, d.fps_start);
  else if (o.sampling == "random")
    index = d.subset;
  else
    index = torch::arange(o.num_points, torch::kLong);
  auto x = points.index_select(0, index);
  if (o.normalize) x = normalize_unit_sphere(x);
  if (d.dropped.defined()) x = torch::where(d.dropped.unsqueeze(1), x.slice(0, 0, 1), x);
  if (d.scale != 1) x = x * d.scale;
  if (d.shift.defined()) x = x + d.shift.to(x.scalar_type());
  if (d.rotation.defined()) x = rotate(x, d.rotation);
  out_points.copy_(x);
  // A stored row per point, picked and dropped as the points were.
  const auto follow = [&](const at::Tensor& stored) {
    const auto picked = stored.index_select(0, index);
    return d.dropped.defined() ? torch::where(d.dropped.unsqueeze(1), picked.slice(0, 0, 1), picked) : picked;
  };
  if (rows.out_features.defined()) rows.out_features.copy_(follow(rows.features));
  if (!rows.out_normals.defined()) return index;
  auto n = follow(rows.normals);
  if (d.rotation.defined()) n = rotate(n, d.rotation);
  // Zero normals (none known for a point) stay zero instead of becoming NaN.
  rows.out_normals.copy_(n / n.norm(2, -1, true).clamp_min(1e-12));
  return index;
}

at::Generator eval_generator(uint64_t seed, int64_t index) {
  return at::make_generator<at::CPUGeneratorImpl>(seed_mix(seed, static_cast<uint64_t>(index)));
}

// A cloud's stored feature rows [P, F] for options.point_features, or undefined when none are asked for.
at::Tensor cloud_feature_rows(const Mesh& mesh, const PointViewOptions& o, const std::string& source) {
  if (o.point_features.empty()) return {};
  return point_feature_rows(mesh, parse_point_features(o.point_features, "point_features"), source);
}

void check_options(const PointViewOptions& o) {
  if (o.num_points <= 0) throw UsageError("num_points must be > 0 (got " + std::to_string(o.num_points) + ")");
  if (o.sampling != "fps" && o.sampling != "random" && o.sampling != "first")
    throw UsageError("unknown point sampling '" + o.sampling + "': expected fps, random or first");
  if (o.up_axis < 0 || o.up_axis > 2)
    throw UsageError("up axis must be 0, 1 or 2 (got " + std::to_string(o.up_axis) + ")");
  if (!(o.point_dropout >= 0 && o.point_dropout < 1))
    throw UsageError("point dropout must be in [0, 1) (got " + std::to_string(o.point_dropout) + ")");
  if (o.vote < 0) throw UsageError("vote must be >= 0 (got " + std::to_string(o.vote) + ")");
}

}  // namespace

Rotation parse_rotation(const std::string& name, const std::string& key) {
  const std::string s = lower(name);
  if (s == "none" || s == "i") return Rotation::None;  // "I" in the segmentation papers' protocols
  if (s == "z") return Rotation::Up;
  if (s == "so3") return Rotation::SO3;
  const std::string problem = "unknown rotation '" + name + "': expected none (or i), z or so3";
  if (!key.empty()) throw ConfigError(key, problem);
  throw UsageError(problem);
}

std::string rotation_name(Rotation rotation) {
  switch (rotation) {
    case Rotation::None: return "none";
    case Rotation::Up: return "z";
    case Rotation::SO3: return "so3";
  }
  return "none";
}

PointCloudDataset::PointCloudDataset(std::shared_ptr<const PointCloudSet> set, PointViewOptions options)
    : set_(std::move(set)), options_(std::move(options)) {
  TORCH_CHECK(set_ && set_->points.defined() && set_->points.dim() == 3 && set_->points.size(2) == 3 &&
                  set_->labels.defined() && set_->labels.size(0) == set_->points.size(0),
              "PointCloudDataset: the set must hold points [S, P, 3] and labels [S]");
  check_options(options_);
  const int64_t stored = set_->points.size(1);
  if (options_.num_points > stored)
    throw UsageError("num_points (--points) " + std::to_string(options_.num_points) + " exceeds the " +
                     std::to_string(stored) + " points loaded per shape (--points-per-shape)");
  if (options_.use_normals && !set_->normals.defined())
    throw UsageError("normals were asked for but the data set was loaded without them");
  const auto& f = set_->features;
  if (!options_.point_features.empty() &&
      !(f.defined() && f.dim() == 3 && f.size(0) == set_->size() && f.size(1) == stored &&
        f.size(2) == point_feature_channels(parse_point_features(options_.point_features, "point_features"))))
    throw UsageError("point features " + options_.point_features +
                     " were asked for but the data set was loaded "
                     "without them");
  TORCH_CHECK(!set_->point_labels.defined() || set_->point_labels.sizes() == at::IntArrayRef({set_->size(), stored}),
              "PointCloudDataset: point_labels must be [S, P] like the points");
}

data::Batch PointCloudDataset::get(const std::vector<int64_t>& indices) const {
  const auto b = static_cast<int64_t>(indices.size());
  const int64_t n = options_.num_points, stored = set_->points.size(1);
  for (int64_t i : indices)
    TORCH_CHECK(i >= 0 && i < size(), "PointCloudDataset: index ", i, " is outside 0..", size() - 1);
  std::vector<ViewDraws> draws;
  draws.reserve(indices.size());
  for (int64_t i : indices)
    draws.push_back(options_.train      ? draw(options_, stored, true, c10::nullopt)
                    : options_.vote > 0 ? draw(options_, stored, false, eval_generator(options_.seed, i),
                                               vote_generator(options_.seed, options_.vote, i))
                                        : draw(options_, stored, false, eval_generator(options_.seed, i)));

  auto points = torch::empty({b, n, 3}, torch::kFloat);
  at::Tensor normals = options_.use_normals ? torch::empty({b, n, 3}, torch::kFloat) : at::Tensor();
  const bool with_features = !options_.point_features.empty();
  at::Tensor features = with_features ? torch::empty({b, n, set_->features.size(2)}, torch::kFloat) : at::Tensor();
  const bool per_point = set_->point_labels.defined();
  at::Tensor parts = per_point ? torch::empty({b, n}, torch::kLong) : at::Tensor();
  at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t i = indices[static_cast<size_t>(k)];
      ViewRows rows;
      if (options_.use_normals) rows.normals = set_->normals[i], rows.out_normals = normals[k];
      if (with_features) rows.features = set_->features[i], rows.out_features = features[k];
      const auto taken = make_view(set_->points[i], rows, options_, draws[static_cast<size_t>(k)], points[k]);
      if (per_point) parts[k].copy_(set_->point_labels[i].index_select(0, taken));
    }
  });
  data::Batch batch;
  batch.inputs["points"] = points.transpose(1, 2).contiguous();
  if (options_.use_normals) batch.inputs["normals"] = normals.transpose(1, 2).contiguous();
  if (with_features) batch.inputs["features"] = features.transpose(1, 2).contiguous();
  const auto labels = set_->labels.index_select(0, torch::tensor(indices, torch::kLong));
  if (per_point) {
    batch.inputs["category"] = labels;
    batch.target = parts;
  } else {
    batch.target = labels;
  }
  return batch;
}

at::Tensor prepare_single_cloud(const Mesh& mesh, const PointViewOptions& options, at::Tensor* normals,
                                const std::string& source, at::Tensor* features) {
  check_options(options);
  const auto stored_features = cloud_feature_rows(mesh, options, source);
  const int64_t count = mesh.is_point_cloud()
                            ? std::max<int64_t>(options.num_points, static_cast<int64_t>(mesh.vertices.size()))
                            : std::max(2 * options.num_points, kMinSurfaceSamples);
  // A vote samples the mesh's surface anew; a point cloud's points stay.
  const uint64_t surface_seed = options.vote > 0 && !mesh.is_point_cloud()
                                    ? seed_mix(options.seed, kVoteSalt + static_cast<uint64_t>(options.vote))
                                    : options.seed;
  const auto sampled = sample_surface(mesh, count, surface_seed, source);
  const std::string where = source.empty() ? "" : source + ": ";
  if (options.use_normals && !sampled.normals.defined()) throw DataError(where + "the point cloud has no normals");
  auto points = torch::empty({options.num_points, 3}, torch::kFloat);
  at::Tensor out_normals = options.use_normals ? torch::empty({options.num_points, 3}, torch::kFloat) : at::Tensor();
  const auto d = options.vote > 0 ? draw(options, count, false, eval_generator(options.seed, 0),
                                         vote_generator(options.seed, options.vote, 0))
                                  : draw(options, count, false, eval_generator(options.seed, 0));
  ViewRows rows{options.use_normals ? sampled.normals : at::Tensor(), at::Tensor(), out_normals, at::Tensor()};
  if (stored_features.defined()) {
    rows.features = stored_features.index_select(0, sampled.indices);
    rows.out_features = torch::empty({options.num_points, stored_features.size(1)}, torch::kFloat);
  }
  make_view(sampled.points, rows, options, d, points);
  if (normals) *normals = options.use_normals ? out_normals.t().unsqueeze(0).contiguous() : at::Tensor();
  if (features && rows.out_features.defined()) *features = rows.out_features.t().unsqueeze(0).contiguous();
  return points.t().unsqueeze(0).contiguous();
}

at::Tensor prepare_every_point(const Mesh& mesh, const PointViewOptions& options, at::Tensor* normals,
                               const std::string& source, at::Tensor* features, at::Tensor* unprepared) {
  check_options(options);
  const auto stored_features = cloud_feature_rows(mesh, options, source);
  const std::string where = source.empty() ? "" : source + ": ";
  at::Tensor points, stored_normals;
  if (mesh.is_point_cloud()) {
    check_point_cloud_extent(mesh.vertices, source);
    const auto n = static_cast<int64_t>(mesh.vertices.size());
    points = torch::from_blob(const_cast<Vec3*>(mesh.vertices.data()), {n, 3}, torch::kFloat).clone();
    if (options.use_normals) {
      if (static_cast<int64_t>(mesh.normals.size()) != n) throw DataError(where + "the point cloud has no normals");
      stored_normals = torch::from_blob(const_cast<Vec3*>(mesh.normals.data()), {n, 3}, torch::kFloat).clone();
    }
  } else {
    const auto sampled = sample_surface(mesh, options.num_points, options.seed, source);
    points = sampled.points;
    stored_normals = sampled.normals;
  }
  if (!torch::isfinite(points).all().item<bool>()) throw DataError(where + "a coordinate is not finite");
  if (unprepared) *unprepared = points;
  PointViewOptions all = options;  // every point, in order
  all.num_points = points.size(0);
  all.sampling = "first";
  auto out = torch::empty({all.num_points, 3}, torch::kFloat);
  at::Tensor out_normals = options.use_normals ? torch::empty({all.num_points, 3}, torch::kFloat) : at::Tensor();
  const auto d = draw(all, all.num_points, false, eval_generator(options.seed, 0));
  ViewRows rows{options.use_normals ? stored_normals : at::Tensor(), stored_features, out_normals, at::Tensor()};
  if (stored_features.defined()) rows.out_features = torch::empty_like(stored_features);
  make_view(points, rows, all, d, out);
  if (normals) *normals = options.use_normals ? out_normals.t().unsqueeze(0).contiguous() : at::Tensor();
  if (features && rows.out_features.defined()) *features = rows.out_features.t().unsqueeze(0).contiguous();
  return out.t().unsqueeze(0).contiguous();
}

}  // namespace qkv::pointcloud
