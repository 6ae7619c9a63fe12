// The point-cloud picture is a PNG any reader accepts (decoded here by libpng),
// compressed, and its pixels show the cloud's colours on white.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/core/png.h"
#include "qkv/pointcloud/render.h"

using namespace qkv::pointcloud;

TEST(RenderPng, IsACompressedPngShowingTheColours) {
  Mesh cloud;
  cloud.vertices = {{0.f, 0.f, 0.f}, {0.f, 0.5f, 0.f}, {0.f, -0.5f, 0.f}};
  cloud.colors = {{255, 0, 0}, {255, 0, 0}, {255, 0, 0}};
  const int size = 480;
  const auto png = render_points_png(cloud, size);
  int64_t w = 0, h = 0;
  const auto rgb = qkv::decode_png_rgb(png.data(), png.size(), w, h, "test picture");
  ASSERT_EQ(w, size);
  ASSERT_EQ(h, size);
  // Mostly white: deflate makes it a small fraction of the 691 KB the raw pixels take.
  EXPECT_LT(png.size(), 20000u) << png.size();
  auto pixel = [&](int x, int y) {
    const size_t o = (static_cast<size_t>(y) * size + x) * 3;
    return std::vector<int>{rgb[o], rgb[o + 1], rgb[o + 2]};
  };
  EXPECT_EQ(pixel(0, 0), (std::vector<int>{255, 255, 255}));  // background
  const auto centre = pixel(size / 2, size / 2);
  EXPECT_GT(centre[0], 150);  // the red point at the origin is drawn in the middle
  EXPECT_EQ(centre[1], 0);
  EXPECT_THROW(render_points_png(Mesh{}), qkv::DataError);
}

// zlib's CRC-32 behind qkv::crc32 (checkpoint payloads): the standard check value.
TEST(Crc32, IsTheStandardCrc32) {
  const char text[] = "123456789";
  EXPECT_EQ(qkv::crc32(text, 9), 0xCBF43926u);
  EXPECT_EQ(qkv::crc32(text, 0), 0u);
}
