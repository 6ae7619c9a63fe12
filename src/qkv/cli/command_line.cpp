// qkv's command line, parsed and run: one subcommand per job. Exit status: 0
// success, 1 data or runtime error, 2 usage error, 130 interrupted (Ctrl-C,
// checkpoint written).
#include "qkv/cli/command_line.h"

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/core/version.h"
#include "qkv/runtime/cpu.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "qkv/runtime/sanitizers.h"

namespace {

// CLI11 lists unexpected arguments last first ("... not expected: cos
// --lr-schedule 2 --epoch"); say them in the order they were typed.
std::string unexpected_arguments(const std::string& message, int argc, char** argv) {
  const auto colon = message.find(": ");
  if (colon == std::string::npos) return message;
  std::multiset<std::string> listed;
  std::istringstream words(message.substr(colon + 2));
  for (std::string w; words >> w;) listed.insert(w);
  std::string typed;
  for (int i = 1; i < argc; ++i) {
    const auto it = listed.find(argv[i]);
    if (it == listed.end()) continue;
    typed += (typed.empty() ? "" : " ") + *it;
    listed.erase(it);
  }
  return listed.empty() ? "not expected: " + typed : message;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// The (sub)command the command line chose, and its words ("qkv vnt train").
const CLI::App* chosen_command(const CLI::App& app, std::string* path) {
  const CLI::App* at = &app;
  for (*path = "qkv"; !at->get_subcommands().empty(); *path += " " + at->get_name()) at = at->get_subcommands().front();
  return at;
}

// The --options on the command line (up to a lone "--", without "=value")
// that `command` does not know.
std::vector<std::string> unknown_options(const CLI::App& command, int argc, char** argv) {
  std::vector<std::string> unknown;
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    const std::string word = std::string(argv[i]).substr(0, std::string(argv[i]).find('='));
    if (word.rfind("--", 0) == 0 && word.size() > 2 && !command.get_option_no_throw(word)) unknown.push_back(word);
  }
  return unknown;
}

// " (did you mean --epochs for --epoch?)" for each unknown option one typo
// from one `command` knows.
std::string option_suggestions(const CLI::App& command, const std::vector<std::string>& unknown) {
  std::vector<std::string> known;
  for (const auto* option : command.get_options())
    for (const auto& name : option->get_lnames()) known.push_back("--" + name);
  std::string out;
  for (const auto& word : unknown)
    if (const std::string guess = qkv::closest_word(word, known); !guess.empty())
      out += (out.empty() ? "did you mean " : ", ") + guess + " for " + word;
  return out.empty() ? "" : "; " + out + "?";
}

// CLI11's "--shape: At least 3 required but received 1" for an option of
// several comma-separated values says what to type instead.
std::string list_option_message(const CLI::App& command, const std::string& message, int argc, char** argv) {
  if (message.rfind("--", 0) != 0 || message.find("required but received") == std::string::npos) return message;
  const std::string name = message.substr(0, message.find(':'));
  const auto* option = command.get_option_no_throw(name);
  if (!option || option->get_items_expected_min() < 2) return message;
  std::string given;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == name && i + 1 < argc) given = argv[i + 1];
    if (word.rfind(name + "=", 0) == 0) given = word.substr(name.size() + 1);
  }
  return name + ": expected " + std::to_string(option->get_items_expected_min()) + " values separated by commas" +
         (given.empty() ? "" : ", got '" + given + "'");
}

}  // namespace

