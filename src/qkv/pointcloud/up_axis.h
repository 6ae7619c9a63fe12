#pragma once
// Which axis a data set's shapes stand on, estimated from the shapes alone.
// Upright man-made objects are nearly always mirror-symmetric about a
// vertical plane (left and right), often about two (tables, vases, lamps),
// and almost never about a horizontal one: a top is not a bottom. So the
// axis across which the shapes are least mirror-symmetric, averaged over
// the data set, is taken for up. This is a heuristic of our choice, not a
// published method; it needs shapes in a common pose, and says how sure it
// is (margin) so that a caller can warn.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>

namespace qkv::pointcloud {

struct UpAxisEstimate {
  int64_t axis = -1;  // 0 x, 1 y, 2 z
  // Per axis: the mean distance from a shape's points, mirrored across the
  // plane through its bounding box's centre normal to that axis, to the
  // nearest unmirrored point, as a share of the box's diagonal; averaged
  // over the shapes looked at. 0 for a shape that is its own mirror image.
  std::array<double, 3> asymmetry{0, 0, 0};
  int64_t shapes = 0;  // how many shapes were looked at
  // The largest asymmetry over the second largest (>= 1; infinity when the
  // second is 0): near 1, the data set does not say which axis is up.
  double margin = 0;
};

// `points`: [S, P, 3] (a PointCloudSet's). Looks at up to max_shapes shapes
// spread evenly over the set, up to points_per_shape points of each (the
// first ones: qkv's sets hold surface samples in random order). Throws
// std::invalid_argument for an empty set or a tensor of another shape.
UpAxisEstimate estimate_up_axis(const at::Tensor& points, int64_t max_shapes = 256, int64_t points_per_shape = 256);

}  // namespace qkv::pointcloud
