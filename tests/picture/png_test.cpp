#include "qkv/picture/png.h"
#include "qkv/picture/raster.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
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
    qkv::picture::write_png_rgb(path, w, h, rgb);
    const auto bytes = qkv::read_file_bytes(path);
    ASSERT_GE(bytes.size(), 8u);
    EXPECT_EQ(std::string(bytes.data() + 1, 3), "PNG");
    int64_t rw = 0, rh = 0;
    const auto back = qkv::picture::read_png_rgb(path, rw, rh);
    EXPECT_EQ(rw, w);
    EXPECT_EQ(rh, h);
    EXPECT_EQ(back, rgb);
  }
}

TEST(PngFile, WriteIntoAMissingFolderNamesThePath) {
  const auto path = qkv::testing::fresh_dir("png_missing") + "/sub/heat.png";
  qkv::testing::expect_data_error([&] { qkv::picture::write_png_rgb(path, 2, 2, random_rgb(2, 2, 1)); }, path, "");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(PngFile, WrongPixelCountIsADataError) {
  const auto path = qkv::testing::temp_path("png_wrong_size.png");
  qkv::testing::expect_data_error([&] { qkv::picture::write_png_rgb(path, 3, 2, std::vector<uint8_t>(17)); }, path,
                                  "17 bytes of pixels for a 3x2 RGB image, expected 18");
  qkv::testing::expect_data_error([&] { qkv::picture::write_png_rgb(path, 0, 2, {}); }, path, "0x2");
}

TEST(PngFile, ReadingBrokenFilesIsADataError) {
  const auto text = qkv::testing::temp_path("png_not_really.png");
  qkv::write_file_atomic(text, std::string("hello, not a picture"));
  int64_t w = 0, h = 0;
  qkv::testing::expect_data_error([&] { qkv::picture::read_png_rgb(text, w, h); }, text, "not a PNG file");

  const auto good = qkv::testing::temp_path("png_whole.png");
  qkv::picture::write_png_rgb(good, 16, 16, random_rgb(16, 16, 3));
  auto bytes = qkv::read_file_bytes(good);
  bytes.resize(bytes.size() / 2);
  const auto cut = qkv::testing::temp_path("png_cut.png");
  qkv::write_file_atomic(cut, bytes);
  qkv::testing::expect_data_error([&] { qkv::picture::read_png_rgb(cut, w, h); }, cut, "truncated");

  qkv::testing::expect_data_error([&] { qkv::picture::read_png_rgb(cut + ".absent", w, h); }, cut + ".absent",
                                  "no such file");
}

double luma(const std::array<uint8_t, 3>& c) { return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]; }

TEST(HeatColour, BrightnessRisesFromZeroToOne) {
  double previous = -1;
  for (int i = 0; i <= 100; ++i) {
    const double y = luma(qkv::picture::heat_colour(i / 100.0));
    EXPECT_GT(y, previous) << "t = " << i / 100.0;
    previous = y;
  }
  // inferno's ends: near black and pale yellow.
  EXPECT_EQ(qkv::picture::heat_colour(0), (std::array<uint8_t, 3>{0, 0, 4}));
  EXPECT_EQ(qkv::picture::heat_colour(1), (std::array<uint8_t, 3>{252, 255, 164}));
  EXPECT_EQ(qkv::picture::heat_colour(-3), qkv::picture::heat_colour(0));
  EXPECT_EQ(qkv::picture::heat_colour(7), qkv::picture::heat_colour(1));
  EXPECT_EQ(qkv::picture::heat_colour(NAN), qkv::picture::heat_colour(0));
}

// ---- Drawing ------------------------------------------------------------------

using qkv::picture::Rgb;
using qkv::picture::RgbImage;
using qkv::picture::TextSize;

constexpr Rgb kWhite = {255, 255, 255}, kBlack = {0, 0, 0};
constexpr TextSize kSizes[] = {TextSize::Small, TextSize::Large};

