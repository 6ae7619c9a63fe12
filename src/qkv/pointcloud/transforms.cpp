#include "qkv/pointcloud/transforms.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/cuda/point_kernels.h"
#include "qkv/spatial/kd_tree.h"

namespace qkv::pointcloud {
namespace {

void check_points(const at::Tensor& points, const char* fn) {
  TORCH_CHECK(points.defined() && (points.dim() == 2 || points.dim() == 3) && points.size(-1) == 3, fn,
              ": points must be [N, 3] or [B, N, 3], got ", points.defined() ? points.sizes() : at::IntArrayRef{});
}

// [N, 3] -> [1, N, 3], so that one code path serves both layouts.
at::Tensor as_batch(const at::Tensor& points) { return points.dim() == 2 ? points.unsqueeze(0) : points; }

at::Tensor like_input(const at::Tensor& batched, const at::Tensor& points) {
  return points.dim() == 2 ? batched.squeeze(0) : batched;
}

// FPS compares distances: a NaN compares as neither nearer nor farther, and
// the sample would repeat one index. Refused, naming the point (`what`:
// "point", or "query" for the points whose nearest are looked for).
void check_finite_points(const at::Tensor& points, const char* fn, const char* what = "point") {
  if (points.numel() == 0 || at::isfinite(points.sum()).item<bool>()) return;
  const auto bad = (~at::isfinite(as_batch(points))).any(-1).nonzero();
  if (bad.size(0) == 0) return;  // the sum overflowed; every coordinate is finite
  throw UsageError(std::string(fn) + ": " + what + " " + std::to_string(bad[0][1].item<int64_t>()) +
                   (points.dim() == 3 ? " of cloud " + std::to_string(bad[0][0].item<int64_t>()) : std::string()) +
                   " holds NaN or an infinity");
}

void check_count(const char* fn, int64_t m, int64_t n) {
  if (m < 0 || m > n)
    throw UsageError(std::string(fn) + ": cannot pick " + std::to_string(m) + " points from a cloud of " +
                     std::to_string(n));
}

template <typename T>
void fps_one(const T* pts, int64_t n, int64_t m, int64_t start, int64_t* out) {
  // Coordinates as separate arrays, so that the distance update vectorises.
  const auto size = static_cast<size_t>(n);
  std::vector<T> xs(size), ys(size), zs(size), dist(size, std::numeric_limits<T>::infinity());
  for (size_t i = 0; i < size; ++i) {
    xs[i] = pts[3 * i];
    ys[i] = pts[3 * i + 1];
    zs[i] = pts[3 * i + 2];
  }
  auto current = static_cast<size_t>(start);
  for (int64_t k = 0; k < m; ++k) {
    out[k] = static_cast<int64_t>(current);
    const T cx = xs[current], cy = ys[current], cz = zs[current];
    T* d = dist.data();
    for (size_t i = 0; i < size; ++i) {
      const T dx = xs[i] - cx, dy = ys[i] - cy, dz = zs[i] - cz;
      d[i] = std::min(d[i], dx * dx + dy * dy + dz * dz);
    }
    // The arg-max in blocks of 16: a block's maximum vectorises, and only a
    // block that beats the best so far is searched for its first index, so
    // strict '>' still lets the lowest index win a tie.
    size_t best = 0;
    T best_d = d[0];
    size_t i = 0;
    for (; i + 16 <= size; i += 16) {
      T block_max = d[i];
      for (size_t j = 1; j < 16; ++j) block_max = std::max(block_max, d[i + j]);
      if (block_max > best_d) {
        best_d = block_max;
        best = i;
        while (d[best] != best_d) ++best;
      }
    }
    for (; i < size; ++i)
      if (d[i] > best_d) {
        best_d = d[i];
        best = i;
      }
    current = best;
  }
}

// From this many points and picks on, FPS runs on a k-d tree
// (spatial/kd_tree.h: the same picks, ties included), which revisits only
// the part of the cloud each pick can change. Below, the exhaustive pass
// (vectorised, no tree to build) was as fast or faster on this machine
// (`bench_pointcloud 0 3 spatial`, docs/vnt.md).
constexpr int64_t kFpsTreeMinPoints = 4096;
constexpr int64_t kFpsTreeMinPicks = 64;

at::Tensor fps(const at::Tensor& points, int64_t m, const std::vector<int64_t>& starts, bool tree_allowed = true) {
  if (!points.device().is_cpu()) {
    const auto start_tensor = torch::tensor(starts, torch::kLong);
    if (cuda::kernels_run_on(points.device()))
      return like_input(cuda::farthest_point_sample(as_batch(points), m, start_tensor), points);
    // Without a kernel for the device: the CPU kernel on a copy (a sequential
    // arg-max per pick does not compose into fast tensor code).
    return fps(points.detach().cpu(), m, starts, tree_allowed).to(points.device());
  }
  const auto batch = as_batch(points).contiguous();
  const int64_t b = batch.size(0), n = batch.size(1);
  auto out = torch::empty({b, m}, torch::kLong);
  auto* o = out.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(batch.scalar_type(), "farthest_point_sample", [&] {
    const auto* p = batch.data_ptr<scalar_t>();
    at::parallel_for(0, b, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* cloud = p + i * n * 3;
        const int64_t start = starts[static_cast<size_t>(i)];
        if (tree_allowed && n >= kFpsTreeMinPoints && m >= kFpsTreeMinPicks)
          spatial::KdTree<scalar_t>(cloud, cloud + 1, cloud + 2, n, 3).farthest_point_sample(m, start, o + i * m);
        else
          fps_one<scalar_t>(cloud, n, m, start, o + i * m);
      }
    });
  });
  return like_input(out, points);
}

