#include "qkv/picture/raster.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/picture/png.h"

namespace qkv::picture {

Rgb heat_colour(double t) {
  // matplotlib's _inferno_data sampled at t = i / 32, scaled to 0..255.
  static constexpr uint8_t kInferno[33][3] = {
      {0, 0, 4},      {4, 3, 18},     {11, 7, 36},     {21, 11, 55},    {33, 12, 74},   {46, 10, 90},   {60, 9, 101},
      {74, 12, 107},  {87, 16, 109},  {99, 20, 110},   {112, 25, 110},  {125, 30, 109}, {137, 34, 106}, {150, 39, 102},
      {163, 43, 97},  {175, 49, 92},  {187, 55, 85},   {198, 62, 77},   {209, 70, 68},  {219, 79, 59},  {227, 89, 50},
      {235, 101, 40}, {241, 113, 30}, {246, 127, 20},  {249, 141, 10},  {251, 156, 6},  {252, 171, 15}, {251, 186, 31},
      {249, 202, 50}, {245, 217, 73}, {242, 232, 101}, {243, 245, 134}, {252, 255, 164}};
  if (std::isnan(t)) t = 0;
  const double x = std::clamp(t, 0.0, 1.0) * 32;
  const int i = std::min(static_cast<int>(x), 31);
  const double f = x - i;
  Rgb c{};
  for (int ch = 0; ch < 3; ++ch)
    c[ch] = static_cast<uint8_t>(std::lround(kInferno[i][ch] * (1 - f) + kInferno[i + 1][ch] * f));
  return c;
}

// ---- Drawing ------------------------------------------------------------------

namespace {

#include "qkv/picture/glyphs.inc"

constexpr int64_t kMaxImageSide = 100000;
// Positions further out than this are off any image, whatever the text on
// them; clamping to it keeps the sums below from overflowing.
constexpr int64_t kFarAway = int64_t{1} << 40;

constexpr Rgb kInk = {0, 0, 0};          // text of the colour bar and the legend
constexpr Rgb kFrame = {96, 96, 96};     // outlines of the colour bar, its ticks, the swatches
constexpr int64_t kTickLength = 3;       // columns of a colour bar's tick mark
constexpr int64_t kTickGap = 2;          // columns between a tick mark and its number
constexpr int64_t kLabelGap = 2;         // rows between a colour bar's label and its top number
constexpr int64_t kLegendRowGap = 4;     // rows between two legend entries
constexpr int64_t kLegendSwatchGap = 5;  // columns between a swatch and its name

bool far_away(int64_t position) { return position < -kFarAway || position > kFarAway; }

const GlyphFace& face_of(TextSize size) { return size == TextSize::Large ? kLargeFace : kSmallFace; }

int glyph_code(char c) {
  const int code = static_cast<unsigned char>(c);
  return code >= kFirstGlyph && code <= kLastGlyph ? code : '?';
}

int kerning(const GlyphFace& face, int left, int right) {
  const GlyphKern* begin = face.kerning;
  const GlyphKern* end = face.kerning + face.kerning_pairs;
  const GlyphKern* k = std::lower_bound(begin, end, std::pair<int, int>{left, right},
                                        [](const GlyphKern& a, const std::pair<int, int>& b) {
                                          return std::pair<int, int>{a.left, a.right} < b;
                                        });
  return k != end && k->left == left && k->right == right ? k->dx : 0;
}

// Where each character of a line goes: calls place(code, ink_x) with the
// column, relative to the text's left edge, of that glyph's bitmap; returns
// the text's width. The left edge is the leftmost of the first pen position
// and any ink (a glyph may reach left of its pen position), the right edge
// the rightmost of the last pen position and any ink.
template <class Place>
int64_t lay_out(const std::string& text, TextSize size, Place&& place) {
  const GlyphFace& face = face_of(size);
  int64_t pen = 0, ink_min = 0, ink_max = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the first finds how far ink reaches left of the start
    const int64_t shift = -ink_min;
    pen = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const int code = glyph_code(text[i]);
      const GlyphBitmap& g = face.glyphs[code - kFirstGlyph];
      if (g.width > 0) {
        const int64_t left = pen + g.left;
        if (pass == 0) {
          ink_min = std::min(ink_min, left);
          ink_max = std::max(ink_max, left + g.width);
        } else {
          place(code, left + shift);
        }
      }
      pen += g.advance;
      if (i + 1 < text.size()) pen += kerning(face, code, glyph_code(text[i + 1]));
    }
  }
  return std::max(pen, ink_max) - ink_min;
}

