#include "qkv/pointcloud/up_axis.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace qkv::pointcloud {

UpAxisEstimate estimate_up_axis(const at::Tensor& points, int64_t max_shapes, int64_t points_per_shape) {
  if (!points.defined() || points.dim() != 3 || points.size(2) != 3 || points.size(0) == 0 || points.size(1) == 0)
    throw std::invalid_argument("estimate_up_axis: expected points [S, P, 3] with S, P > 0");
  if (max_shapes < 1 || points_per_shape < 1) throw std::invalid_argument("estimate_up_axis: counts must be >= 1");
  torch::NoGradGuard no_grad;
  const int64_t total = points.size(0);
  const int64_t n = std::min(total, max_shapes);
  // Evenly spread, so that every class of a class-sorted set is looked at.
  auto which = torch::linspace(0, static_cast<double>(total - 1), n, torch::kDouble).round().to(torch::kLong);
  auto x = points.index_select(0, which.to(points.device()))
               .narrow(1, 0, std::min(points.size(1), points_per_shape))
               .to(torch::kDouble);
  const auto lo = std::get<0>(x.min(1, true)), hi = std::get<0>(x.max(1, true));
  const auto centre = (lo + hi) / 2;
  const auto diagonal = (hi - lo).norm(2, -1).clamp_min(std::numeric_limits<double>::min());  // [n, 1]
  x = x - centre;
  UpAxisEstimate e;
  e.shapes = n;
  for (int64_t a = 0; a < 3; ++a) {
    auto mirrored = x.clone();
    mirrored.select(2, a).neg_();
    // cdist on [n, p, p]: a few MB for the defaults.
    const auto nearest = std::get<0>(torch::cdist(mirrored, x).min(2));  // [n, p]
    e.asymmetry[static_cast<size_t>(a)] = (nearest.mean(1, true) / diagonal).mean().item<double>();
  }
  std::array<int64_t, 3> order{0, 1, 2};
  std::sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return e.asymmetry[static_cast<size_t>(i)] > e.asymmetry[static_cast<size_t>(j)];
  });
  e.axis = order[0];
  const double first = e.asymmetry[static_cast<size_t>(order[0])], second = e.asymmetry[static_cast<size_t>(order[1])];
  e.margin = second > 0 ? first / second : std::numeric_limits<double>::infinity();
  return e;
}

}  // namespace qkv::pointcloud
