#include "qkv/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"

namespace qkv {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  namespace fs = std::filesystem;
  check_and_record_write(path);  // refuses to replace a file qkv did not write in a claimed folder
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw DataError(path + ": cannot create a temporary file in " + dir.string() + ": " + errno_text());
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw DataError(path + ": " + what + ": " + reason);
  };
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync failed");
  // mkstemp creates 0600; results are meant to be shared like any other file.
  ::fchmod(fd, 0644);
  if (::close(fd) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    throw DataError(path + ": close failed: " + reason);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    throw DataError(path + ": rename failed: " + reason);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  write_file_atomic(path, contents.data(), contents.size());
}

void write_file_atomic(const std::string& path, const std::vector<char>& contents) {
  write_file_atomic(path, contents.data(), contents.size());
}

std::vector<char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + errno_text());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError(path + ": read failed");
  return bytes;
}

void make_directories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw DataError(path + ": cannot create folder: " + ec.message());
}

}  // namespace qkv
