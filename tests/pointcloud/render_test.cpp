// The PNG writer produces a file any reader accepts: signature, IHDR, chunk
// CRCs (IEND's is the well-known AE 42 60 82), a zlib stream of stored blocks
// whose pixels show the cloud's colours on white.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/pointcloud/render.h"

using namespace qkv::pointcloud;

namespace {

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | b[at + 3];
}

}  // namespace

TEST(RenderPng, IsAValidPngShowingTheColours) {
  Mesh cloud;
  cloud.vertices = {{0.f, 0.f, 0.f}, {0.f, 0.5f, 0.f}, {0.f, -0.5f, 0.f}};
  cloud.colors = {{255, 0, 0}, {255, 0, 0}, {255, 0, 0}};
  const int size = 40;
  const auto png = render_points_png(cloud, size);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(std::vector<uint8_t>(png.begin(), png.begin() + 8),
            (std::vector<uint8_t>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}));
  EXPECT_EQ(std::string(png.begin() + 12, png.begin() + 16), "IHDR");
  EXPECT_EQ(be32(png, 16), static_cast<uint32_t>(size));
  EXPECT_EQ(be32(png, 20), static_cast<uint32_t>(size));
  EXPECT_EQ(be32(png, png.size() - 4), 0xAE426082u);  // CRC-32 of "IEND"
  // Walk to IDAT, undo the stored deflate blocks.
  size_t at = 8;
  std::vector<uint8_t> raw;
  while (at < png.size()) {
    const uint32_t len = be32(png, at);
    const std::string type(png.begin() + at + 4, png.begin() + at + 8);
    if (type == "IDAT") {
      size_t p = at + 8 + 2;  // skip the zlib header
      for (;;) {
        const bool last = png[p] & 1;
        const size_t n = png[p + 1] | (png[p + 2] << 8);
        raw.insert(raw.end(), png.begin() + p + 5, png.begin() + p + 5 + n);
        p += 5 + n;
        if (last) break;
      }
    }
    at += 12 + len;
  }
  ASSERT_EQ(raw.size(), static_cast<size_t>(size) * (1 + 3 * size));
  auto pixel = [&](int x, int y) {
    const size_t o = static_cast<size_t>(y) * (1 + 3 * size) + 1 + 3 * x;
    return std::vector<int>{raw[o], raw[o + 1], raw[o + 2]};
  };
  EXPECT_EQ(pixel(0, 0), (std::vector<int>{255, 255, 255}));  // background
  const auto centre = pixel(size / 2, size / 2);
  EXPECT_GT(centre[0], 150);  // the red point at the origin is drawn in the middle
  EXPECT_EQ(centre[1], 0);
  EXPECT_THROW(render_points_png(Mesh{}), qkv::DataError);
}
