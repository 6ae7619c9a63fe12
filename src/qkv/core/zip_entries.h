#pragma once
// The entries of a zip archive in memory (the container of torch.save files
// and of qkv checkpoints' payload), read from its central directory with every
// size and offset checked against the archive's length before LibTorch's
// reader trusts them: its getRecord allocates whatever size an entry declares.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint64_t compressed = 0, uncompressed = 0;
  uint64_t local_header = 0;  // offset of the entry's local header
};

// DataError naming `path` when the archive has no end-of-central-directory
// record, when the directory or an entry (its local header, name and data)
// reaches past the end, when a stored entry's two sizes differ, a deflated one
// would expand beyond deflate's 1032:1, or the method is neither.
std::vector<ZipEntry> check_zip_entries(const char* data, size_t size, const std::string& path);

}  // namespace qkv
