#pragma once
// 8-bit RGB PNG files through libpng, in memory and on disk. The pictures
// themselves are drawn with picture/raster.h.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::picture {

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

}  // namespace qkv::picture
