// What a test's shell command starts in place of qkv while the tests' zygote
// serves (qkv_zygote.cpp): it hands its descriptors, working folder,
// arguments, environment, umask, signal state and limits to the zygote, which
// runs the command in a fork of a loaded qkv; it passes on the signals a test
// or `timeout` sends it, and ends as the command ended (its exit status, or
// the same signal). Where the zygote is not there or cannot run the command
// as a fresh qkv would, it starts qkv itself. It links nothing but libc, so it
// starts in a millisecond.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/zygote_protocol.h"

extern char** environ;

namespace {

using namespace qkv::testing::zygote;

volatile sig_atomic_t command_pid = 0;

void pass_on(int sig) {
  if (command_pid > 0) kill(static_cast<pid_t>(command_pid), sig);
}

// The signals passed on to the command, and the mask the client started
// with (which the command, or qkv started here, is given).
constexpr int kPassedOn[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
sigset_t started_mask;

[[noreturn]] void start_qkv_itself(char** argv) {
  sigprocmask(SIG_SETMASK, &started_mask, nullptr);
  const char* qkv = std::getenv(kBinaryVariable);
  if (!qkv) {
    std::fprintf(stderr, "qkv test client: %s is not set\n", kBinaryVariable);
    _exit(127);
  }
  argv[0] = const_cast<char*>(qkv);
  execv(qkv, argv);
  std::fprintf(stderr, "qkv test client: cannot start %s: %s\n", qkv, std::strerror(errno));
  _exit(127);
}

bool read_reply(int conn, char& kind, int32_t& value) {
  char message[5];
  if (!receive_all(conn, message, sizeof message)) return false;
  kind = message[0];
  std::memcpy(&value, message + 1, sizeof value);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* socket_path = std::getenv(kSocketVariable);
  if (!socket_path) start_qkv_itself(argv);
  std::string cwd(4096, '\0');
  if (!getcwd(cwd.data(), cwd.size())) start_qkv_itself(argv);
  cwd.resize(std::strlen(cwd.c_str()));
  for (int fd = 0; fd < 3; ++fd)
    if (fcntl(fd, F_GETFD) < 0) start_qkv_itself(argv);  // a closed descriptor stays closed in qkv

  Header header;
  std::string strings = cwd + '\0';
  for (int i = 1; i < argc; ++i) strings += std::string(argv[i]) + '\0';
  header.argument_count = static_cast<uint32_t>(argc - 1);
  for (char** e = environ; *e; ++e, ++header.environment_count) strings += std::string(*e) + '\0';
  header.strings_bytes = static_cast<uint32_t>(strings.size());
  const mode_t mask = umask(0);
  umask(mask);
  header.umask = mask;
  sigprocmask(SIG_SETMASK, nullptr, &started_mask);
  for (int sig = 1; sig < 32; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) == 0 && action.sa_handler == SIG_IGN) header.ignored_signals |= 1u << sig;
    if (sigismember(&started_mask, sig) == 1) header.blocked_signals |= 1u << sig;
  }
  // A signal that comes before the command's pid is known waits (blocked),
  // to be passed on once it is, instead of ending the client alone.
  sigset_t passed_on;
  sigemptyset(&passed_on);
  for (int sig : kPassedOn) sigaddset(&passed_on, sig);
  sigprocmask(SIG_BLOCK, &passed_on, nullptr);
  for (int i = 0; i < kLimitCount; ++i) {
    rlimit limit{};
    getrlimit(kLimits[i], &limit);
    header.limits[i][0] = limit.rlim_cur;
    header.limits[i][1] = limit.rlim_max;
  }

  const int conn = connect_to_zygote(socket_path);
  if (conn < 0) start_qkv_itself(argv);

  msghdr message{};
  iovec part{&header, sizeof header};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* fds = CMSG_FIRSTHDR(&message);
  fds->cmsg_level = SOL_SOCKET;
  fds->cmsg_type = SCM_RIGHTS;
  fds->cmsg_len = CMSG_LEN(3 * sizeof(int));
  const int standard[3] = {0, 1, 2};
  std::memcpy(CMSG_DATA(fds), standard, sizeof standard);
  if (sendmsg(conn, &message, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof header)) start_qkv_itself(argv);
  if (!send_all(conn, strings.data(), strings.size())) start_qkv_itself(argv);

  char kind = 0;
  int32_t value = 0;
  if (!read_reply(conn, kind, value) || kind == kStartItYourself) {
    close(conn);
    start_qkv_itself(argv);
  }
  if (kind != kStarted) _exit(125);
  command_pid = value;
  for (int sig : kPassedOn) {
    if ((header.ignored_signals >> sig) & 1) continue;
    struct sigaction action {};
    action.sa_handler = pass_on;
    action.sa_flags = SA_RESTART;
    sigaction(sig, &action, nullptr);
  }
  sigprocmask(SIG_SETMASK, &started_mask, nullptr);
  if (!read_reply(conn, kind, value) || kind != kEnded) {
    std::fprintf(stderr, "qkv test client: the zygote ended before the command did\n");
    _exit(125);
  }
  const int status = value;
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  // Ended by a signal: end by the same one, without a core file of our own.
  const int sig = WTERMSIG(status);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t just_it;
  sigemptyset(&just_it);
  sigaddset(&just_it, sig);
  sigprocmask(SIG_UNBLOCK, &just_it, nullptr);
  raise(sig);
  _exit(128 + sig);
}
