#include "qkv/core/file_input.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace qkv {

int64_t regular_file_size(const std::string& path) {
  // stat, not open: opening a FIFO for reading blocks until a writer appears.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw DataError(path + ": no such file");
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw DataError(path + ": is a folder, not a file");
  if (!S_ISREG(st.st_mode)) throw DataError(path + ": is not a regular file (FIFO, device or socket)");
  return static_cast<int64_t>(st.st_size);
}

}  // namespace qkv
