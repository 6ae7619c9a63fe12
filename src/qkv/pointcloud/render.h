#pragma once
// A point cloud drawn as discs in a fixed three-quarter orthographic view and
// written as a PNG (through libpng, core/png.h). Enough to look at attention
// colourings without a 3-D viewer.
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

// PNG bytes of `cloud` (its vertex colours, or grey) on white, size x size
// pixels; far points are drawn first. DataError for an empty cloud.
std::vector<uint8_t> render_points_png(const Mesh& cloud, int size = 480);

// The same, written atomically to `path`.
void write_points_png(const std::string& path, const Mesh& cloud, int size = 480);

}  // namespace qkv::pointcloud