// [begin, end) of the span [start, start + length) that lies in [0, limit).
std::pair<int64_t, int64_t> clip(int64_t start, int64_t length, int64_t limit) {
  if (length <= 0) return {0, 0};
  int64_t stop = 0;
  if (!checked_add(start, length, stop)) stop = std::numeric_limits<int64_t>::max();
  const int64_t begin = std::clamp<int64_t>(start, 0, limit), end = std::clamp<int64_t>(stop, 0, limit);
  return {begin, std::max(begin, end)};
}

uint8_t mix(uint8_t ink, uint8_t paper, unsigned coverage) {  // coverage 0..255
  return static_cast<uint8_t>((ink * coverage + paper * (255 - coverage) + 127) / 255);
}

// The rows of a vertical bar from its top (t = 1) to its bottom (t = 0).
double bar_position(int64_t row, int64_t rows) {
  return rows > 1 ? 1.0 - static_cast<double>(row) / static_cast<double>(rows - 1) : 1.0;
}

}  // namespace

RgbImage::RgbImage(int64_t width_, int64_t height_, Rgb fill) : width(width_), height(height_) {
  if (width < 1 || height < 1 || width > kMaxImageSide || height > kMaxImageSide)
    throw DataError("cannot make a " + std::to_string(width) + "x" + std::to_string(height) +
                    " picture (each side must be 1.." + std::to_string(kMaxImageSide) + ")");
  size_t bytes = 0;
  if (!checked_mul(static_cast<size_t>(width), static_cast<size_t>(height), bytes) ||
      !checked_mul(bytes, size_t{3}, bytes))
    throw DataError("a " + std::to_string(width) + "x" + std::to_string(height) + " picture is too large");
  pixels.resize(bytes);
  for (size_t i = 0; i < bytes; i += 3) std::memcpy(&pixels[i], fill.data(), 3);
}

Rgb RgbImage::at(int64_t x, int64_t y) const {
  if (x < 0 || y < 0 || x >= width || y >= height)
    throw std::out_of_range("pixel (" + std::to_string(x) + ", " + std::to_string(y) + ") is outside a " +
                            std::to_string(width) + "x" + std::to_string(height) + " picture");
  const uint8_t* p = &pixels[static_cast<size_t>((y * width + x) * 3)];
  return {p[0], p[1], p[2]};
}

void RgbImage::set(int64_t x, int64_t y, Rgb colour) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  std::memcpy(&pixels[static_cast<size_t>((y * width + x) * 3)], colour.data(), 3);
}

void RgbImage::blend(int64_t x, int64_t y, Rgb colour, double alpha) {
  if (x < 0 || y < 0 || x >= width || y >= height || !(alpha > 0)) return;
  const auto coverage = static_cast<unsigned>(std::lround(std::min(alpha, 1.0) * 255));
  uint8_t* p = &pixels[static_cast<size_t>((y * width + x) * 3)];
  for (int ch = 0; ch < 3; ++ch) p[ch] = mix(colour[ch], p[ch], coverage);
}

int64_t text_width(const std::string& text, TextSize size) {
  return lay_out(text, size, [](int, int64_t) {});
}

int64_t text_height(TextSize size) {
  const GlyphFace& face = face_of(size);
  return face.ascent + face.descent;
}

void draw_text(RgbImage& image, int64_t x, int64_t y, const std::string& text, Rgb colour, TextSize size) {
  if (x >= image.width || y >= image.height || far_away(x) || far_away(y)) return;
  const GlyphFace& face = face_of(size);
  const int64_t baseline = y + face.ascent;
  lay_out(text, size, [&](int code, int64_t ink_x) {
    const GlyphBitmap& g = face.glyphs[code - kFirstGlyph];
    const int64_t left = x + ink_x, top = baseline - g.top;
    const auto [x0, x1] = clip(left, g.width, image.width);
    const auto [y0, y1] = clip(top, g.height, image.height);
    for (int64_t py = y0; py < y1; ++py) {
      const uint8_t* cover = kGlyphCoverage + g.offset + (py - top) * g.width;
      uint8_t* p = &image.pixels[static_cast<size_t>((py * image.width + x0) * 3)];
      for (int64_t px = x0; px < x1; ++px, p += 3)
        if (const unsigned c = cover[px - left]; c != 0)
          for (int ch = 0; ch < 3; ++ch) p[ch] = mix(colour[ch], p[ch], c);
    }
  });
}

void fill_rect(RgbImage& image, int64_t x, int64_t y, int64_t w, int64_t h, Rgb colour) {
  const auto [x0, x1] = clip(x, w, image.width);
  const auto [y0, y1] = clip(y, h, image.height);
  for (int64_t py = y0; py < y1; ++py)
    for (int64_t px = x0; px < x1; ++px)
      std::memcpy(&image.pixels[static_cast<size_t>((py * image.width + px) * 3)], colour.data(), 3);
}

