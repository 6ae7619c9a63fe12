#pragma once
// Per-point scalar features of a point cloud beyond its geometry, by name:
// "rgb" is the colour (three channels, each / 255, in [0, 1]); any other name
// is a scalar vertex property the file holds (PLY's extra properties, PCD's
// fields: "intensity", "reflectance", ...), taken as it is. Rotation does not
// act on them, so they are invariant inputs (how the models fuse them:
// vn_input in models/vnt_net.h).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

inline constexpr const char* kColourFeature = "rgb";

// "rgb,intensity" -> {"rgb", "intensity"}: UsageError (naming `option`, when
// not empty, and the list) for an
// empty name, a name used twice or one that is not [A-Za-z0-9_]; "" -> {}.
std::vector<std::string> parse_point_features(const std::string& list, const std::string& option);

// The channels the features take: 3 for rgb, 1 for every other.
int64_t point_feature_channels(const std::vector<std::string>& names);

// [P, F] float32: the features of each of the cloud's P points, in the order
// of `names`. DataError naming `source` for a mesh with faces (its vertices
// are not the points sampled on it), a feature the file does not hold (the
// ones it holds are listed) or a value that is not finite.
at::Tensor point_feature_rows(const Mesh& cloud, const std::vector<std::string>& names, const std::string& source);

}  // namespace qkv::pointcloud
