#pragma once
// CRC-32 (zlib's, the PNG / gzip polynomial) of checkpoint payloads and of
// the files qkv's ledgers record.
#include <cstddef>
#include <cstdint>

namespace qkv {

// `previous`: the CRC of the bytes before these, to checksum a file in pieces.
uint32_t crc32(const void* data, size_t size, uint32_t previous = 0);

}  // namespace qkv
