#include "qkv/picture/png.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "qkv/core/atomic_file.h"
#include "qkv/core/checked.h"
#include "qkv/core/errors.h"

// libpng reports errors by longjmp. A C++ exception must never cross its C
// frames, and a longjmp must never skip a C++ destructor, so every function
// that calls setjmp below holds only trivially destructible locals, callbacks
// catch their own exceptions and turn them into png_error, and the messages
// become DataErrors only after libpng has returned.

namespace qkv::picture {
namespace {

constexpr int64_t kMaxSide = 1000000;  // libpng's default user limit on width and height

struct PngErrorSink {
  char message[256];
};

void on_error(png_structp png, png_const_charp msg) {
  auto* sink = static_cast<PngErrorSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof sink->message, "%s", msg ? msg : "libpng error");
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // warnings (e.g. unknown chunks) do not concern the caller

template <class F>
bool no_throw(F&& f) noexcept {
  try {
    f();
    return true;
  } catch (...) {
    return false;
  }
}

struct MemoryWriter {
  std::vector<uint8_t>* bytes;
};

void write_bytes(png_structp png, png_bytep data, png_size_t n) {
  auto* w = static_cast<MemoryWriter*>(png_get_io_ptr(png));
  if (!no_throw([&] { w->bytes->insert(w->bytes->end(), data, data + n); })) png_error(png, "out of memory");
}

void flush_nothing(png_structp) {}

bool encode(PngErrorSink& err, MemoryWriter& writer, png_uint_32 width, png_uint_32 height, png_bytep* rows) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, on_error, on_warning);
  if (!png) {
    std::snprintf(err.message, sizeof err.message, "cannot create the libpng writer");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(err.message, sizeof err.message, "cannot create the libpng info");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, &writer, write_bytes, flush_nothing);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

struct MemoryReader {
  const uint8_t* data;
  size_t size, pos;
};

void read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "file is truncated");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// The pixel and row-pointer buffers belong to the caller; they are sized here,
// once the header is known, through no_throw.
bool decode(PngErrorSink& err, MemoryReader& reader, std::vector<uint8_t>& pixels, std::vector<png_bytep>& rows,
            png_uint_32& width, png_uint_32& height) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, on_error, on_warning);
  if (!png) {
    std::snprintf(err.message, sizeof err.message, "cannot create the libpng reader");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(err.message, sizeof err.message, "cannot create the libpng info");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &reader, read_bytes);
  png_read_info(png, info);
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  width = png_get_image_width(png, info);
  height = png_get_image_height(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  if (row_bytes != static_cast<size_t>(width) * 3) png_error(png, "unexpected pixel layout after conversion to RGB");
  if (!no_throw([&] {
        pixels.resize(row_bytes * height);
        rows.resize(height);
      }))
    png_error(png, "out of memory");
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = pixels.data() + row_bytes * y;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_png_rgb(int64_t width, int64_t height, const std::vector<uint8_t>& rgb,
                                    const std::string& what) {
  if (width < 1 || height < 1 || width > kMaxSide || height > kMaxSide)
    throw DataError(what + ": cannot write a " + std::to_string(width) + "x" + std::to_string(height) +
                    " PNG (each side must be 1.." + std::to_string(kMaxSide) + ")");
  const auto expected = static_cast<uint64_t>(width) * static_cast<uint64_t>(height) * 3;
  if (rgb.size() != expected)
    throw DataError(what + ": " + std::to_string(rgb.size()) + " bytes of pixels for a " + std::to_string(width) + "x" +
                    std::to_string(height) + " RGB image, expected " + std::to_string(expected));
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (size_t y = 0; y < rows.size(); ++y)
    rows[y] = const_cast<png_bytep>(rgb.data() + y * static_cast<size_t>(width) * 3);  // libpng reads, never writes
  std::vector<uint8_t> encoded;
  PngErrorSink err{};
  MemoryWriter writer{&encoded};
  if (!encode(err, writer, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), rows.data()))
    throw DataError(what + ": PNG encoding failed: " + err.message);
  return encoded;
}

void write_png_rgb(const std::string& path, int64_t width, int64_t height, const std::vector<uint8_t>& rgb) {
  const auto encoded = encode_png_rgb(width, height, rgb, path);
  write_file_atomic(path, encoded.data(), encoded.size());
}

std::vector<uint8_t> decode_png_rgb(const uint8_t* data, size_t size, int64_t& width, int64_t& height,
                                    const std::string& what) {
  if (size < 8 || png_sig_cmp(data, 0, 8) != 0) throw DataError(what + ": not a PNG file");
  MemoryReader reader{data, size, 0};
  PngErrorSink err{};
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
  png_uint_32 w = 0, h = 0;
  if (!decode(err, reader, pixels, rows, w, h)) throw DataError(what + ": cannot read PNG: " + err.message);
  width = w;
  height = h;
  return pixels;
}

std::vector<uint8_t> read_png_rgb(const std::string& path, int64_t& width, int64_t& height) {
  const std::vector<char> bytes = read_file_bytes(path);
  return decode_png_rgb(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), width, height, path);
}

}  // namespace qkv::picture