// Every printable character, and strings whose glyphs reach left of the pen
// ("j", "J"), past their advance ("K", "f") and below the baseline ("_", "g").
std::vector<std::string> awkward_texts() {
  std::vector<std::string> texts = {"8", "jT", "J_", "Kf", "g|y_", "Attention 0.00781", " x "};
  for (int c = 32; c <= 126; ++c) texts.emplace_back(1, static_cast<char>(c));
  return texts;
}

int max_channel_gap(const Rgb& a, const Rgb& b) {
  int gap = 0;
  for (int ch = 0; ch < 3; ++ch) gap = std::max(gap, std::abs(int(a[ch]) - int(b[ch])));
  return gap;
}

// The bounding box of pixels that differ from `background`: {x0, y0, x1, y1}, or all -1 if none.
std::array<int64_t, 4> changed_box(const RgbImage& image, const Rgb& background) {
  std::array<int64_t, 4> box = {-1, -1, -1, -1};
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x)
      if (image.at(x, y) != background) {
        if (box[0] < 0) box = {x, y, x, y};
        box = {std::min(box[0], x), std::min(box[1], y), std::max(box[2], x), std::max(box[3], y)};
      }
  return box;
}

TEST(Text, WidthGrowsWithTheTextAndIsZeroForNothing) {
  for (const TextSize size : kSizes) {
    EXPECT_EQ(qkv::picture::text_width("", size), 0);
    int64_t previous = 0;
    std::string text;
    for (const char c : std::string("attention 12.5%")) {
      text += c;
      const int64_t w = qkv::picture::text_width(text, size);
      EXPECT_GT(w, previous) << "'" << text << "'";
      previous = w;
    }
    EXPECT_GT(qkv::picture::text_width("W", size),
              qkv::picture::text_width("i", size));  // proportional, not monospaced
  }
  EXPECT_GT(qkv::picture::text_width("attention", TextSize::Large),
            qkv::picture::text_width("attention", TextSize::Small));
  EXPECT_GE(qkv::picture::text_height(TextSize::Small), 10);
  EXPECT_GT(qkv::picture::text_height(TextSize::Large), qkv::picture::text_height(TextSize::Small) + 3);
}

TEST(Text, DrawsOnlyInsideItsBox) {
  for (const TextSize size : kSizes)
    for (const auto& text : awkward_texts()) {
      RgbImage image(120, 50);
      const int64_t x = 20, y = 10;
      qkv::picture::draw_text(image, x, y, text, kBlack, size);
      const auto box = changed_box(image, kWhite);
      if (text.find_first_not_of(' ') == std::string::npos) {
        EXPECT_EQ(box[0], -1) << "a space drew something";
        continue;
      }
      ASSERT_GE(box[0], 0) << "'" << text << "' drew nothing";
      EXPECT_GE(box[0], x) << "'" << text << "'";
      EXPECT_GE(box[1], y) << "'" << text << "'";
      EXPECT_LT(box[2], x + qkv::picture::text_width(text, size)) << "'" << text << "'";
      EXPECT_LT(box[3], y + qkv::picture::text_height(size)) << "'" << text << "'";
    }
}

TEST(Text, AnEightIsDarkInkOnWhite) {
  for (const TextSize size : kSizes) {
    RgbImage image(40, 30);
    qkv::picture::draw_text(image, 5, 5, "8", kBlack, size);
    int dark = 0;
    for (int64_t y = 0; y < image.height; ++y)
      for (int64_t x = 0; x < image.width; ++x) {
        const Rgb c = image.at(x, y);
        EXPECT_TRUE(c[0] == c[1] && c[1] == c[2]) << "black on white blends to grey";
        if (c[0] < 64) ++dark;
      }
    // An 8's strokes: at least two full columns' worth of solid pixels.
    EXPECT_GE(dark, 2 * (qkv::picture::text_height(size) / 2)) << "size " << static_cast<int>(size);
  }
}

