#pragma once
// CRC-32 (the zlib / PNG polynomial): checkpoint headers and PNG chunks.
#include <cstddef>
#include <cstdint>

namespace qkv {

uint32_t crc32(const void* data, size_t size);

}  // namespace qkv
