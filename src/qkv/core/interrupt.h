#pragma once
// Ctrl-C during training: the first SIGINT only raises a flag, so the trainer
// can finish its step and write a checkpoint; a second one kills as usual.
namespace qkv {

void install_interrupt_handler();
bool interrupt_requested();
void clear_interrupt();

// The conventional exit status of a process stopped by SIGINT.
constexpr int kExitInterrupted = 130;

}  // namespace qkv
