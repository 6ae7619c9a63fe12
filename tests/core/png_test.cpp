#include "qkv/core/png.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "support/test_files.h"

namespace {

std::vector<uint8_t> random_rgb(int64_t w, int64_t h, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> rgb(static_cast<size_t>(w * h * 3));
  for (auto& b : rgb) b = static_cast<uint8_t>(rng() & 0xFF);
  return rgb;
}

TEST(PngFile, WriteThenReadBackIsBitEqual) {
  // Odd, non-square sizes catch a swapped width/height or a wrong row stride.
  for (auto [w, h] : {std::pair<int64_t, int64_t>{7, 5}, {1, 1}, {64, 3}}) {
    const auto path = qkv::testing::temp_path("png_roundtrip_" + std::to_string(w) + "x" + std::to_string(h) + ".png");
    const auto rgb = random_rgb(w, h, static_cast<uint64_t>(w * 100 + h));
    qkv::write_png_rgb(path, w, h, rgb);
    const auto bytes = qkv::read_file_bytes(path);
    ASSERT_GE(bytes.size(), 8u);
    EXPECT_EQ(std::string(bytes.data() + 1, 3), "PNG");
    int64_t rw = 0, rh = 0;
    const auto back = qkv::read_png_rgb(path, rw, rh);
    EXPECT_EQ(rw, w);
    EXPECT_EQ(rh, h);
    EXPECT_EQ(back, rgb);
  }
}

TEST(PngFile, WriteIntoAMissingFolderNamesThePath) {
  const auto path = qkv::testing::fresh_dir("png_missing") + "/sub/heat.png";
  qkv::testing::expect_data_error([&] { qkv::write_png_rgb(path, 2, 2, random_rgb(2, 2, 1)); }, path, "");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(PngFile, WrongPixelCountIsADataError) {
  const auto path = qkv::testing::temp_path("png_wrong_size.png");
  qkv::testing::expect_data_error([&] { qkv::write_png_rgb(path, 3, 2, std::vector<uint8_t>(17)); }, path,
                                  "17 bytes of pixels for a 3x2 RGB image, expected 18");
  qkv::testing::expect_data_error([&] { qkv::write_png_rgb(path, 0, 2, {}); }, path, "0x2");
}

TEST(PngFile, ReadingBrokenFilesIsADataError) {
  const auto text = qkv::testing::temp_path("png_not_really.png");
  qkv::write_file_atomic(text, std::string("hello, not a picture"));
  int64_t w = 0, h = 0;
  qkv::testing::expect_data_error([&] { qkv::read_png_rgb(text, w, h); }, text, "not a PNG file");

  const auto good = qkv::testing::temp_path("png_whole.png");
  qkv::write_png_rgb(good, 16, 16, random_rgb(16, 16, 3));
  auto bytes = qkv::read_file_bytes(good);
  bytes.resize(bytes.size() / 2);
  const auto cut = qkv::testing::temp_path("png_cut.png");
  qkv::write_file_atomic(cut, bytes);
  qkv::testing::expect_data_error([&] { qkv::read_png_rgb(cut, w, h); }, cut, "truncated");

  qkv::testing::expect_data_error([&] { qkv::read_png_rgb(cut + ".absent", w, h); }, cut + ".absent", "cannot open");
}

double luma(const std::array<uint8_t, 3>& c) { return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]; }

TEST(HeatColour, BrightnessRisesFromZeroToOne) {
  double previous = -1;
  for (int i = 0; i <= 100; ++i) {
    const double y = luma(qkv::heat_colour(i / 100.0));
    EXPECT_GT(y, previous) << "t = " << i / 100.0;
    previous = y;
  }
  // inferno's ends: near black and pale yellow.
  EXPECT_EQ(qkv::heat_colour(0), (std::array<uint8_t, 3>{0, 0, 4}));
  EXPECT_EQ(qkv::heat_colour(1), (std::array<uint8_t, 3>{252, 255, 164}));
  EXPECT_EQ(qkv::heat_colour(-3), qkv::heat_colour(0));
  EXPECT_EQ(qkv::heat_colour(7), qkv::heat_colour(1));
  EXPECT_EQ(qkv::heat_colour(NAN), qkv::heat_colour(0));
}

}  // namespace
