#pragma once
// 8-bit RGB PNG files through libpng (attention heat maps over SPECT slices),
// and the colour map those heat maps use.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

// rgb: height rows of width pixels, 3 bytes each (R, G, B), top row first.
// Encoded in memory, then written with write_file_atomic. DataError naming the
// path when the sizes do not match (width and height must be 1..1000000,
// libpng's limit), when encoding fails, or when the file cannot be written.
void write_png_rgb(const std::string& path, int64_t width, int64_t height, const std::vector<uint8_t>& rgb);

// The PNG file's bytes for the same pixels (what write_png_rgb writes);
// `what` names the picture in a DataError.
std::vector<uint8_t> encode_png_rgb(int64_t width, int64_t height, const std::vector<uint8_t>& rgb,
                                    const std::string& what);

// Any PNG (grey, palette, RGB, with or without alpha, 16-bit, interlaced)
// converted to 8-bit RGB: palette and grey expanded, 16-bit channels reduced to
// 8, alpha dropped (not composited). DataError naming the path for a missing,
// truncated or non-PNG file.
std::vector<uint8_t> read_png_rgb(const std::string& path, int64_t& width, int64_t& height);

// The same for PNG bytes in memory; `what` names them in a DataError.
std::vector<uint8_t> decode_png_rgb(const uint8_t* data, size_t size, int64_t& width, int64_t& height,
                                    const std::string& what);

// Matplotlib's 'inferno' colour map (black, purple, red, orange, pale yellow):
// perceptually uniform, with lightness rising monotonically, so a brighter
// pixel always means more attention, also when printed in grey. Piecewise
// linear through 33 samples of the original 256-entry table (within 2 of 255
// of it). t is clamped to [0, 1]; NaN gives the colour of 0.
std::array<uint8_t, 3> heat_colour(double t);

}  // namespace qkv