TEST(Text, IsClippedAtTheEdges) {
  // Drawn partly outside a small picture = the same part of it drawn whole in a large one.
  const std::string text = "Tail jg_";
  for (const TextSize size : kSizes)
    for (const auto& [x, y] : {std::pair<int64_t, int64_t>{-7, -5}, {10, 4}, {-40, 8}}) {
      RgbImage whole(200, 60), part(24, 12);
      qkv::picture::draw_text(whole, 100 + x, 20 + y, text, {200, 30, 30}, size);
      qkv::picture::draw_text(part, x, y, text, {200, 30, 30}, size);
      for (int64_t py = 0; py < part.height; ++py)
        for (int64_t px = 0; px < part.width; ++px)
          ASSERT_EQ(part.at(px, py), whole.at(100 + px, 20 + py)) << "at " << px << "," << py;
    }
  RgbImage image(10, 10);
  for (const int64_t far : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), int64_t{-30}})
    qkv::picture::draw_text(image, far, far, text, kBlack);
  EXPECT_EQ(changed_box(image, kWhite)[0], -1);
}

TEST(Text, OtherBytesAreDrawnAsQuestionMarks) {
  RgbImage a(80, 20), b(80, 20);
  qkv::picture::draw_text(a, 2, 2, "caf\xc3\xa9\n\t", kBlack);
  qkv::picture::draw_text(b, 2, 2, "caf????", kBlack);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(qkv::picture::text_width("\x7f", TextSize::Small), qkv::picture::text_width("?", TextSize::Small));
}

TEST(CompactNumber, KeepsThreeSignificantDigitsWithoutTrailingZeros) {
  const std::vector<std::pair<double, std::string>> cases = {{0, "0"},
                                                             {-0.0, "0"},
                                                             {0.5, "0.5"},
                                                             {1, "1"},
                                                             {12.345, "12.3"},
                                                             {0.0078125, "0.00781"},
                                                             {0.0078, "0.0078"},
                                                             {0.001, "0.001"},
                                                             {-2.5, "-2.5"},
                                                             {999.4, "999"},
                                                             {1234.5, "1234"},
                                                             {99999, "99999"},
                                                             {99999.7, "1e+05"},
                                                             {123456, "1.23e+05"},
                                                             {1.2e-05, "1.2e-05"},
                                                             {0.000999, "9.99e-04"},
                                                             {-3e-7, "-3e-07"},
                                                             {0.1 + 0.2, "0.3"},
                                                             {9.996, "10"}};
  for (const auto& [value, text] : cases) EXPECT_EQ(qkv::picture::compact_number(value), text) << value;
  EXPECT_EQ(qkv::picture::compact_number(NAN), "nan");
  EXPECT_EQ(qkv::picture::compact_number(-INFINITY), "-inf");
}

// A narrow range far from 0 still gets distinct tick labels (more digits,
// so a wider column of numbers); the digits are the caller's to choose too.
TEST(CompactNumber, MoreDigitsOnRequestAndOnNarrowColourbars) {
  EXPECT_EQ(qkv::picture::compact_number(0.0370512, 5), "0.037051");
  EXPECT_EQ(qkv::picture::compact_number(123456.0, 4), "1.235e+05");
  qkv::picture::RgbImage image(300, 300);
  const int64_t wide_range = qkv::picture::draw_colourbar(image, 10, 30, 20, 200, 0.0370, 0.0470, "");
  const int64_t narrow_range = qkv::picture::draw_colourbar(image, 10, 30, 20, 200, 0.0370, 0.0371, "");
  EXPECT_GT(narrow_range, wide_range);
  // What a caller sizes a picture by is what the bar then takes.
  EXPECT_EQ(qkv::picture::colourbar_width(20, 200, 0.0370, 0.0371, ""), narrow_range);
  EXPECT_EQ(qkv::picture::colourbar_width(20, 200, 0.0370, 0.0470, ""), wide_range);
  EXPECT_GT(qkv::picture::draw_colourbar(image, 10, 30, 20, 200, 0.037, 0.037, ""), 0);  // lo == hi ends
}

