#pragma once
// The CLI is a thin layer: each subcommand file parses options into library
// structs and calls the library. A subcommand registers itself on the app and
// stores what to run in `action`; main() runs it after parsing.
#include <functional>

namespace CLI {
class App;
}

namespace qkv::cli {

using Action = std::function<int()>;

void register_params(CLI::App& app, Action& action);
void register_export_weights(CLI::App& app, Action& action);
void register_spirals(CLI::App& app, Action& action);
void register_lm(CLI::App& app, Action& action);
void register_data(CLI::App& app, Action& action);
void register_vnt(CLI::App& app, Action& action);
void register_seg(CLI::App& app, Action& action);
void register_launch(CLI::App& app, Action& action);
void register_mhca(CLI::App& app, Action& action);
void register_doctor(CLI::App& app, Action& action);

}  // namespace qkv::cli
