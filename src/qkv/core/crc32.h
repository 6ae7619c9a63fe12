#pragma once
// CRC-32 (zlib's, the PNG / gzip polynomial) of checkpoint payloads.
#include <cstddef>
#include <cstdint>

namespace qkv {

uint32_t crc32(const void* data, size_t size);

}  // namespace qkv
