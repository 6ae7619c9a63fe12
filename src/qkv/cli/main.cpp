// qkv: one binary, one subcommand per job. Exit status: 0 success, 1 data or
// runtime error, 2 usage error, 130 interrupted (Ctrl-C, checkpoint written).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/runtime.h"

namespace {

std::string first_line(std::string text) {
  const auto nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkv " + qkv::qkv_version() +
               ": attention models in C++ (VNT-Net, MHCA, the transformer core) on LibTorch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qkv " + qkv::qkv_version());
  app.footer("Exit status: 0 ok, 1 data or runtime error, 2 usage error, 130 interrupted.\n"
             "Run 'qkv <command> --help' for a command's options and their defaults.");
  qkv::cli::Action action;
  qkv::cli::register_params(app, action);
  qkv::cli::register_export_weights(app, action);
  qkv::cli::register_spirals(app, action);
  qkv::cli::register_lm(app, action);
  qkv::cli::register_data(app, action);
  qkv::cli::register_vnt(app, action);
  qkv::cli::register_seg(app, action);
  qkv::cli::register_launch(app, action);
  qkv::cli::register_mhca(app, action);

  // CLI11 would only say "a subcommand is required" for a mistyped command.
  std::string known;
  bool is_command = false;
  for (const auto* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    is_command = is_command || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !is_command) {
    std::fprintf(stderr, "qkv: unknown command '%s' (known: %s)\n", argv[1], known.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Name the (sub)command that was being parsed and, when its own command
    // word is missing or mistyped, the words it knows.
    std::string path = "qkv";
    const CLI::App* at = &app;
    while (!at->get_subcommands().empty()) {
      at = at->get_subcommands().front();
      path += " " + at->get_name();
    }
    std::string message = first_line(e.what());
    if (at->get_require_subcommand_min() > 0 && at->get_subcommands().empty()) {
      std::string words;
      for (const auto* sub : at->get_subcommands({})) words += (words.empty() ? "" : ", ") + sub->get_name();
      message = "missing or unknown command (known: " + words + ")";
    }
    std::fprintf(stderr, "%s: %s (see %s --help)\n", path.c_str(), message.c_str(), path.c_str());
    return 2;
  }
  const CLI::App* command = &app;  // the (sub)command that runs
  std::string command_path = "qkv";
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
    command_path += " " + command->get_name();
  }
  try {
    return action ? action() : 2;
  } catch (const qkv::ConfigError& e) {
    // The library names the setting's key; say it as the option that set it.
    const std::string flag = qkv::cli::flag_of_key(command, e.key);
    std::fprintf(stderr, "qkv: %s\n", first_line((flag.empty() ? e.key : flag) + " " + e.problem).c_str());
    return 2;
  } catch (const qkv::UsageError& e) {
    std::fprintf(stderr, "qkv: %s\n", first_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    // Readers turn this into a DataError naming their file; what is left is
    // an allocation sized by the options (model or batch sizes).
    std::fprintf(stderr, "qkv: error: %s: out of memory (smaller sizes in the options, e.g. --batch-size, may fit)\n",
                 command_path.c_str());
    return 1;
  } catch (const c10::Error& e) {
    const std::string message = first_line(e.what_without_backtrace());
    const auto at = message.find("you tried to allocate ");
    if (at != std::string::npos) {  // LibTorch's out-of-memory, worded for its own developers
      std::fprintf(stderr, "qkv: error: %s: out of memory (LibTorch could not allocate %s)\n", command_path.c_str(),
                   message.substr(at + 22).c_str());
      return 1;
    }
    std::fprintf(stderr, "qkv: error: %s\n", message.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkv: error: %s\n", first_line(e.what()).c_str());
    return 1;
  }
}
