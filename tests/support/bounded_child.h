#pragma once
// Runs a reader in a forked child under an address-space limit, so that a
// test can show both that a hostile file is refused by name and that the
// refusal comes before the allocation the file asks for. The limit is the
// child's virtual size at fork plus a budget: LibTorch and jemalloc reserve
// gigabytes of address space up front, so an absolute limit would measure
// them, not the reader.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <new>
#include <string>

#include "qkv/core/errors.h"

namespace qkv::testing {

// A size line of /proc/self/status in bytes ("VmSize:", the virtual size;
// "VmHWM:", the peak resident set), 0 if unknown.
inline int64_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == field) {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

inline int64_t virtual_size_bytes() { return proc_status_bytes("VmSize:"); }

// What f did in a child allowed `budget` bytes of address space beyond its
// size at fork and `seconds` of wall time: "DataError: MESSAGE", "ok",
// "bad_alloc", "exception: WHAT" or "signal N" (SIGALRM for a hang).
inline std::string outcome_in_child(int64_t budget, const std::function<void()>& f, unsigned seconds = 120) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const rlim_t limit = static_cast<rlim_t>(virtual_size_bytes() + budget);
    const rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_AS, &rl);
    ::alarm(seconds);
    std::string result;
    try {
      f();
      result = "ok";
    } catch (const DataError& e) {
      result = std::string("DataError: ") + e.what();
    } catch (const std::bad_alloc&) {
      result = "bad_alloc";
    } catch (const std::exception& e) {
      result = std::string("exception: ") + e.what();
    }
    const ssize_t unused = ::write(fds[1], result.data(), result.size());
    (void)unused;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return out;
}

// f is refused with a DataError naming `file` and saying `what`, within `budget` bytes.
inline void expect_bounded_data_error(int64_t budget, const std::function<void()>& f, const std::string& file,
                                      const std::string& what) {
  const std::string r = outcome_in_child(budget, f);
  EXPECT_EQ(r.rfind("DataError: ", 0), 0u) << r;
  EXPECT_NE(r.find(file), std::string::npos) << "expected '" << file << "' in: " << r;
  EXPECT_NE(r.find(what), std::string::npos) << "expected '" << what << "' in: " << r;
}

constexpr int64_t kMiB = int64_t{1} << 20;

}  // namespace qkv::testing
