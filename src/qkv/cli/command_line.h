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

}  // namespace qkv::cli
