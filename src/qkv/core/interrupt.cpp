#include "qkv/core/interrupt.h"

#include <atomic>
#include <csignal>

namespace qkv {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace

void install_interrupt_handler() { std::signal(SIGINT, on_sigint); }
bool interrupt_requested() { return g_interrupted.load(); }
void clear_interrupt() { g_interrupted.store(false); }

}  // namespace qkv