TEST(Colourbar, RunsFromInfernoOneAtTheTopToZeroAtTheBottom) {
  RgbImage image(200, 220);
  const int64_t x = 20, y = 40, w = 14, h = 150;
  const int64_t used = qkv::picture::draw_colourbar(image, x, y, w, h, 0, 0.03125, "attention");
  for (int64_t px = x + 1; px < x + w - 1; ++px) {
    EXPECT_LE(max_channel_gap(image.at(px, y + 1), qkv::picture::heat_colour(1)), 2) << px;
    EXPECT_LE(max_channel_gap(image.at(px, y + h - 2), qkv::picture::heat_colour(0)), 2) << px;
    EXPECT_LE(max_channel_gap(image.at(px, y + h / 2), qkv::picture::heat_colour(0.5)), 8) << px;
  }
  double previous = 1e9;  // brightness falls row by row
  for (int64_t py = y + 1; py < y + h - 1; ++py) {
    const Rgb c = image.at(x + w / 2, py);
    const double luma = 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2];
    EXPECT_LE(luma, previous) << py;
    previous = luma;
  }
  // The outline is neither colour map nor background.
  EXPECT_NE(image.at(x, y + h / 2), kWhite);
  EXPECT_NE(image.at(x, y + h / 2), image.at(x + 1, y + h / 2));
  // Numbers to the right of the bar, within the width it reports; the label above it.
  EXPECT_GE(used, w + qkv::picture::text_width("0.00781", TextSize::Small));
  const auto box = changed_box(image, kWhite);
  EXPECT_EQ(box[0], x);
  EXPECT_LT(box[2], x + used);
  EXPECT_GT(box[2], x + used - 4);  // the last column of "0.00781" (less the 1's side bearing)
  EXPECT_GE(box[1], y - qkv::picture::text_height(TextSize::Small) * 3 / 2 - 1);
  EXPECT_LT(box[1], y - qkv::picture::text_height(TextSize::Small));  // the label, above the top number
  EXPECT_LE(box[3], y + h - 1 + qkv::picture::text_height(TextSize::Small) / 2);
  // The label and the numbers are drawn in dark ink: the five numbers' rows and the label's.
  auto dark_rows = [&](int64_t from_x, int64_t to_x) {
    int rows = 0;
    for (int64_t py = 0; py < image.height; ++py)
      for (int64_t px = from_x; px < to_x; ++px)
        if (image.at(px, py)[0] < 80) {
          ++rows;
          break;
        }
    return rows;
  };
  EXPECT_GE(dark_rows(x + w + 4, x + used), 5 * 7);
  RgbImage with_label(200, 220), without_label(200, 220);
  qkv::picture::draw_colourbar(with_label, x, y, w, h, 0, 1, "attention");
  qkv::picture::draw_colourbar(without_label, x, y, w, h, 0, 1, "");
  EXPECT_NE(with_label.pixels, without_label.pixels);
  for (int64_t py = y - qkv::picture::text_height(TextSize::Small) / 2 + 1; py < image.height; ++py)
    for (int64_t px = 0; px < image.width; ++px)
      ASSERT_EQ(with_label.at(px, py), without_label.at(px, py)) << "the label reaches row " << py;
}

TEST(Colourbar, ShortBarsShowFewerNumbers) {
  auto numbers_drawn = [](int64_t h) {
    RgbImage image(100, 120);
    qkv::picture::draw_colourbar(image, 10, 30, 10, h, 1, 5, "");
    int runs = 0;  // separate runs of rows with ink right of the ticks
    bool inside = false;
    for (int64_t py = 0; py < image.height; ++py) {
      bool ink = false;
      for (int64_t px = 10 + 10 + 4; px < image.width; ++px) ink = ink || image.at(px, py)[0] < 128;
      if (ink && !inside) ++runs;
      inside = ink;
    }
    return runs;
  };
  EXPECT_EQ(numbers_drawn(80), 5);
  EXPECT_EQ(numbers_drawn(40), 3);
  EXPECT_EQ(numbers_drawn(20), 2);
  RgbImage image(10, 10);
  EXPECT_EQ(qkv::picture::draw_colourbar(image, 1, 1, 2, 8, 0, 1, "x"), 0);
  EXPECT_EQ(changed_box(image, kWhite)[0], -1);
}

