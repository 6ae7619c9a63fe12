// qkv: one binary, one subcommand per job (command_line.cpp).
#include "qkv/cli/command_line.h"

int main(int argc, char** argv) { return qkv::cli::run_command_line(argc, argv); }
