// qkv launch -n W -- <train command>: W ranks of a data-parallel run on this
// machine, as torchrun does for PyTorch. Each rank is this binary again with
// WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set; with --nodes
// and --node-rank the same command on each machine makes one run of them all.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/distributed/process_group.h"

namespace qkv::cli {
namespace {

std::vector<pid_t> g_children;
volatile sig_atomic_t g_received = 0;  // a SIGINT or SIGTERM sent to the launcher itself

void on_launcher_signal(int sig) {
  g_received = sig;
  for (const pid_t pid : g_children)
    if (pid > 0) kill(pid, sig);
}

void forward_signal(int sig) {
  for (const pid_t pid : g_children)
    if (pid > 0) kill(pid, sig);
}

// A TCP port that is free now on the loopback interface (the kernel's pick).
int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw DataError("launch: cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw DataError("launch: cannot find a free local port; pass --master 127.0.0.1:PORT");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Groups whose `train` takes --world-size only to refuse anything but 1.
bool single_process_group(const std::string& name) { return name == "mhca"; }

// "vnt train", "lm train", ...: the commands whose ranks split the batches
// among them; anything else would just run W times.
std::vector<std::string> launchable_commands(const CLI::App& app) {
  std::vector<std::string> names;
  for (const auto* group : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (single_process_group(group->get_name())) continue;
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
  throw UsageError("launch: '" + given + "' is not data-parallel training; launch runs only " + list);
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
    throw UsageError("launch: --world-size " + v + " in the command contradicts -n/--nodes (" + std::to_string(world) +
                     " ranks); drop it, launch sets it");
  if (find_option(args, "--rank", &v))
    throw UsageError("launch: --rank " + v + " in the command: launch gives each rank its own; drop it");
  for (const auto& a : args)
    if (a.rfind("--master", 0) == 0) {
      find_option(args, a.substr(0, a.find('=')), &v);
      if (master_given && a.substr(0, a.find('=')) == "--master" && v == master) continue;
      throw UsageError("launch: " + a.substr(0, a.find('=')) + " " + v +
                       " in the command: give the rendezvous to launch (qkv launch --master ADDR:PORT -- ...)");
    }
}

// A private folder for the ranks' temporary files (TMPDIR), removed once
// they have ended, however they ended: a killed rank cannot clean up its own
// scratch folders, and only what is in here is ours to delete.
class RankTempDir {
 public:
  RankTempDir() {
    namespace fs = std::filesystem;
    std::string pattern = (fs::temp_directory_path() / "qkv-launch-XXXXXX").string();
    if (!mkdtemp(pattern.data()))
      throw DataError("launch: cannot make a scratch folder in " + fs::temp_directory_path().string() + ": " +
                      std::strerror(errno));
    path_ = pattern;
  }
  ~RankTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  RankTempDir(const RankTempDir&) = delete;
  RankTempDir& operator=(const RankTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void register_launch(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "launch", "run a train command as W data-parallel processes on this machine: qkv launch -n 2 -- vnt train ...");
  struct Opts {
    int64_t procs = 2;
    int64_t nodes = 1;
    int64_t node_rank = 0;
    std::string master;
    std::vector<std::string> command;
  };
  auto o = std::make_shared<Opts>();
  add_ranged_option(cmd, "-n,--procs", o->procs, "processes (ranks) on this machine", 1, 1024);
  add_ranged_option(cmd, "--nodes", o->nodes, "machines taking part, each running this launch", 1, 65536);
  add_ranged_option(cmd, "--node-rank", o->node_rank, "this machine's index, 0..nodes-1; node 0 hosts rank 0", 0,
                    65535);
  cmd->add_option("--master", o->master,
                  "ADDR:PORT of rank 0's rendezvous; default a free loopback port (one machine only)");
  cmd->add_option("command", o->command, "the qkv command to run after --, e.g. -- vnt train --epochs 10")
      ->required();
  cmd->callback([o, &action, &app] {
    action = [o, &app] {
      if (o->procs < 1) throw UsageError("launch: -n must be at least 1");
      if (o->nodes < 1) throw UsageError("launch: --nodes must be at least 1");
      if (o->node_rank < 0 || o->node_rank >= o->nodes)
        throw UsageError("launch: --node-rank must be in 0.." + std::to_string(o->nodes - 1));
      if (o->nodes > 1 && o->master.empty())
        throw UsageError("launch: --nodes " + std::to_string(o->nodes) +
                         " needs --master ADDR:PORT, an address of node 0 the others can reach");
      std::string master = o->master;
      if (master.empty()) master = "127.0.0.1:" + std::to_string(free_local_port());
      const auto [addr, port] = distributed::parse_master(master, "launch: --master");
      const int64_t world = o->procs * o->nodes;
      check_launchable(app, o->command);
      check_child_options(o->command, world, master, !o->master.empty());
      RankTempDir scratch;
      // Ranks share this machine's cores unless the user says otherwise.
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      const std::string threads = std::to_string(std::max<int64_t>(1, static_cast<int64_t>(cores) / o->procs));

      std::vector<std::string> args{"qkv"};
      args.insert(args.end(), o->command.begin(), o->command.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);

      std::fprintf(stderr, "launch: %lld rank(s) here of %lld, master %s\n", static_cast<long long>(o->procs),
                   static_cast<long long>(world), master.c_str());
      std::fflush(stderr);
      struct sigaction forward {};
      forward.sa_handler = on_launcher_signal;
      sigemptyset(&forward.sa_mask);
      sigaction(SIGINT, &forward, nullptr);
      sigaction(SIGTERM, &forward, nullptr);
      const pid_t parent = getpid();
      g_children.reserve(static_cast<size_t>(o->procs));  // no reallocation under the signal handler
      for (int64_t local = 0; local < o->procs; ++local) {
        const pid_t pid = fork();
        if (pid < 0) {
          forward_signal(SIGTERM);
          throw DataError("launch: fork failed for local rank " + std::to_string(local));
        }
        if (pid == 0) {
          // Own process group: a terminal's Ctrl-C reaches the launcher, which
          // forwards it once (a second SIGINT would kill a rank mid-checkpoint).
          setpgid(0, 0);
          prctl(PR_SET_PDEATHSIG, SIGTERM);
          if (getppid() != parent) _exit(1);
          setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
          setenv("RANK", std::to_string(o->node_rank * o->procs + local).c_str(), 1);
          setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
          setenv("MASTER_ADDR", addr.c_str(), 1);
          setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
          setenv("OMP_NUM_THREADS", threads.c_str(), 0);
          setenv("TMPDIR", scratch.path().c_str(), 1);
          execv("/proc/self/exe", argv.data());
          std::fprintf(stderr, "launch: cannot run /proc/self/exe\n");
          _exit(127);
        }
        g_children.push_back(pid);
      }

      // Wait for all. After the first failure the others get the peers'
      // timeout to fail on their own, then SIGTERM, then SIGKILL. A rank
      // killed by a signal will not answer its peers again: they are stopped
      // at once instead of waiting out their timeout.
      int status_out = 0;
      std::string killed;  // how the first rank killed by a signal died
      size_t running = g_children.size();
      auto deadline = std::chrono::steady_clock::time_point::max();
      bool terminated = false;
      while (running > 0) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
          for (size_t local = 0; local < g_children.size(); ++local) {
            if (g_children[local] != pid) continue;
            g_children[local] = -1;
            --running;
            const int code = exit_status_of(status);
            if (code == 0) continue;
            // A signal neither the user sent through the launcher (it ended
            // every rank alike) nor the launcher's own stop: someone killed
            // this rank. Its peers may fail first on the lost connection, so
            // this is reported whatever came before.
            if (WIFSIGNALED(status) && WTERMSIG(status) != g_received && !terminated && killed.empty()) {
              const int sig = WTERMSIG(status);
              killed = "rank " + std::to_string(o->node_rank * o->procs + static_cast<int64_t>(local)) +
                       " killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
              deadline = std::chrono::steady_clock::now();
            }
            if (status_out != 0) continue;
            status_out = code;
            if (killed.empty()) deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          }
          continue;
        }
        if (pid < 0 && errno != EINTR) break;
        if (std::chrono::steady_clock::now() > deadline) {
          forward_signal(terminated ? SIGKILL : SIGTERM);
          terminated = true;
          deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!killed.empty()) {
        std::fprintf(stderr, "qkv launch: %s; the other ranks were stopped\n", killed.c_str());
        return 1;
      }
      if (status_out == kExitInterrupted)
        std::fprintf(stderr, "launch: interrupted; every rank stopped at the same step\n");
      else if (status_out != 0)
        std::fprintf(stderr, "launch: a rank failed (exit status %d); the others were stopped\n", status_out);
      return status_out;
    };
  });
}

}  // namespace qkv::cli
