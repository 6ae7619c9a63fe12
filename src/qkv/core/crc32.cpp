#include "qkv/core/crc32.h"

#include <zlib.h>

namespace qkv {

uint32_t crc32(const void* data, size_t size, uint32_t previous) {
  // zlib's, with a size_t length (crc32_z), so payloads over 4 GiB are covered whole.
  return static_cast<uint32_t>(::crc32_z(previous, static_cast<const Bytef*>(data), size));
}

}  // namespace qkv
