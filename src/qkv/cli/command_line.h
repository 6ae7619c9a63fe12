#pragma once
// What the qkv binary does with its command line, as a function: main() is
// this call alone, so that another program can be qkv too (the tests' process
// that forks a ready qkv for each command, tests/support/qkv_zygote.cpp).

namespace qkv::cli {

// Parses `argv` (argv[0] is the program's path), runs the command and returns
// the exit status: 0 success, 1 data or runtime error, 2 usage error, 130
// interrupted. May re-execute /proc/self/exe with the same arguments (to
// choose OpenBLAS's kernels), so the program calling it must be qkv too.
int run_command_line(int argc, char** argv);

// Ends the process with `status` as qkv's main() does once the command has
// returned: stdio flushed, then _Exit, without the static destructors and
// atexit handlers (LibTorch unregisters each of its operators: about 0.1 s of CPU
// at every exit). Nothing of qkv's is left to them: a command returns with
// its files written, closed and synced, its claims and groups ended, and
// the kernel drops its locks. Builds with AddressSanitizer run them: its
// leak check is an atexit handler.
[[noreturn]] void end_process(int status);

}  // namespace qkv::cli
