#include "qkv/pointcloud/render.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "qkv/core/atomic_file.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"

namespace qkv::pointcloud {
namespace {

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void put_chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
  put_be32(png, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  png.insert(png.end(), body.begin(), body.end());
  put_be32(png, crc32(body.data(), body.size()));
}

// A zlib stream of stored (uncompressed) deflate blocks: valid for every PNG
// reader, and a 480x480 image is only ~700 KB.
std::vector<uint8_t> zlib_stored(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> z = {0x78, 0x01};
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, raw.size() - pos);
    const bool last = pos + len == raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(static_cast<uint8_t>(len & 0xFF));
    z.push_back(static_cast<uint8_t>(len >> 8));
    z.push_back(static_cast<uint8_t>(~len & 0xFF));
    z.push_back(static_cast<uint8_t>((~len >> 8) & 0xFF));
    z.insert(z.end(), raw.begin() + static_cast<std::ptrdiff_t>(pos),
             raw.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < raw.size());
  uint32_t a = 1, b = 0;  // Adler-32
  for (uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(z, (b << 16) | a);
  return z;
}

}  // namespace

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
  std::vector<uint8_t> raw;
  raw.reserve(rgb.size() + size);
  for (int y = 0; y < size; ++y) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), rgb.begin() + static_cast<std::ptrdiff_t>(y) * size * 3,
               rgb.begin() + static_cast<std::ptrdiff_t>(y + 1) * size * 3);
  }
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, static_cast<uint32_t>(size));
  put_be32(ihdr, static_cast<uint32_t>(size));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter method, no interlace
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", zlib_stored(raw));
  put_chunk(png, "IEND", {});
  return png;
}

void write_points_png(const std::string& path, const Mesh& cloud, int size) {
  const auto png = render_points_png(cloud, size);
  write_file_atomic(path, png.data(), png.size());
}

}  // namespace qkv::pointcloud
