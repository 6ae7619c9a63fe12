// qkv: one binary, one subcommand per job (command_line.cpp).
#include "qkv/cli/command_line.h"

int main(int argc, char** argv) { qkv::cli::end_process(qkv::cli::run_command_line(argc, argv)); }
