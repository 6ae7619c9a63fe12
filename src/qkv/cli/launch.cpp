// qkv launch -n W -- <train command>: W ranks of a data-parallel run on this
// machine, as torchrun does for PyTorch. Each rank is this binary again with
// WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set; with --nodes
// and --node-rank the same command on each machine makes one run of them all.
// The supervisor itself is distributed/launcher.h; this file holds the
// options and the checks of the command to run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/distributed/launcher.h"
#include "qkv/distributed/process_group.h"

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

// The value of `option` in the child's arguments (--opt V or --opt=V), if given.
bool find_option(const std::vector<std::string>& args, const std::string& option, std::string* value) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option) {
      *value = i + 1 < args.size() ? args[i + 1] : "";
      return true;
    }
    if (args[i].rfind(option + "=", 0) == 0) {
      *value = args[i].substr(option.size() + 1);
      return true;
    }
  }
  return false;
}

// The launcher sets WORLD_SIZE, RANK and MASTER_* for each rank, but the same
// options on the command line win over the environment: a --world-size 3
// under -n 2 would wait for a rank that never comes, a --rank would give every
// rank the same one.
void check_child_options(const std::vector<std::string>& args, int64_t world, const std::string& master,
                         bool master_given) {
  std::string v;
  if (find_option(args, "--world-size", &v) && v != std::to_string(world))
    throw UsageError("--world-size " + v + " in the command contradicts -n/--nodes (" + std::to_string(world) +
                     " ranks); drop it, launch sets it");
  if (find_option(args, "--rank", &v))
    throw UsageError("--rank " + v + " in the command: launch gives each rank its own; drop it");
  for (const auto& a : args)
    if (a.rfind("--master", 0) == 0) {
      find_option(args, a.substr(0, a.find('=')), &v);
      if (master_given && a.substr(0, a.find('=')) == "--master" && v == master) continue;
      throw UsageError("" + a.substr(0, a.find('=')) + " " + v +
                       " in the command: give the rendezvous to launch (qkv launch --master ADDR:PORT -- ...)");
    }
}

}  // namespace

void register_launch(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "launch", "run a train command as W data-parallel processes on this machine: qkv launch -n 2 -- vnt train ...");
  auto o = std::make_shared<distributed::LocalRanks>();
  add_ranged_option(cmd, "-n,--procs", o->procs, "processes (ranks) on this machine", 1, 1024);
  add_ranged_option(cmd, "--nodes", o->nodes, "machines taking part, each running this launch", 1, 65536);
  add_ranged_option(cmd, "--node-rank", o->node_rank, "this machine's index, 0..nodes-1; node 0 hosts rank 0", 0,
                    65535);
  cmd->add_option("--master", o->master,
                  "ADDR:PORT of rank 0's rendezvous; default a free loopback port (one machine only)");
  cmd->add_option("command", o->command, "the qkv command to run after --, e.g. -- vnt train --epochs 10")
      ->required();
  on_run(cmd, action, [o, &app] {
    if (o->node_rank >= o->nodes)  // the ranges are the options' own
      throw UsageError("--node-rank must be in 0.." + std::to_string(o->nodes - 1));
    if (o->nodes > 1 && o->master.empty())
      throw UsageError("--nodes " + std::to_string(o->nodes) +
                       " needs --master ADDR:PORT, an address of node 0 the others can reach");
    distributed::LocalRanks plan = *o;
    if (plan.master.empty()) plan.master = "127.0.0.1:" + std::to_string(distributed::free_local_port());
    distributed::parse_master(plan.master, "--master");  // a bad address is refused before the command
    check_launchable(app, plan.command);
    check_child_options(plan.command, plan.procs * plan.nodes, plan.master, !o->master.empty());
    return distributed::run_local_ranks(plan);
  });
}

}  // namespace qkv::cli