int qkv::cli::run_command_line(int argc, char** argv) {
  if (const std::string cap = qkv::unknown_cpu_capability(); !cap.empty()) {
    std::fprintf(stderr, "qkv: error: QKV_CPU_CAPABILITY=%s: expected default, avx2 or avx512\n", cap.c_str());
    return 2;
  }
  qkv::blas::choose_openblas_core(argv);  // may re-execute qkv with OPENBLAS_CORETYPE set
  CLI::App app{"qkv " + qkv::qkv_version() +
               ": attention models in C++ (VNT-Net, MHCA, the transformer core) on LibTorch"};
  app.name("qkv");  // usage lines say "qkv", not the path it was started by
  app.require_subcommand(1);
  app.set_version_flag("--version", "qkv " + qkv::qkv_version());
  app.footer(
      "Exit status: 0 ok, 1 data or runtime error, 2 usage error, 130 interrupted.\n"
      "Run 'qkv <command> --help' for a command's options and their defaults.");
  qkv::cli::Action action;
  // --help lists commands in this order: the three works (the flagship
  // first), then the demo, data and tools.
  qkv::cli::register_vnt(app, action);
  qkv::cli::register_seg(app, action);
  qkv::cli::register_mhca(app, action);
  qkv::cli::register_lm(app, action);
  qkv::cli::register_spirals(app, action);
  qkv::cli::register_data(app, action);
  qkv::cli::register_launch(app, action);
  qkv::cli::register_params(app, action);
  qkv::cli::register_export_weights(app, action);
  qkv::cli::register_doctor(app, action);

  // CLI11 would only say "a subcommand is required" for a mistyped command.
  const auto commands = subcommand_names(app);
  if (argc > 1 && argv[1][0] != '-' && std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
    const std::string guess = qkv::closest_word(argv[1], commands);
    std::fprintf(stderr, "qkv: error: unknown command '%s'%s (known: %s)\n", argv[1],
                 guess.empty() ? "" : ("; did you mean '" + guess + "'?").c_str(), qkv::join(commands).c_str());
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
    std::string path;
    const CLI::App* at = chosen_command(app, &path);
    std::string message = qkv::first_line(e.what());
    // CLI11 names a hidden option (an old spelling) with "": its error starts
    // with ": ", and the validator has put the option's name after it.
    if (message.rfind(": ", 0) == 0) message.erase(0, 2);
    if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
      message = unexpected_arguments(message, argc, argv);
      // launch's own options end where the command it runs begins: at --.
      if (path == "qkv launch")
        message = "the command to run goes after --, e.g. qkv launch -n 2 -- vnt train --epochs 10 (" + message + ")";
    }
    const auto unknown = unknown_options(*at, argc, argv);
    // CLI11 reports a missing required option first, which hides the
    // mistyped one that was meant to give it.
    if (dynamic_cast<const CLI::RequiredError*>(&e) && !unknown.empty())
      message = "unknown option " + qkv::join(unknown, " ") + " (and " + message + ")";
    message = list_option_message(*at, message, argc, argv) + option_suggestions(*at, unknown);
    if (at->get_require_subcommand_min() > 0 && at->get_subcommands().empty()) {
      const auto names = subcommand_names(*at);
      // The word after the command path, if any, is the mistyped command.
      std::string word;
      for (int i = 1, depth = 0; i < argc && word.empty(); ++i) {
        if (argv[i][0] == '-') continue;
        if (++depth > static_cast<int>(std::count(path.begin(), path.end(), ' '))) word = argv[i];
      }
      const std::string guess = word.empty() ? "" : qkv::closest_word(word, names);
      message = (word.empty() ? "missing command" : "unknown command '" + word + "'") +
                (guess.empty() ? "" : "; did you mean '" + guess + "'?") + " (known: " + qkv::join(names) + ")";
    }
    std::fprintf(stderr, "%s: error: %s (see %s --help)\n", path.c_str(), message.c_str(), path.c_str());
    return 2;
  }
  std::string command_path;
  const CLI::App* command = chosen_command(app, &command_path);
  // The library names settings by key; this command names them by flag.
  qkv::set_setting_namer([command](const std::string& key) {
    const std::string flag = qkv::cli::flag_of_key(command, key);
    return flag.empty() ? "{" + key + "}" : flag;
  });
  // Every failure is one line "qkv <command>: error: <what>".
  // A setting the library mentions as "{key}" is named by its flag.
  auto fail = [&](int status, const std::string& what) {
    const std::string line = qkv::with_setting_names(qkv::first_line(what));
    std::fprintf(stderr, "%s: error: %s\n", command_path.c_str(), line.c_str());
    return status;
  };
  try {
    return action ? action() : 2;
  } catch (const qkv::ConfigError& e) {
    // The library names the setting's key; say it as the option that set it.
    return fail(2, qkv::cli::config_error_text(command, e));
  } catch (const qkv::UsageError& e) {
    return fail(2, e.what());
  } catch (const qkv::Interrupted& e) {
    return fail(qkv::kExitInterrupted, e.what());
  } catch (const std::bad_alloc&) {
    // Readers turn this into a DataError naming their file; what is left is
    // an allocation sized by the options (model or batch sizes).
    return fail(1, "out of memory (smaller sizes in the options, e.g. --batch-size, may fit)");
  } catch (const c10::Error& e) {
    if (const auto oom =
            qkv::out_of_memory_line(e.what_without_backtrace(), "", "smaller sizes in the options may fit");
        !oom.empty())
      return fail(1, oom);
    return fail(1, qkv::first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
}

void qkv::cli::end_process(int status) {
  std::fflush(nullptr);
  if (qkv::kAddressSanitizer) std::exit(status);
  std::_Exit(status);
}