void check_fps_inputs(const at::Tensor& points, int64_t m, int64_t start) {
  check_points(points, "farthest_point_sample");
  check_finite_points(points, "farthest_point_sample");
  const int64_t n = points.size(-2);
  check_count("farthest_point_sample", m, n);
  if (m > 0 && (start < 0 || start >= n))
    throw UsageError("farthest_point_sample: start " + std::to_string(start) + " is outside a cloud of " +
                     std::to_string(n));
}

}  // namespace

at::Tensor farthest_point_sample(const at::Tensor& points, int64_t m, int64_t start) {
  check_fps_inputs(points, m, start);
  return fps(points, m, std::vector<int64_t>(static_cast<size_t>(as_batch(points).size(0)), start));
}

at::Tensor farthest_point_sample_exhaustive(const at::Tensor& points, int64_t m, int64_t start) {
  check_fps_inputs(points, m, start);
  const auto starts = std::vector<int64_t>(static_cast<size_t>(as_batch(points).size(0)), start);
  return fps(points.detach().cpu(), m, starts, /*tree_allowed=*/false).to(points.device());
}

at::Tensor farthest_point_sample_random_start(const at::Tensor& points, int64_t m, OptionalGenerator gen) {
  check_points(points, "farthest_point_sample");
  check_finite_points(points, "farthest_point_sample");
  const int64_t b = as_batch(points).size(0), n = points.size(-2);
  check_count("farthest_point_sample", m, n);
  if (m == 0 || n == 0) return fps(points, 0, std::vector<int64_t>(static_cast<size_t>(b), 0));
  const auto drawn = torch::randint(n, {b}, gen, torch::kLong);
  const auto* d = drawn.data_ptr<int64_t>();
  return fps(points, m, std::vector<int64_t>(d, d + b));
}

at::Tensor nearest_point_indices(const at::Tensor& queries, const at::Tensor& points) {
  if (!queries.defined() || queries.dim() != 2 || queries.size(1) != 3 || !points.defined() || points.dim() != 2 ||
      points.size(1) != 3)
    throw UsageError("nearest_point_indices: queries and points must be [Q, 3] and [P, 3]");
  if (points.size(0) == 0) throw UsageError("nearest_point_indices: no points to be nearest to");
  check_finite_points(points, "nearest_point_indices");
  check_finite_points(queries, "nearest_point_indices", "query");  // its nearest point would be any one
  at::NoGradGuard no_grad;
  const auto p = points.to(torch::kDouble).contiguous();
  const auto q = queries.to(torch::kDouble).contiguous();
  const spatial::KdTree<double> tree(p.data_ptr<double>(), p.data_ptr<double>() + 1, p.data_ptr<double>() + 2,
                                     p.size(0), 3);
  auto out = torch::empty({q.size(0)}, torch::kLong);
  auto* o = out.data_ptr<int64_t>();
  const auto* qp = q.data_ptr<double>();
  at::parallel_for(0, q.size(0), 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = tree.nearest(qp[3 * i], qp[3 * i + 1], qp[3 * i + 2]);
  });
  return out;
}

at::Tensor random_subsample(const at::Tensor& points, int64_t m, OptionalGenerator gen) {
  check_points(points, "random_subsample");
  const int64_t b = as_batch(points).size(0), n = points.size(-2);
  check_count("random_subsample", m, n);
  std::vector<at::Tensor> rows;
  rows.reserve(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) rows.push_back(torch::randperm(n, gen, torch::kLong).slice(0, 0, m));
  return like_input(torch::stack(rows), points);
}

