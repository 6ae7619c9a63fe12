#include "qkv/core/interrupt.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <random>

namespace qkv {
namespace {

std::atomic<bool> g_interrupted{false};
// Whether the first SIGINT only asks to stop (install_interrupt_handler).
std::atomic<bool> g_soft_sigint{false};

// Fixed storage: the handler may only read plain memory and call unlink.
constexpr int kSlots = 16;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<int> g_slot_state[kSlots];  // 0 free, 1 being filled or emptied, 2 holds a path

void remove_partial_files() {
  for (int i = 0; i < kSlots; ++i)
    if (g_slot_state[i].load() == 2) ::unlink(g_paths[i]);
}

void on_signal(int sig) {
  if (sig == SIGINT && g_soft_sigint.load() && !g_interrupted.exchange(true)) return;
  remove_partial_files();
  // Die of the signal itself, so the parent sees how the process ended.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Takes over a signal only where it would kill anyway (SIG_DFL): an ignored
// SIGHUP (nohup) or a caller's own handler stays as it is.
void take_over_if_default(int sig) {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
  struct sigaction mine {};
  mine.sa_handler = on_signal;
  sigemptyset(&mine.sa_mask);
  sigaction(sig, &mine, nullptr);
}

void install_cleanup_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGTERM, SIGHUP, SIGINT}) take_over_if_default(sig);
  });
}

}  // namespace

void install_interrupt_handler() {
  g_soft_sigint.store(true);
  struct sigaction mine {};
  mine.sa_handler = on_signal;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGINT, &mine, nullptr);
  install_cleanup_handlers();
}

bool interrupt_requested() { return g_interrupted.load(); }
void clear_interrupt() { g_interrupted.store(false); }

void stop_if_interrupted(const std::string& what) {
  if (interrupt_requested()) throw Interrupted("interrupted (Ctrl-C) while " + what);
}

InterruptScope::InterruptScope() : saved_(std::make_unique<struct sigaction>()), was_soft_(g_soft_sigint.load()) {
  clear_interrupt();
  sigaction(SIGINT, nullptr, saved_.get());
  install_interrupt_handler();
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, saved_.get(), nullptr);
  g_soft_sigint.store(was_soft_);
}

namespace {

// The slot now holding `path` for removal on a signal, or -1 when all are busy
// or the path is too long.
int remember_partial_file(const std::string& path) {
  if (path.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slot_state[i].compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_slot_state[i].store(2);
    return i;
  }
  return -1;
}

}  // namespace

int make_partial_file(std::string& pattern, int* slot) {
  install_cleanup_handlers();
  static const char kLetters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 name_random(std::random_device{}());
  *slot = -1;
  if (pattern.size() < 6 || pattern.compare(pattern.size() - 6, 6, "XXXXXX") != 0) {
    errno = EINVAL;
    return -1;
  }
  const size_t x = pattern.size() - 6;
  for (int attempt = 0; attempt < 100; ++attempt) {
    for (size_t i = x; i < pattern.size(); ++i) pattern[i] = kLetters[name_random() % (sizeof kLetters - 1)];
    // Registered first: a signal from here on unlinks the name, whether or not
    // the file exists yet. Created first, a signal between the creation and
    // the registration would leave the file behind.
    *slot = remember_partial_file(pattern);
    const int fd = ::open(pattern.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    const int error = errno;
    forget_partial_file(*slot);
    *slot = -1;
    errno = error;
    if (error != EEXIST) return -1;
  }
  return -1;
}

void forget_partial_file(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_slot_state[slot].store(1);
  g_paths[slot][0] = '\0';
  g_slot_state[slot].store(0);
}

}  // namespace qkv