void draw_rect_outline(RgbImage& image, int64_t x, int64_t y, int64_t w, int64_t h, Rgb colour) {
  if (w < 1 || h < 1) return;
  int64_t right = 0, bottom = 0;  // the last column and row; past the image when they overflow
  if (!checked_add(x, w - 1, right)) right = std::numeric_limits<int64_t>::max();
  if (!checked_add(y, h - 1, bottom)) bottom = std::numeric_limits<int64_t>::max();
  fill_rect(image, x, y, w, 1, colour);
  fill_rect(image, x, bottom, w, 1, colour);
  fill_rect(image, x, y, 1, h, colour);
  fill_rect(image, right, y, 1, h, colour);
}

namespace {

// Blends every pixel whose centre is within reach of the shape into `colour`,
// by the coverage that `covered(cx, cy)` gives its centre; the box [x0, x1] x
// [y0, y1] (image coordinates) bounds the shape and is clipped to the image.
template <typename Coverage>
void blend_shape(RgbImage& image, double x0, double y0, double x1, double y1, Rgb colour, Coverage covered) {
  const auto lo = [](double v) { return static_cast<int64_t>(std::floor(std::max(v, -1.0))); };
  const auto hi = [](double v, int64_t size) {
    return static_cast<int64_t>(std::ceil(std::min(v, static_cast<double>(size))));
  };
  for (int64_t y = lo(y0); y <= hi(y1, image.height); ++y)
    for (int64_t x = lo(x0); x <= hi(x1, image.width); ++x) {
      const double coverage = covered(static_cast<double>(x) + 0.5, static_cast<double>(y) + 0.5);
      if (coverage > 0) image.blend(x, y, colour, coverage);
    }
}

}  // namespace

void draw_line(RgbImage& image, double x0, double y0, double x1, double y1, Rgb colour, double width) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) return;
  const double half = std::max(width, 1.0) / 2, reach = half + 1;
  const double dx = x1 - x0, dy = y1 - y0, length2 = dx * dx + dy * dy;
  blend_shape(image, std::min(x0, x1) - reach, std::min(y0, y1) - reach, std::max(x0, x1) + reach,
              std::max(y0, y1) + reach, colour, [&](double cx, double cy) {
                // Distance from the centre to the nearest point of the segment.
                const double t = length2 > 0 ? std::clamp(((cx - x0) * dx + (cy - y0) * dy) / length2, 0.0, 1.0) : 0.0;
                const double d = std::hypot(cx - (x0 + t * dx), cy - (y0 + t * dy));
                return std::clamp(half + 0.5 - d, 0.0, 1.0);
              });
}

void fill_disc(RgbImage& image, double x, double y, double radius, Rgb colour) {
  if (!std::isfinite(x) || !std::isfinite(y) || !(radius > 0)) return;
  blend_shape(image, x - radius - 1, y - radius - 1, x + radius + 1, y + radius + 1, colour,
              [&](double cx, double cy) { return std::clamp(radius + 0.5 - std::hypot(cx - x, cy - y), 0.0, 1.0); });
}

void paste(RgbImage& dst, const RgbImage& src, int64_t x, int64_t y) {
  const auto [x0, x1] = clip(x, src.width, dst.width);
  const auto [y0, y1] = clip(y, src.height, dst.height);
  if (x0 >= x1) return;
  for (int64_t py = y0; py < y1; ++py)
    std::memcpy(&dst.pixels[static_cast<size_t>((py * dst.width + x0) * 3)],
                &src.pixels[static_cast<size_t>(((py - y) * src.width + (x0 - x)) * 3)],
                static_cast<size_t>((x1 - x0) * 3));
}

std::string compact_number(double value, int significant) {
  significant = std::clamp(significant, 1, 12);
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return "0";  // also -0
  char text[64];
  const double magnitude = std::fabs(value);
  if (magnitude >= 1e-3 && magnitude < 99999.5) {
    // Three significant digits, or the whole integer part when it has more.
    const int digits_before_point = static_cast<int>(std::floor(std::log10(magnitude))) + 1;
    const int decimals = std::max(0, significant - digits_before_point);
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    std::string s = text;
    if (s.find('.') != std::string::npos) {
      s.erase(s.find_last_not_of('0') + 1);
      if (s.back() == '.') s.pop_back();
    }
    return s == "-0" ? "0" : s;
  }
  std::snprintf(text, sizeof text, "%.*e", significant - 1, value);
  std::string s = text;
  const size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  mantissa.erase(mantissa.find_last_not_of('0') + 1);
  if (mantissa.back() == '.') mantissa.pop_back();
  return mantissa + s.substr(e);
}

