#pragma once
// The model's view of a PointCloudSet: N points per shape, sampled, normalised
// to the unit sphere, augmented and rotated, channels first, as a data::Dataset.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qkv/data/dataset.h"
#include "qkv/pointcloud/mesh.h"
#include "qkv/pointcloud/modelnet.h"

namespace qkv::pointcloud {

// The rotation protocol of a split, as rotation-invariance papers name them:
// none, z (about the up axis, which is y for ModelNet40 and ShapeNet), so3.
enum class Rotation { None, Up, SO3 };
// "none" (or "i"), "z" or "so3" (any case); otherwise UsageError naming the
// value, a ConfigError naming the setting `key` too where one is given.
Rotation parse_rotation(const std::string& name, const std::string& key = "");
std::string rotation_name(Rotation rotation);  // the name parse_rotation takes

struct PointViewOptions {
  int64_t num_points = 1024;     // N, at most the stored points per shape
  std::string sampling = "fps";  // fps | random | first: how N of the stored points are chosen
  bool normalize = true;         // centroid to the origin, farthest point at distance 1
  Rotation rotation = Rotation::None;
  int64_t up_axis = 1;        // for Rotation::Up; the axis the data stand on (default_up_axis)
  bool random_scale = false;  // x uniform [0.8, 1.25) per shape; train mode only
  bool random_shift = false;  // + uniform [-0.1, 0.1)^3 per shape; train mode only
  // Train mode only: per shape a ratio r ~ U[0, point_dropout) is drawn and
  // each point is, with probability r, replaced by the shape's first point
  // (Vector Neurons' and PointNet++'s random_point_dropout, at 0.875); 0 = off.
  double point_dropout = 0;
  // Eval mode: which test-time view of a shape (0: the standard one). View
  // v > 0 draws its FPS start or random subset (and a mesh's surface samples)
  // from a generator of its own, and keeps view 0's rotation, so that votes
  // average over samplings of one pose. With sampling "first" every view of a
  // stored cloud is the same.
  int64_t vote = 0;
  bool use_normals = false;  // also return "normals"; the set must have them
  // Also return "features": these per-point features, comma-separated names
  // (point_features.h); the set must hold them. "" = none.
  std::string point_features;
  bool train = false;  // see PointCloudDataset
  uint64_t seed = 0;   // eval mode's draws
};

// get() gives inputs "points" [B, 3, N] float32 and, with use_normals,
// "normals" [B, 3, N] float32 (the same rotation as the points, never scaled or
// shifted, renormalised to unit length), and with point_features "features"
// [B, F, N] float32 (the chosen points' own, never rotated, scaled or shifted); target = labels [B] int64. For a set
// with point_labels (part segmentation): target = the chosen points' labels
// [B, N] int64 and input "category" = labels [B] int64.
// Per shape, in this order: pick N of the stored points (FPS, a random subset
// or the first N), normalise, drop points, scale, shift (train mode only),
// rotate.
//
// Randomness. Train mode: the FPS start, the random subset, scale, shift and
// rotation are drawn from torch's global generator, which the trainer seeds
// and checkpoints, so a resumed run draws the same; every call draws anew.
// Eval mode: FPS starts at point 0 and the rest is drawn from a generator
// seeded with seed_mix(seed, index), so shape `index` gets the same points and
// the same rotation on every call, every epoch and every run.
// Draws are made one shape after another; the geometry then runs in parallel
// over the batch (at::parallel_for), which changes no result.
class PointCloudDataset : public data::Dataset {
 public:
  // Checks the options against the set: UsageError for a bad option (N larger
  // than the stored points, unknown sampling, normals the set does not have).
  PointCloudDataset(std::shared_ptr<const PointCloudSet> set, PointViewOptions options);

  int64_t size() const override { return set_->size(); }
  data::Batch get(const std::vector<int64_t>& indices) const override;

  const PointCloudSet& set() const { return *set_; }
  const PointViewOptions& options() const { return options_; }

 private:
  std::shared_ptr<const PointCloudSet> set_;
  PointViewOptions options_;
};

// One shape for prediction: a mesh is first sampled on its surface to
// max(2 num_points, 2048) points (seeded with options.seed), a point cloud is
// used as it is (repeating points if it has fewer than num_points); then the
// eval-mode view of index 0 (options.train is ignored). Returns [1, 3, N]
// float32; with use_normals, *normals (if given) receives [1, 3, N]. `source`
// names the file in error messages.
// With options.point_features, *features (if given) receives [1, F, N].
at::Tensor prepare_single_cloud(const Mesh& mesh, const PointViewOptions& options, at::Tensor* normals = nullptr,
                                const std::string& source = "", at::Tensor* features = nullptr);

// Every point of a shape, for labelling each one (part segmentation): all the
// points of a point cloud in file order, or options.num_points surface
// samples of a mesh (seeded with options.seed); then normalised and rotated
// as the eval-mode view of index 0 (never scaled or shifted). Returns
// [1, 3, P] float32; with use_normals, *normals (if given) receives [1, 3, P]
// (DataError naming `source` when a cloud has none). *unprepared (if given)
// receives the same P points [P, 3] in the shape's own coordinates, before
// the view centres, scales and turns them: what a labelled cloud is written in.
at::Tensor prepare_every_point(const Mesh& mesh, const PointViewOptions& options, at::Tensor* normals = nullptr,
                               const std::string& source = "", at::Tensor* features = nullptr,
                               at::Tensor* unprepared = nullptr);

}  // namespace qkv::pointcloud