at::Tensor gather_points(const at::Tensor& points, const at::Tensor& indices) {
  TORCH_CHECK(points.dim() == indices.dim() + 1 && (indices.dim() == 1 || indices.dim() == 2),
              "gather_points: points [N, C] take indices [m]; points [B, N, C] take [B, m]; got ", points.sizes(),
              " and ", indices.sizes());
  if (indices.dim() == 1) return points.index_select(0, indices);
  return points.gather(1, indices.unsqueeze(-1).expand({indices.size(0), indices.size(1), points.size(2)}));
}

at::Tensor normalize_unit_sphere(const at::Tensor& points) {
  check_points(points, "normalize_unit_sphere");
  if (points.size(-2) == 0) throw DataError("normalize_unit_sphere: the cloud has no points");
  // In float64: a float32 square overflows past 1.8e19 and underflows below
  // 1e-19 (a scan in other units than the model's), which made the radius
  // inf or 0 and the whole cloud a point at the origin.
  const auto wide = points.to(torch::kDouble);
  const auto centred = wide - wide.mean(-2, true);
  auto radius = centred.norm(2, -1).amax(-1, true).unsqueeze(-1);
  // Coincident points: leave them at the origin rather than divide 0 by 0.
  radius = torch::where(radius > 0, radius, torch::ones_like(radius));
  return (centred / radius).to(points.scalar_type());
}

at::Tensor random_scale(const at::Tensor& points, double low, double high, OptionalGenerator gen) {
  check_points(points, "random_scale");
  const auto batch = as_batch(points);
  // Drawn in float64 whatever the points' dtype, so the draws do not depend on it.
  const auto u = torch::rand({batch.size(0), 1, 1}, gen, torch::kDouble);
  return like_input(batch * (low + (high - low) * u).to(points.scalar_type()), points);
}

at::Tensor random_shift(const at::Tensor& points, double max_shift, OptionalGenerator gen) {
  check_points(points, "random_shift");
  const auto batch = as_batch(points);
  const auto u = torch::rand({batch.size(0), 1, 3}, gen, torch::kDouble);
  return like_input(batch + (max_shift * (2 * u - 1)).to(points.scalar_type()), points);
}

at::Tensor rotation_about_axis(double angle, int64_t axis) {
  if (axis < 0 || axis > 2) throw UsageError("rotation axis must be 0, 1 or 2 (got " + std::to_string(axis) + ")");
  const double c = std::cos(angle), s = std::sin(angle);
  auto r = torch::eye(3, torch::kDouble);
  auto a = r.accessor<double, 2>();
  const int64_t i = (axis + 1) % 3, j = (axis + 2) % 3;  // (i, j, axis) is a right-handed frame
  a[i][i] = c;
  a[i][j] = -s;
  a[j][i] = s;
  a[j][j] = c;
  return r;
}

at::Tensor random_rotation_about_axis(int64_t axis, OptionalGenerator gen) {
  if (axis < 0 || axis > 2) throw UsageError("rotation axis must be 0, 1 or 2 (got " + std::to_string(axis) + ")");
  const double angle = 2 * M_PI * torch::rand({1}, gen, torch::kDouble).item<double>();
  return rotation_about_axis(angle, axis);
}

at::Tensor random_so3(OptionalGenerator gen) {
  // A normalised 4-d Gaussian is uniform on S^3, and S^3 -> SO(3) carries that to Haar measure.
  double w = 0, x = 0, y = 0, z = 0, norm = 0;
  do {
    const auto q = torch::randn({4}, gen, torch::kDouble);
    const auto* d = q.data_ptr<double>();
    w = d[0], x = d[1], y = d[2], z = d[3];
    norm = std::sqrt(w * w + x * x + y * y + z * z);
  } while (!(norm > 1e-12));
  w /= norm, x /= norm, y /= norm, z /= norm;
  auto r = torch::empty({3, 3}, torch::kDouble);
  auto a = r.accessor<double, 2>();
  a[0][0] = 1 - 2 * (y * y + z * z), a[0][1] = 2 * (x * y - w * z), a[0][2] = 2 * (x * z + w * y);
  a[1][0] = 2 * (x * y + w * z), a[1][1] = 1 - 2 * (x * x + z * z), a[1][2] = 2 * (y * z - w * x);
  a[2][0] = 2 * (x * z - w * y), a[2][1] = 2 * (y * z + w * x), a[2][2] = 1 - 2 * (x * x + y * y);
  return r;
}

at::Tensor rotate(const at::Tensor& points, const at::Tensor& rotation) {
  check_points(points, "rotate");
  TORCH_CHECK(rotation.dim() >= 2 && rotation.size(-1) == 3 && rotation.size(-2) == 3,
              "rotate: the rotation must be [3, 3] or [B, 3, 3], got ", rotation.sizes());
  return torch::matmul(points, rotation.to(points.scalar_type()).transpose(-1, -2));
}

}  // namespace qkv::pointcloud
