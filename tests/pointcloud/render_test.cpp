// The point-cloud picture is a PNG any reader accepts (decoded here by libpng),
// compressed, and its pixels show the cloud's colours on white.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/picture/png.h"
#include "qkv/pointcloud/render.h"

using namespace qkv::pointcloud;

TEST(RenderPng, IsACompressedPngShowingTheColours) {
  Mesh cloud;
  cloud.vertices = {{0.f, 0.f, 0.f}, {0.f, 0.5f, 0.f}, {0.f, -0.5f, 0.f}};
  cloud.colors = {{255, 0, 0}, {255, 0, 0}, {255, 0, 0}};
  const int size = 480;
  PointPicture plain;
  plain.size = size;
  const auto png = render_points_png(cloud, plain);
  int64_t w = 0, h = 0;
  const auto rgb = qkv::picture::decode_png_rgb(png.data(), png.size(), w, h, "test picture");
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

// What a reader needs is drawn: a title, the bar or legend beside the cloud,
// and the marked point's ring in the marker colour; a point it lacks is refused.
TEST(RenderPng, TitleColourbarLegendAndMarkedPoint) {
  Mesh cloud;
  for (int i = 0; i < 50; ++i) {
    cloud.vertices.push_back(
        {static_cast<float>(std::cos(i * 0.4)), static_cast<float>(i) / 50.f, static_cast<float>(std::sin(i * 0.4))});
    cloud.colors.push_back(qkv::picture::heat_colour(i / 49.0));
  }
  PointPicture picture;
  picture.size = 300;
  picture.title = "attention of point 3";
  picture.marked_point = 3;
  picture.marked_label = "query";
  picture.colourbar = true;
  picture.bar_lo = 0;
  picture.bar_hi = 0.0078;
  picture.bar_label = "attention";
  picture.legend = {{"wing", {228, 26, 28}}};
  picture.notes = {"a note"};
  const auto png = render_points_png(cloud, picture);
  int64_t w = 0, h = 0;
  const auto rgb = qkv::picture::decode_png_rgb(png.data(), png.size(), w, h, "test picture");
  EXPECT_GT(w, 300);  // the panel beside the square
  EXPECT_GT(h, 300);  // title band and notes
  auto count = [&](std::array<uint8_t, 3> c, int64_t x0, int64_t x1, int tolerance = 0) {
    int64_t n = 0;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = x0; x < x1; ++x) {
        const size_t o = static_cast<size_t>((y * w + x) * 3);
        bool near = true;
        for (int k = 0; k < 3; ++k) near = near && std::abs(rgb[o + k] - c[static_cast<size_t>(k)]) <= tolerance;
        n += near;
      }
    return n;
  };
  EXPECT_GT(count({0, 200, 255}, 0, 300), 20);                     // the ring, inside the cloud's square
  EXPECT_GT(count({228, 26, 28}, 300, w), 20);                     // the legend's swatch, in the panel
  EXPECT_GT(count(qkv::picture::heat_colour(0.5), 300, w, 4), 1);  // the bar's middle
  picture.marked_point = 50;
  EXPECT_THROW(render_points_png(cloud, picture), qkv::DataError);
}

// zlib's CRC-32 behind qkv::crc32 (checkpoint payloads): the standard check value.
TEST(Crc32, IsTheStandardCrc32) {
  const char text[] = "123456789";
  EXPECT_EQ(qkv::crc32(text, 9), 0xCBF43926u);
  EXPECT_EQ(qkv::crc32(text, 0), 0u);
}
