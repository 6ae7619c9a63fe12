// qkv launch -n W -- <train command>: W ranks of a data-parallel run on this
// machine, as torchrun does for PyTorch. Each rank is this binary again with
// WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set; with --nodes
// and --node-rank the same command on each machine makes one run of them all.
// The supervisor and its checks of the plan are distributed/launcher.h; this
// file holds the options and which commands may be launched.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/distributed/launcher.h"

namespace qkv::cli {
namespace {

// "vnt train", "lm train", ...: the commands whose ranks split the batches
// among them (those with the data-parallel options); anything else would just
// run W times.
std::vector<std::string> launchable_commands(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* group : app.get_subcommands([](const CLI::App*) { return true; })) {
    for (const auto* sub : group->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == "train" && sub->get_option_no_throw("--world-size"))
        names.push_back(group->get_name() + " train");
  }
  return names;
}

void check_launchable(const CLI::App& app, const std::vector<std::string>& command) {
  const auto names = launchable_commands(app);
  const std::string given =
      command.size() >= 2 && command[1].rfind('-', 0) != 0 ? command[0] + " " + command[1] : command[0];
  if (std::find(names.begin(), names.end(), given) != names.end()) return;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw UsageError("'" + given + "' is not data-parallel training; launch runs only " + list);
}

}  // namespace

void register_launch(CLI::App& app, Action& action) {
  add_settings_command<distributed::LocalRanks>(
      &app, action,
      CommandText("launch",
                  "run a train command as W data-parallel processes on this machine: qkv launch -n 2 -- vnt train ...")
          .heading("Processes")
          .keeps_process_settings(),
      [&app](const auto& o, const c10::Device&) {
        check_launchable(app, o.settings.command);
        return distributed::run_local_ranks(distributed::checked_launch_plan(o.settings));
      },
      [](CLI::App* cmd, auto& o) {
        cmd->add_option("command", o.settings.command, "the qkv command to run after --, e.g. -- vnt train --epochs 10")
            ->required();
      });
}

}  // namespace qkv::cli
