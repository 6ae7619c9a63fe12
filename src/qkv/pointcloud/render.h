#pragma once
// A point cloud drawn as discs in a fixed three-quarter orthographic view and
// written as a PNG (through libpng, picture/png.h), with what a reader needs to
// interpret the colours: a title, a colour bar with its values or a legend,
// a marked point. Enough to look at attention and part colourings without a
// 3-D viewer (the PLY files carry the values themselves).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qkv/picture/raster.h"
#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

struct PointPicture {
  int64_t size = 480;         // the cloud's square, pixels
  std::string title;          // one line above the cloud; none when ""
  int64_t marked_point = -1;  // a ring around this vertex, drawn over everything (a query point)
  std::string marked_label;   // written beside the ring
  // A colour bar of heat_colour beside the cloud, labelled bar_lo (colour 0)
  // to bar_hi (colour 1): the caller maps values to colours the same way.
  bool colourbar = false;
  double bar_lo = 0, bar_hi = 1;
  std::string bar_label;
  std::vector<std::pair<std::string, picture::Rgb>> legend;  // beside the cloud (under the bar if both)
  std::vector<std::string> notes;                            // small lines under the cloud
};

// Distinct colours for the parts of one object (at most 6 in ShapeNet-part;
// more repeat): the colour of its local part index.
picture::Rgb part_colour(int64_t local_part);

// PNG bytes of `cloud` (its vertex colours, or grey) on white; far points are
// drawn first. DataError for an empty cloud or a marked point it lacks.
std::vector<uint8_t> render_points_png(const Mesh& cloud, const PointPicture& picture = {});

// The same, written atomically to `path`.
void write_points_png(const std::string& path, const Mesh& cloud, const PointPicture& picture = {});

}  // namespace qkv::pointcloud