TEST(Legend, ShowsEachColourAndNameWithinTheSizeItReports) {
  const std::vector<std::pair<std::string, Rgb>> parts = {
      {"wing", {31, 119, 180}}, {"body", {255, 127, 14}}, {"engine", {44, 160, 44}}, {"tail", {214, 39, 40}}};
  RgbImage image(150, 120);
  const auto [w, h] = qkv::picture::draw_legend(image, 10, 20, parts);
  EXPECT_EQ(w, qkv::picture::text_height(TextSize::Small) + 3 + qkv::picture::text_width("engine", TextSize::Small));
  EXPECT_GE(h, 4 * qkv::picture::text_height(TextSize::Small));
  const auto box = changed_box(image, kWhite);
  EXPECT_EQ(box[0], 10);
  EXPECT_GE(box[1], 20);
  EXPECT_LT(box[2], 10 + w);
  EXPECT_LT(box[3], 20 + h);
  for (const auto& [name, colour] : parts) {
    bool found = false;
    for (int64_t py = 0; py < image.height && !found; ++py)
      for (int64_t px = 0; px < image.width && !found; ++px) found = image.at(px, py) == colour;
    EXPECT_TRUE(found) << name;
  }
  // Each row's swatch sits above the next one's.
  EXPECT_EQ(image.at(13, 20 + h / 8), parts[0].second);
  EXPECT_EQ(image.at(13, 20 + h - h / 8), parts[3].second);
  EXPECT_EQ(qkv::picture::draw_legend(image, 0, 0, {}), (std::pair<int64_t, int64_t>{0, 0}));
}

TEST(RgbImage, PixelsAreSetBlendedAndClipped) {
  RgbImage image(4, 3, {10, 20, 30});
  EXPECT_EQ(image.pixels.size(), 4u * 3u * 3u);
  EXPECT_EQ(image.at(3, 2), (Rgb{10, 20, 30}));
  image.set(3, 2, {1, 2, 3});
  EXPECT_EQ(image.pixels[(2 * 4 + 3) * 3 + 1], 2);
  image.blend(0, 0, {210, 220, 230}, 0.5);
  EXPECT_EQ(image.at(0, 0), (Rgb{110, 120, 130}));
  image.blend(0, 0, {0, 0, 0}, NAN);
  image.blend(0, 0, {0, 0, 0}, -1);
  EXPECT_EQ(image.at(0, 0), (Rgb{110, 120, 130}));
  image.blend(0, 0, {7, 8, 9}, 3);
  EXPECT_EQ(image.at(0, 0), (Rgb{7, 8, 9}));
  const auto before = image.pixels;
  image.set(-1, 0, kBlack);
  image.set(4, 0, kBlack);
  image.blend(0, 3, kBlack, 1);
  EXPECT_EQ(image.pixels, before);
  EXPECT_THROW(image.at(4, 0), std::out_of_range);
  EXPECT_THROW(image.at(0, -1), std::out_of_range);
}

TEST(RgbImage, SidesOutsideOneToOneHundredThousandAreADataError) {
  qkv::testing::expect_data_error([] { RgbImage(0, 5); }, "0x5", "1..100000");
  qkv::testing::expect_data_error([] { RgbImage(200000, 1); }, "200000x1", "1..100000");
  qkv::testing::expect_data_error([] { RgbImage(3, -2); }, "3x-2", "");
  EXPECT_NO_THROW(RgbImage(100000, 1));
}

