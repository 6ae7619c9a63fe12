#pragma once
// The drawing layer of qkv's pictures: an 8-bit RGB image, the colour map of
// attention heat maps, and what goes around a picture (text, rectangles,
// lines, a colour bar with its values, a legend), written as PNG
// (picture/png.h).
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qkv::picture {

using Rgb = std::array<uint8_t, 3>;

// Matplotlib's 'inferno' colour map (black, purple, red, orange, pale yellow):
// perceptually uniform, with lightness rising monotonically, so a brighter
// pixel always means more attention, also when printed in grey. Piecewise
// linear through 33 samples of the original 256-entry table (within 2 of 255
// of it). t is clamped to [0, 1]; NaN gives the colour of 0.
Rgb heat_colour(double t);

// ---- Drawing ------------------------------------------------------------------
// Coordinates are pixels, x to the right and y down from the top-left corner.
// Everything is clipped at the image's edges: drawing partly or wholly outside
// is not an error.

// An 8-bit RGB picture, rows top first: pixel (x, y) is pixels[(y * width + x) * 3 + 0..2].
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3 bytes

  // DataError unless both sides are 1..100000.
  RgbImage(int64_t width, int64_t height, Rgb fill = {255, 255, 255});

  // std::out_of_range outside the image.
  Rgb at(int64_t x, int64_t y) const;
  // Does nothing outside the image.
  void set(int64_t x, int64_t y, Rgb colour);
  // The pixel becomes alpha * colour + (1 - alpha) * itself; alpha is clamped
  // to [0, 1] (NaN draws nothing). Does nothing outside the image.
  void blend(int64_t x, int64_t y, Rgb colour, double alpha);
};

// The built-in font: DejaVu Sans at 11 px (Small) and 16 px (Large), anti-aliased.
enum class TextSize { Small, Large };

// Pixel columns that draw_text takes for `text` (the advance of its characters,
// kerned, widened where a glyph's ink overhangs it): 0 for "".
int64_t text_width(const std::string& text, TextSize size);
// Pixel rows that draw_text covers, from the top of the tallest character to
// the bottom of the lowest descender (Small 12, Large 17).
int64_t text_height(TextSize size);

// One line of text with its top-left corner at (x, y), blended into the image
// in `colour`; every pixel it touches lies in [x, x + text_width) x
// [y, y + text_height). Printable ASCII (32..126) is drawn as is, any other
// byte (a newline, UTF-8) as '?'.
void draw_text(RgbImage& image, int64_t x, int64_t y, const std::string& text, Rgb colour,
               TextSize size = TextSize::Small);

// A filled w x h rectangle with its top-left corner at (x, y); nothing when w or h is below 1.
void fill_rect(RgbImage& image, int64_t x, int64_t y, int64_t w, int64_t h, Rgb colour);
// The 1-pixel border of that rectangle (its outermost rows and columns).
void draw_rect_outline(RgbImage& image, int64_t x, int64_t y, int64_t w, int64_t h, Rgb colour);
// A straight line `width` pixels wide (at least 1) from (x0, y0) to (x1, y1),
// in continuous coordinates (pixel (x, y) covers [x, x+1) x [y, y+1), its
// centre at (x + 0.5, y + 0.5)), anti-aliased: each pixel is blended by how
// far its centre lies inside the line's outline, with round caps, so that
// the segments of a polyline join without gaps. Nothing for a NaN or
// infinite end.
void draw_line(RgbImage& image, double x0, double y0, double x1, double y1, Rgb colour, double width = 1.0);
// A filled disc of `radius` pixels around (x, y), anti-aliased at its rim
// (coordinates as draw_line's). Nothing for a NaN or infinite centre.
void fill_disc(RgbImage& image, double x, double y, double radius, Rgb colour);
// Copies src into dst with src's top-left corner at (x, y).
void paste(RgbImage& dst, const RgbImage& src, int64_t x, int64_t y);

// A short label for a number: three significant digits without trailing
// zeros ("0", "0.5", "-2.5", "12.3", "0.00781"), but whole numbers of 4 or 5
// digits as such ("1234", "99999"), and scientific notation for magnitudes
// below 0.001 or from 100000 on ("1.2e-05", "3.46e+05"); "nan", "inf", "-inf".
// `significant` (1..12) sets the digits instead of three.
std::string compact_number(double value, int significant = 3);

// A vertical colour bar filling [x, x + w) x [y, y + h): a 1-pixel grey outline
// around heat_colour from 1 in the top row inside it to 0 in the bottom row.
// To its right, ticks with their values as compact_number writes them (with
// more digits when 3 would print two neighbours alike): lo at
// the bottom, hi at the top, and 3 evenly spaced values between (1 or none
// where the bar is too short for the numbers to stay text_height(Small) + 2
// rows apart, none when lo == hi). `label` ("attention"; may be "") is written
// above, clear of the top number: the drawing reaches
// text_height(Small) * 3 / 2 + 1 rows above y (19), and at most
// text_height(Small) / 2 rows below the bar. Returns the columns it used from
// x (bar, ticks and numbers, or the label when wider). w or h below 3 (or
// beyond 2^40) draws nothing and returns 0.
int64_t draw_colourbar(RgbImage& image, int64_t x, int64_t y, int64_t w, int64_t h, double lo, double hi,
                       const std::string& label);
// The columns draw_colourbar with these arguments uses from x, without
// drawing: for sizing a picture before the bar goes in.
int64_t colourbar_width(int64_t w, int64_t h, double lo, double hi, const std::string& label);

// A legend with its top-left corner at (x, y): one row per entry, a square
// swatch of its colour with a thin grey outline, then its name in black.
// Returns the (width, height) it used; (0, 0) for no entries.
std::pair<int64_t, int64_t> draw_legend(RgbImage& image, int64_t x, int64_t y,
                                        const std::vector<std::pair<std::string, Rgb>>& entries);

// The PNG bytes of the image (encode_png_rgb); `what` names it in a DataError.
std::vector<uint8_t> encode_png(const RgbImage& image, const std::string& what);
// The image as a PNG file, written atomically (write_png_rgb).
void write_png(const std::string& path, const RgbImage& image);

}  // namespace qkv::picture
