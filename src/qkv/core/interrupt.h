#pragma once
// Ctrl-C during training: the first SIGINT only raises a flag, so the trainer
// can finish its step and write a checkpoint; a second one kills as usual.
//
// Signals that end the process (the second SIGINT, SIGTERM, SIGHUP) first
// remove the half-written files registered below: an atomic write's temporary
// would otherwise stay behind as a hidden .NAME.tmp.XXXXXX file.
#include <memory>
#include <stdexcept>
#include <string>

struct sigaction;

namespace qkv {

void install_interrupt_handler();
bool interrupt_requested();
void clear_interrupt();

// install_interrupt_handler() for a while, for a host that has a SIGINT
// handler of its own (the Python module around a long call): clears the
// flag, routes SIGINT to it, and on destruction puts back the handler it
// found. Signals are the main thread's business: construct it there.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  std::unique_ptr<struct sigaction> saved_;
  bool was_soft_;
};

// Interrupted when a SIGINT has been requested: the poll of loops over files.
void stop_if_interrupted(const std::string& what);

// The conventional exit status of a process stopped by SIGINT.
constexpr int kExitInterrupted = 130;

// Thrown where work stops at a SIGINT and cannot end as a result; the CLI
// prints its message and exits with kExitInterrupted. The message says what
// was kept.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Creates a new file as mkstemp does (`pattern` ends in XXXXXX, which become
// six random letters and digits; mode 0600) and registers it for removal
// should a signal end the process before forget_partial_file(*slot). The name
// is registered before the file exists, so no signal can fall between the
// file's creation and its registration. Returns the open descriptor, or -1
// with errno set. *slot is -1 when all slots are busy or the path is too long
// (the file is then simply not cleaned up on a signal). Thread-safe; the
// removal itself is async-signal-safe (unlink only).
int make_partial_file(std::string& pattern, int* slot);
void forget_partial_file(int slot);

}  // namespace qkv
