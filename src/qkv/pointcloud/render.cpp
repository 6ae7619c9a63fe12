#include "qkv/pointcloud/render.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/png.h"

namespace qkv::pointcloud {

std::vector<uint8_t> render_points_png(const Mesh& cloud, int size) {
  if (cloud.vertices.empty()) throw DataError("render_points_png: empty point cloud");
  // Camera: yaw 35 degrees about y (up), then pitch 25 degrees down.
  const double yaw = 35 * M_PI / 180, pitch = 25 * M_PI / 180;
  const size_t n = cloud.vertices.size();
  std::vector<std::array<double, 3>> view(n);  // screen x, screen y, depth
  for (size_t i = 0; i < n; ++i) {
    const auto& v = cloud.vertices[i];
    const double x1 = std::cos(yaw) * v[0] + std::sin(yaw) * v[2], z1 = -std::sin(yaw) * v[0] + std::cos(yaw) * v[2];
    const double y2 = std::cos(pitch) * v[1] - std::sin(pitch) * z1, z2 = std::sin(pitch) * v[1] + std::cos(pitch) * z1;
    view[i] = {x1, y2, z2};
  }
  double cx = 0, cy = 0, extent = 1e-12;
  for (const auto& p : view) cx += p[0] / n, cy += p[1] / n;
  for (const auto& p : view) extent = std::max({extent, std::abs(p[0] - cx), std::abs(p[1] - cy)});
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return view[a][2] < view[b][2]; });
  std::vector<uint8_t> rgb(static_cast<size_t>(size) * size * 3, 255);
  const double scale = 0.45 * size / extent, radius = std::max(1.5, size / 160.0);
  for (const size_t i : order) {
    const double px = size / 2.0 + (view[i][0] - cx) * scale, py = size / 2.0 - (view[i][1] - cy) * scale;
    const std::array<uint8_t, 3> c = cloud.colors.empty() ? std::array<uint8_t, 3>{110, 110, 110} : cloud.colors[i];
    for (int y = static_cast<int>(py - radius); y <= static_cast<int>(py + radius); ++y)
      for (int x = static_cast<int>(px - radius); x <= static_cast<int>(px + radius); ++x) {
        if (x < 0 || y < 0 || x >= size || y >= size) continue;
        const double d2 = (x - px) * (x - px) + (y - py) * (y - py);
        if (d2 > radius * radius) continue;
        const double shade = 1.0 - 0.35 * d2 / (radius * radius);  // a little relief on each disc
        for (int k = 0; k < 3; ++k)
          rgb[(static_cast<size_t>(y) * size + x) * 3 + k] = static_cast<uint8_t>(c[static_cast<size_t>(k)] * shade);
      }
  }
  return encode_png_rgb(size, size, rgb, "point-cloud picture");
}

void write_points_png(const std::string& path, const Mesh& cloud, int size) {
  const auto png = render_points_png(cloud, size);
  write_file_atomic(path, png.data(), png.size());
}

}  // namespace qkv::pointcloud
