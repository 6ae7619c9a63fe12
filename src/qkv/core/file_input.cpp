#include "qkv/core/file_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace qkv {
namespace {

// The refusal of a path whose stat is `st`, or "" for a regular file.
std::string not_regular(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "is a folder, not a file";
  if (!S_ISREG(st.st_mode)) return "is not a regular file (FIFO, device or socket)";
  return "";
}

}  // namespace

int64_t regular_file_size(const std::string& path) {
  // stat, not open: opening a FIFO for reading blocks until a writer appears.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw DataError(path + ": no such file");
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  if (const std::string why = not_regular(st); !why.empty()) throw DataError(path + ": " + why);
  return static_cast<int64_t>(st.st_size);
}

std::string read_regular_file(const std::string& path) {
  regular_file_size(path);
  // O_NONBLOCK: should the path have become a FIFO since the stat, open does
  // not wait for a writer (fstat below refuses it).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw DataError(path + ": no such file");
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw DataError(path + ": cannot open: " + std::strerror(errno));
  if (const std::string why = not_regular(st); !why.empty()) throw DataError(path + ": " + why);
  const auto size = static_cast<size_t>(st.st_size);
  std::string bytes;
  guard_memory(path, "the file", [&] { bytes.resize(size); });
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, &bytes[done], size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DataError(path + ": read failed: " + std::strerror(errno));
    if (n == 0) throw DataError(path + ": changed while read (shorter than when it was opened)");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

std::string read_proc_file(const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "";
  std::string content;
  char buffer[4096];
  while (content.size() < limit) {
    const ssize_t got = ::read(fd, buffer, std::min(sizeof buffer, limit - content.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      content.clear();
      break;
    }
    if (got == 0) break;
    content.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return content;
}

}  // namespace qkv
