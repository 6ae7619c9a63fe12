#pragma once
// Point-cloud transforms as free functions on tensors. Points are [N, 3] (one
// cloud) or [B, N, 3] (a batch; each cloud gets its own random draw).
//
// Randomness: every random function takes `c10::optional<at::Generator> gen`.
// Given, it draws from that generator only; c10::nullopt draws from torch's
// global CPU generator, the one the trainer seeds and checkpoints, so a resumed
// run repeats the same draws. All draws go through torch's own samplers
// (at::rand, at::randn, at::randint, at::randperm), never std:: distributions.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>

namespace qkv::pointcloud {

using OptionalGenerator = c10::optional<at::Generator>;

// Farthest point sampling: indices (int64, [m] or [B, m]) of m points, the
// first at `start`, each next one the point farthest (squared Euclidean) from
// those already picked; ties go to the lowest index. Small clouds: O(N m)
// with an incremental min-distance update; large ones (spatial/kd_tree.h):
// the same picks from a k-d tree that revisits only what each pick changes.
// Clouds of a batch run in parallel. float32 or float64 points, computed in
// their own precision. m must be in [0, N] and start in [0, N): UsageError
// otherwise; a coordinate that is not finite is a UsageError naming it.
at::Tensor farthest_point_sample(const at::Tensor& points, int64_t m, int64_t start = 0);
// The same by the O(N m) update whatever the size (on the CPU): the
// reference of the tree and the baseline of its benchmark.
at::Tensor farthest_point_sample_exhaustive(const at::Tensor& points, int64_t m, int64_t start = 0);
// The same with each cloud's start drawn uniformly from [0, N).
at::Tensor farthest_point_sample_random_start(const at::Tensor& points, int64_t m,
                                              OptionalGenerator gen = c10::nullopt);

// m distinct indices drawn uniformly (a random permutation's first m), [m] or [B, m].
at::Tensor random_subsample(const at::Tensor& points, int64_t m, OptionalGenerator gen = c10::nullopt);

// For each of `queries` [Q, 3], the index of its nearest of `points` [P, 3]
// (squared Euclidean; ties to the lowest index), [Q] int64, from a k-d tree
// of the points (spatial/kd_tree.h): O((Q + P) log P). float32 or float64,
// computed in float64 as sums of squared differences. UsageError for bad
// shapes, an empty `points`, or a point that is not finite.
at::Tensor nearest_point_indices(const at::Tensor& queries, const at::Tensor& points);

// points[..., indices[i], :] for index tensors as the samplers above return:
// [N, C] with [m] gives [m, C]; [B, N, C] with [B, m] gives [B, m, C].
at::Tensor gather_points(const at::Tensor& points, const at::Tensor& indices);

// Centroid to the origin, then divided by the largest distance from it, per
// cloud. A cloud whose points all coincide ends up all zeros. An empty cloud
// (N = 0) is a DataError.
at::Tensor normalize_unit_sphere(const at::Tensor& points);

// Multiplies each cloud by one factor uniform in [low, high).
at::Tensor random_scale(const at::Tensor& points, double low = 0.8, double high = 1.25,
                        OptionalGenerator gen = c10::nullopt);
// Adds to each cloud one offset, each coordinate uniform in [-max_shift, max_shift).
at::Tensor random_shift(const at::Tensor& points, double max_shift = 0.1, OptionalGenerator gen = c10::nullopt);

// Rotations are [3, 3] float64 matrices R acting on column vectors (x' = R x);
// orthonormal with det +1 to float64 rounding. Convert with .to(kFloat) freely.
//
// A right-handed rotation by `angle` radians about coordinate axis 0, 1 or 2;
// that axis' coordinate is unchanged.
at::Tensor rotation_about_axis(double angle, int64_t axis);
// The same with the angle uniform in [0, 2 pi).
at::Tensor random_rotation_about_axis(int64_t axis, OptionalGenerator gen = c10::nullopt);
// Uniform (Haar) on SO(3): the unit quaternion of 4 independent standard normals.
at::Tensor random_so3(OptionalGenerator gen = c10::nullopt);

// points @ R^T, i.e. R applied to every point. R is [3, 3], or [B, 3, 3] with
// batched points; it is converted to the points' dtype.
at::Tensor rotate(const at::Tensor& points, const at::Tensor& rotation);

}  // namespace qkv::pointcloud
