// The tests' zygote: qkv, started once per test executable, that forks a
// copy of itself for each command a test runs instead of starting the binary
// afresh. Starting qkv costs 0.6-0.7 s of loading LibTorch (hundreds of
// shared libraries, bound at load, and its operators registered), which was
// two thirds of the CLI tests' time; a fork of a process that has done
// nothing but load them costs milliseconds and runs the same code on the same
// state. docs/testing.md says what the zygote covers and what it leaves to
// fresh processes.
//
// Run as `qkv --qkv-test-zygote SOCKET` it serves on a Unix socket; any other
// command line is qkv's (re-executing /proc/self/exe, as the OpenBLAS core
// choice and `qkv launch` do, starts qkv). For each connection from
// qkv_zygote_client.c (one command), a handler process reads the client's
// standard descriptors, working folder, arguments, environment, umask, signal
// state and resource limits, forks the command with them and reports its pid
// and then its wait status. A client whose environment differs from the
// zygote's in a variable that libraries read while they load (OpenBLAS,
// OpenMP, the allocator, the loader) is told to start qkv itself: a forked
// copy would keep what its libraries read at load.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "qkv/cli/command_line.h"
#include "support/zygote_protocol.h"

extern char** environ;

namespace {

using namespace qkv::testing::zygote;

bool reply(int conn, char kind, int32_t value) {
  char message[5];
  message[0] = kind;
  std::memcpy(message + 1, &value, sizeof value);
  return send_all(conn, message, sizeof message);
}

// The client's request: its three standard descriptors and what a fresh
// process started from it would inherit.
struct Request {
  int fds[3] = {-1, -1, -1};
  Header header{};
  std::vector<std::string> strings;  // cwd, then the arguments, then the environment
};

bool read_request(int conn, Request& request) {
  msghdr message{};
  iovec part{&request.header, sizeof request.header};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do n = recvmsg(conn, &message, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof request.header) || request.header.magic != kMagic) return false;
  const cmsghdr* fds = CMSG_FIRSTHDR(&message);
  if (!fds || fds->cmsg_type != SCM_RIGHTS || fds->cmsg_len != CMSG_LEN(3 * sizeof(int))) return false;
  std::memcpy(request.fds, CMSG_DATA(fds), 3 * sizeof(int));
  if (request.header.strings_bytes > kMaxStringsBytes) return false;
  std::string strings(request.header.strings_bytes, '\0');
  if (!receive_all(conn, strings.data(), strings.size())) return false;
  for (size_t at = 0; at < strings.size();) {
    const size_t end = strings.find('\0', at);
    if (end == std::string::npos) return false;
    request.strings.push_back(strings.substr(at, end - at));
    at = end + 1;
  }
  return request.strings.size() == 1 + request.header.argument_count + request.header.environment_count;
}

// The NAME=VALUE entries of `environment` that libraries read while they load.
std::vector<std::string> load_time_entries(const std::vector<std::string>& environment) {
  std::vector<std::string> entries;
  for (const auto& entry : environment)
    if (is_load_time_variable(entry)) entries.push_back(entry);
  std::sort(entries.begin(), entries.end());
  return entries;
}

// Runs the request's command in a child of this handler and reports it.
[[noreturn]] void handle(int conn) {
  Request request;
  if (!read_request(conn, request)) _exit(1);
  const auto argument = request.strings.begin() + 1;
  const auto environment = argument + request.header.argument_count;
  std::vector<std::string> ours;
  for (char** e = environ; *e; ++e) ours.emplace_back(*e);
  bool same = load_time_entries(ours) == load_time_entries({environment, request.strings.end()});
  for (int i = 0; same && i < kLimitCount; ++i) {
    const rlimit limit{request.header.limits[i][0], request.header.limits[i][1]};
    same = setrlimit(kLimits[i], &limit) == 0;
  }
  if (!same) {
    reply(conn, kStartItYourself, 0);
    _exit(0);
  }
  signal(SIGCHLD, SIG_DFL);  // the zygote ignores it; a command waits for its children
  const pid_t pid = fork();
  if (pid < 0) _exit(1);
  if (pid == 0) {
    for (int i = 0; i < 3; ++i)
      if (dup2(request.fds[i], i) < 0) _exit(127);
    for (int fd : request.fds)
      if (fd > 2) close(fd);
    close(conn);
    if (chdir(request.strings[0].c_str()) != 0) {
      std::fprintf(stderr, "qkv test zygote: cannot enter %s: %s\n", request.strings[0].c_str(), std::strerror(errno));
      _exit(127);
    }
    umask(static_cast<mode_t>(request.header.umask));
    for (int sig = 1; sig < 32; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP)
        signal(sig, (request.header.ignored_signals >> sig) & 1 ? SIG_IGN : SIG_DFL);
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig = 1; sig < 32; ++sig)
      if ((request.header.blocked_signals >> sig) & 1) sigaddset(&mask, sig);
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    clearenv();
    for (auto e = environment; e != request.strings.end(); ++e) putenv(e->data());
    std::string self(4096, '\0');
    const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
    self.resize(length > 0 ? static_cast<size_t>(length) : 0);
    std::vector<char*> argv{self.data()};
    for (auto a = argument; a != environment; ++a) argv.push_back(a->data());
    argv.push_back(nullptr);
    // As qkv's main() ends.
    qkv::cli::end_process(qkv::cli::run_command_line(static_cast<int>(argv.size()) - 1, argv.data()));
  }
  for (int fd : request.fds) close(fd);
  reply(conn, kStarted, pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) _exit(1);
  reply(conn, kEnded, status);
  _exit(0);
}

int serve(const char* socket_path) {
  // The test executable that started the zygote ends it; should it die
  // first, the zygote ends within a second (a parent-death signal would come
  // when the thread that started it ends, which may be a test's thread).
  const pid_t parent = getppid();
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (listener < 0 || std::strlen(socket_path) >= sizeof address.sun_path) return 1;
  std::strcpy(address.sun_path, socket_path);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 64) != 0) {
    std::fprintf(stderr, "qkv test zygote: cannot serve at %s: %s\n", socket_path, std::strerror(errno));
    return 1;
  }
  signal(SIGCHLD, SIG_IGN);  // handlers are reaped by the kernel
  for (;;) {
    pollfd waiting{listener, POLLIN, 0};
    if (poll(&waiting, 1, 1000) == 0) {
      if (getppid() != parent) return 0;
      continue;
    }
    const int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return 1;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(listener);
      handle(conn);
    }
    close(conn);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], kServeFlag) == 0) return serve(argv[2]);
  qkv::cli::end_process(qkv::cli::run_command_line(argc, argv));
}
