#include "qkv/core/zip_entries.h"

#include <algorithm>
#include <cstring>

#include "qkv/core/checked.h"
#include "qkv/core/errors.h"

namespace qkv {
namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50, kZip64Locator = 0x07064b50,
                   kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;
constexpr uint64_t kMaxDeflateRatio = 1032;

// Little-endian reads inside [0, size): a read past the end is a DataError.
class Bytes {
 public:
  Bytes(const char* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}
  template <typename T>
  T get(uint64_t at) const {
    uint64_t end = 0;
    if (!checked_add(at, uint64_t{sizeof(T)}, end) || end > size_)
      fail("truncated zip structure at byte " + std::to_string(at));
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(data_[at + i])) << (8 * i);
    return v;
  }
  std::string text(uint64_t at, uint64_t n) const {
    uint64_t end = 0;
    if (!checked_add(at, n, end) || end > size_) fail("a zip name reaches past the end");
    return std::string(data_ + at, static_cast<size_t>(n));
  }
  [[noreturn]] void fail(const std::string& what) const { throw DataError(path_ + ": " + what); }
  uint64_t size() const { return size_; }

 private:
  const char* data_;
  size_t size_;
  const std::string& path_;
};

}  // namespace

std::vector<ZipEntry> check_zip_entries(const char* data, size_t size, const std::string& path) {
  const Bytes b(data, size, path);
  // The end record is the last 22 bytes plus a comment of up to 65,535.
  if (size < 22) b.fail("not a zip archive (too short for its end record)");
  int64_t end = -1;
  const uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (uint64_t at = size - 22 + 1; at-- > lowest;)
    if (b.get<uint32_t>(at) == kEndOfDirectory) {
      end = static_cast<int64_t>(at);
      break;
    }
  if (end < 0) b.fail("not a zip archive (no end-of-central-directory record)");
  const auto e = static_cast<uint64_t>(end);
  uint64_t entries = b.get<uint16_t>(e + 10), directory_size = b.get<uint32_t>(e + 12),
           directory = b.get<uint32_t>(e + 16);
  // ZIP64: a locator just before the end record points at the 64-bit end record.
  if (e >= 20 && b.get<uint32_t>(e - 20) == kZip64Locator) {
    const uint64_t at = b.get<uint64_t>(e - 20 + 8);
    if (b.get<uint32_t>(at) != kZip64End) b.fail("zip64 locator points at no zip64 end record");
    entries = b.get<uint64_t>(at + 32);
    directory_size = b.get<uint64_t>(at + 40);
    directory = b.get<uint64_t>(at + 48);
  }
  uint64_t directory_end = 0;
  if (!checked_add(directory, directory_size, directory_end) || directory_end > e)
    b.fail("the zip central directory reaches past its end record");
  // Each directory entry takes at least 46 bytes: the count cannot exceed what fits.
  if (entries > directory_size / 46)
    b.fail("the zip end record declares " + std::to_string(entries) + " entries, more than its directory holds");
  std::vector<ZipEntry> out;
  out.reserve(static_cast<size_t>(entries));
  uint64_t at = directory;
  for (uint64_t i = 0; i < entries; ++i) {
    if (b.get<uint32_t>(at) != kDirectoryEntry)
      b.fail("damaged zip central directory (entry " + std::to_string(i) + ")");
    ZipEntry z;
    z.method = b.get<uint16_t>(at + 10);
    z.compressed = b.get<uint32_t>(at + 20);
    z.uncompressed = b.get<uint32_t>(at + 24);
    const uint64_t name_len = b.get<uint16_t>(at + 28), extra_len = b.get<uint16_t>(at + 30),
                   comment_len = b.get<uint16_t>(at + 32);
    z.local_header = b.get<uint32_t>(at + 42);
    z.name = b.text(at + 46, name_len);
    // ZIP64 extra field (id 1): the 64-bit values of the fields saturated at 2^32 - 1, in this order.
    for (uint64_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const uint16_t id = b.get<uint16_t>(x), len = b.get<uint16_t>(x + 2);
      if (id == 1) {
        uint64_t v = x + 4;
        if (z.uncompressed == 0xffffffffu) z.uncompressed = b.get<uint64_t>(v), v += 8;
        if (z.compressed == 0xffffffffu) z.compressed = b.get<uint64_t>(v), v += 8;
        if (z.local_header == 0xffffffffu) z.local_header = b.get<uint64_t>(v);
      }
      x += 4 + static_cast<uint64_t>(len);
    }
    const std::string what = "zip entry '" + z.name + "' ";
    if (z.method != 0 && z.method != 8) b.fail(what + "uses compression method " + std::to_string(z.method));
    if (z.method == 0 && z.compressed != z.uncompressed)
      b.fail(what + "is stored but declares " + std::to_string(z.uncompressed) + " bytes in " +
             std::to_string(z.compressed));
    uint64_t bound = 0;
    if (z.method == 8 && (!checked_mul(z.compressed, kMaxDeflateRatio, bound) || z.uncompressed > bound))
      b.fail(what + "declares " + std::to_string(z.uncompressed) + " bytes from " + std::to_string(z.compressed) +
             " compressed, more than deflate can expand");
    // The local header (30 bytes, its own name and extra) and the data must lie before the directory.
    if (b.get<uint32_t>(z.local_header) != kLocalHeader) b.fail(what + "has no local header where the directory says");
    uint64_t data_end = 0;
    const uint64_t local_fixed =
        z.local_header + 30 + b.get<uint16_t>(z.local_header + 26) + b.get<uint16_t>(z.local_header + 28);
    if (!checked_add(local_fixed, z.compressed, data_end) || data_end > directory)
      b.fail(what + "declares " + std::to_string(z.compressed) +
             " bytes, more than the archive holds before its directory");
    out.push_back(std::move(z));
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace qkv
