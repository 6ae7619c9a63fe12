#include "qkv/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/output_policy.h"

namespace qkv {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  namespace fs = std::filesystem;
  check_and_record_write(path, data, size);  // refuses to replace a file qkv did not write in a claimed folder
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  // Until the rename, a signal that ends the process removes the temporary
  // too; every failure below removes it before throwing.
  int slot = -1;
  int fd = make_partial_file(tmp, &slot);
  if (fd < 0) throw DataError(path + ": cannot create a temporary file in " + dir.string() + ": " + errno_text());
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    forget_partial_file(slot);
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
  // The temporary is created 0600; results are meant to be shared like any other file.
  ::fchmod(fd, 0644);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("close failed");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename failed");
  forget_partial_file(slot);
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

bool is_atomic_temp_name(const std::string& name) {
  // ".NAME.tmp.XXXXXX": NAME not empty, then six letters or digits (make_partial_file).
  constexpr size_t kSuffix = 11;  // ".tmp.XXXXXX"
  if (name.size() < 1 + 1 + kSuffix || name[0] != '.') return false;
  const size_t at = name.size() - kSuffix;
  if (name.compare(at, 5, ".tmp.") != 0) return false;
  for (size_t i = at + 5; i < name.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

std::string atomic_temp_target(const std::string& name) {
  return is_atomic_temp_name(name) ? name.substr(1, name.size() - 1 - 11) : std::string();  // 11: ".tmp.XXXXXX"
}

std::vector<std::string> remove_stale_temp_files(const std::string& dir, const std::set<std::string>& targets) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  // A folder that is a link is someone else's: its temporaries are not ours.
  if (fs::is_symlink(fs::symlink_status(dir, ec))) return removed;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // symlink_status: a link named like a temporary is not one of ours.
    const std::string name = it->path().filename().string();
    if (!fs::is_regular_file(it->symlink_status()) || !targets.count(atomic_temp_target(name))) continue;
    std::error_code gone;
    if (fs::remove(it->path(), gone)) removed.push_back(it->path().string());
  }
  return removed;
}

std::vector<char> read_file_bytes(const std::string& path) {
  const std::string bytes = read_regular_file(path);
  return std::vector<char>(bytes.begin(), bytes.end());
}

void make_directories(const std::string& path) {
  replace_earlier_output_below(path);  // a folder made for a run's files: its earlier files go first
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw DataError(path + ": cannot create folder: " + ec.message());
}

}  // namespace qkv