namespace {

// A colour bar's tick labels, bottom (lo) to top (hi): at steps of the bar's
// inner height, as many as leave a gap between their numbers, each with as
// many significant digits as it takes for neighbours to read differently (a
// narrow range far from 0: 0.03702, 0.03705, ...).
std::vector<std::string> colourbar_ticks(int64_t h, double lo, double hi) {
  const int64_t line = text_height(TextSize::Small), inner = h - 2;
  int steps = 4;
  while (steps > 1 && (inner - 1) / steps < line + 2) steps /= 2;
  if (hi == lo) steps = 1;  // one value: at the ends only
  std::vector<std::string> numbers;
  for (int significant = 3; significant <= 8; ++significant) {
    numbers.clear();
    for (int i = 0; i <= steps; ++i)
      numbers.push_back(compact_number(i == steps ? hi : lo + (hi - lo) * i / steps, significant));
    if (std::adjacent_find(numbers.begin(), numbers.end()) == numbers.end() || hi == lo) break;
  }
  return numbers;
}

bool colourbar_fits(int64_t w, int64_t h) { return w >= 3 && h >= 3 && w <= kFarAway && h <= kFarAway; }

}  // namespace

int64_t colourbar_width(int64_t w, int64_t h, double lo, double hi, const std::string& label) {
  if (!colourbar_fits(w, h)) return 0;
  int64_t numbers_width = 0;
  for (const auto& number : colourbar_ticks(h, lo, hi))
    numbers_width = std::max(numbers_width, text_width(number, TextSize::Small));
  return std::max(w + kTickLength + kTickGap + numbers_width, text_width(label, TextSize::Small));
}

int64_t draw_colourbar(RgbImage& image, int64_t x, int64_t y, int64_t w, int64_t h, double lo, double hi,
                       const std::string& label) {
  if (!colourbar_fits(w, h) || far_away(x) || far_away(y)) return 0;
  const int64_t line = text_height(TextSize::Small);
  const int64_t inner = h - 2;  // rows inside the outline
  const auto [y0, y1] = clip(y + 1, inner, image.height);
  for (int64_t py = y0; py < y1; ++py)
    fill_rect(image, x + 1, py, w - 2, 1, heat_colour(bar_position(py - (y + 1), inner)));
  draw_rect_outline(image, x, y, w, h, kFrame);

  const auto numbers = colourbar_ticks(h, lo, hi);
  const int steps = static_cast<int>(numbers.size()) - 1;
  for (int i = 0; i <= steps; ++i) {
    const double t = static_cast<double>(i) / steps;
    const int64_t row = y + 1 + std::lround(static_cast<double>(inner - 1) * (1 - t));
    const std::string& number = numbers[static_cast<size_t>(i)];
    fill_rect(image, x + w, row, kTickLength, 1, kFrame);
    draw_text(image, x + w + kTickLength + kTickGap, row - line / 2, number, kInk);
  }
  // Above the top number, which reaches half a line above the bar.
  draw_text(image, x, y + 1 - line / 2 - kLabelGap - line, label, kInk);
  return colourbar_width(w, h, lo, hi, label);
}

std::pair<int64_t, int64_t> draw_legend(RgbImage& image, int64_t x, int64_t y,
                                        const std::vector<std::pair<std::string, Rgb>>& entries) {
  if (entries.empty()) return {0, 0};
  const int64_t line = text_height(TextSize::Small);
  const int64_t swatch = line - 2;
  const bool draw = !far_away(x) && !far_away(y);
  int64_t width = 0, row = 0;  // row: the entry's top, from y
  for (const auto& [name, colour] : entries) {
    if (draw) {
      fill_rect(image, x, y + row + 1, swatch, swatch, colour);
      draw_rect_outline(image, x, y + row + 1, swatch, swatch, kFrame);
      draw_text(image, x + swatch + kLegendSwatchGap, y + row, name, kInk);
    }
    width = std::max(width, swatch + kLegendSwatchGap + text_width(name, TextSize::Small));
    row += line + kLegendRowGap;
  }
  return {width, row - kLegendRowGap};
}

std::vector<uint8_t> encode_png(const RgbImage& image, const std::string& what) {
  return encode_png_rgb(image.width, image.height, image.pixels, what);
}

void write_png(const std::string& path, const RgbImage& image) {
  write_png_rgb(path, image.width, image.height, image.pixels);
}

}  // namespace qkv::picture