TEST(RgbImage, RectanglesAndPastesAreClipped) {
  RgbImage image(8, 6);
  qkv::picture::fill_rect(image, 6, 4, std::numeric_limits<int64_t>::max(), 100, {1, 1, 1});
  EXPECT_EQ(changed_box(image, kWhite), (std::array<int64_t, 4>{6, 4, 7, 5}));
  qkv::picture::fill_rect(image, -3, -3, 0, 10, kBlack);  // empty
  EXPECT_EQ(changed_box(image, kWhite), (std::array<int64_t, 4>{6, 4, 7, 5}));

  RgbImage outline(8, 6);
  qkv::picture::draw_rect_outline(outline, 1, 1, 5, 4, kBlack);
  EXPECT_EQ(changed_box(outline, kWhite), (std::array<int64_t, 4>{1, 1, 5, 4}));
  EXPECT_EQ(outline.at(3, 2), kWhite);  // hollow
  EXPECT_EQ(outline.at(5, 3), kBlack);
  qkv::picture::draw_rect_outline(outline, -2, -2, std::numeric_limits<int64_t>::max(), 4, {9, 9, 9});
  EXPECT_EQ(outline.at(0, 1), (Rgb{9, 9, 9}));

  RgbImage src(3, 3, {50, 60, 70});
  src.set(0, 0, {1, 2, 3});
  src.set(2, 2, {4, 5, 6});
  RgbImage dst(5, 4);
  qkv::picture::paste(dst, src, -2, 2);  // only src's right column, top two rows, lands
  EXPECT_EQ(changed_box(dst, kWhite), (std::array<int64_t, 4>{0, 2, 0, 3}));
  qkv::picture::paste(dst, src, 2, 1);
  EXPECT_EQ(dst.at(2, 1), (Rgb{1, 2, 3}));
  EXPECT_EQ(dst.at(4, 3), (Rgb{4, 5, 6}));
  qkv::picture::paste(dst, src, 100, std::numeric_limits<int64_t>::min());
}

TEST(RgbImage, WrittenAsPngReadsBackBitEqual) {
  RgbImage image(37, 21);
  const auto noise = random_rgb(37, 21, 9);
  image.pixels = noise;
  qkv::picture::draw_text(image, 1, 1, "qkv", {255, 0, 0}, TextSize::Large);
  qkv::picture::draw_colourbar(image, 28, 2, 5, 17, 0, 1, "");
  const auto path = qkv::testing::temp_path("png_canvas.png");
  qkv::picture::write_png(path, image);
  int64_t w = 0, h = 0;
  const auto back = qkv::picture::read_png_rgb(path, w, h);
  EXPECT_EQ(w, 37);
  EXPECT_EQ(h, 21);
  EXPECT_EQ(back, image.pixels);
  EXPECT_NE(back, noise);
  const auto bytes = qkv::picture::encode_png(image, "canvas");
  EXPECT_EQ(bytes, qkv::picture::encode_png_rgb(37, 21, image.pixels, "canvas"));
  image.pixels.pop_back();
  qkv::testing::expect_data_error([&] { qkv::picture::encode_png(image, "canvas"); }, "canvas", "bytes of pixels");
}

}  // namespace

TEST(RgbImage, LinesAndDiscsCoverTheirOutlineOnly) {
  RgbImage image(40, 20);
  draw_line(image, 5, 10.25, 35, 10.25, kBlack, 3);
  // On the line: full colour; a pixel off it: untouched; the rim: in between.
  EXPECT_EQ(image.at(20, 10), kBlack);
  EXPECT_EQ(image.at(20, 9), kBlack);
  EXPECT_EQ(image.at(20, 5), kWhite);
  EXPECT_EQ(image.at(38, 10), kWhite);
  const Rgb rim = image.at(20, 8);
  EXPECT_GT(rim[0], 0);
  EXPECT_LT(rim[0], 255);
  // A diagonal reaches both ends; NaN draws nothing; far outside is clipped.
  RgbImage diagonal(20, 20);
  draw_line(diagonal, 0.5, 0.5, 19.5, 19.5, kBlack);
  EXPECT_EQ(diagonal.at(0, 0), kBlack);
  EXPECT_EQ(diagonal.at(19, 19), kBlack);
  EXPECT_EQ(diagonal.at(19, 0), kWhite);
  const auto before = diagonal.pixels;
  draw_line(diagonal, NAN, 0, 5, 5, kBlack);
  draw_line(diagonal, -1e12, -1e12, -1e12 + 1, -1e12, kBlack, 1e6);
  fill_disc(diagonal, INFINITY, 3, 2, kBlack);
  EXPECT_EQ(diagonal.pixels, before);
  RgbImage disc(20, 20);
  fill_disc(disc, 10, 10, 4, kBlack);
  EXPECT_EQ(disc.at(10, 10), kBlack);
  EXPECT_EQ(disc.at(9, 9), kBlack);
  EXPECT_EQ(disc.at(10, 16), kWhite);
  EXPECT_EQ(disc.at(16, 10), kWhite);
}
