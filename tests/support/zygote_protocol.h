#pragma once
// What the tests' zygote (qkv_zygote.cpp) and its client
// (qkv_zygote_client.cpp) say to each other over the zygote's Unix socket.
// The client sends a Header, with its descriptors 0, 1 and 2 attached
// (SCM_RIGHTS), then `strings_bytes` bytes of NUL-terminated strings: its
// working folder, its arguments after argv[0], its environment. The zygote
// answers with 5-byte replies (a kind, then an int32): kStarted and the
// command's pid, then kEnded and its wait status; or kStartItYourself alone.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace qkv::testing::zygote {

inline constexpr const char* kServeFlag = "--qkv-test-zygote";
// The client's environment: the zygote's socket, and the qkv binary it starts
// itself when the zygote cannot run the command.
inline constexpr const char* kSocketVariable = "QKV_TEST_ZYGOTE_SOCKET";
inline constexpr const char* kBinaryVariable = "QKV_TEST_ZYGOTE_QKV";

inline constexpr uint32_t kMagic = 0x5a564b51;  // "QKVZ"
inline constexpr uint32_t kMaxStringsBytes = 1u << 24;
inline constexpr char kStarted = 'P';
inline constexpr char kEnded = 'S';
inline constexpr char kStartItYourself = 'E';

// The limits a command inherits, in Header::limits' order.
inline constexpr int kLimits[] = {RLIMIT_AS,     RLIMIT_CORE,  RLIMIT_CPU,   RLIMIT_DATA,   RLIMIT_FSIZE,
                                  RLIMIT_NOFILE, RLIMIT_STACK, RLIMIT_NPROC, RLIMIT_MEMLOCK};
inline constexpr int kLimitCount = sizeof kLimits / sizeof kLimits[0];

struct Header {
  uint32_t magic = kMagic;
  uint32_t strings_bytes = 0;
  uint32_t argument_count = 0;
  uint32_t environment_count = 0;
  uint32_t umask = 0;
  uint32_t ignored_signals = 0;          // bit s: signal s (1-31) is ignored
  uint32_t blocked_signals = 0;          // bit s: signal s (1-31) is blocked
  uint64_t limits[kLimitCount][2] = {};  // soft, hard
};

// Variables that the libraries qkv links read while they are loaded (before
// main), so that a forked zygote keeps the zygote's values: a command whose
// value differs, or who lacks one the zygote has, is started afresh.
inline bool is_load_time_variable(const std::string& entry) {
  for (const char* prefix : {"OPENBLAS_", "GOTO", "OMP_", "GOMP_", "KMP_", "MKL_", "LD_", "MALLOC_", "JE_", "GLOG_",
                             "TORCH_", "PYTORCH_", "CUDA_", "NCCL_", "GLIBC_TUNABLES", "ATEN_"})
    if (entry.compare(0, std::strlen(prefix), prefix) == 0) return true;
  return false;
}

// A connection to the zygote at `socket_path`: its descriptor, or -1.
inline int connect_to_zygote(const char* socket_path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (std::strlen(socket_path) >= sizeof address.sun_path) return -1;
  std::strcpy(address.sun_path, socket_path);
  const int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (conn >= 0 && connect(conn, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return conn;
  if (conn >= 0) close(conn);
  return -1;
}

// Whole messages over the socket, through interruptions and short transfers;
// false when the peer is gone (no SIGPIPE).
inline bool receive_all(int fd, void* data, size_t size) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd, at, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

inline bool send_all(int fd, const void* data, size_t size) {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, at, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace qkv::testing::zygote
