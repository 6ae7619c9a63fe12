#include "qkv/distributed/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/messages.h"
#include "qkv/distributed/process_group.h"

namespace qkv::distributed {
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

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
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
      throw DataError("cannot make a scratch folder in " + fs::temp_directory_path().string() + ": " +
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

namespace {

// An argument of the command that is an option: its name as typed, its key
// (--world-size=3: world_size) and its value (after = or the next word).
struct ChildOption {
  std::string name, key, value;
};

std::vector<ChildOption> child_options(const std::vector<std::string>& args) {
  std::vector<ChildOption> options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word.size() < 3 || word[0] != '-' || word[1] != '-') continue;
    const auto equals = word.find('=');
    ChildOption o{word.substr(0, equals), word.substr(2, equals == std::string::npos ? equals : equals - 2), ""};
    std::replace(o.key.begin(), o.key.end(), '-', '_');
    o.value = equals != std::string::npos ? word.substr(equals + 1) : i + 1 < args.size() ? args[i + 1] : "";
    options.push_back(o);
  }
  return options;
}

}  // namespace

LocalRanks checked_launch_plan(LocalRanks plan) {
  check_field_ranges(plan);
  if (plan.node_rank >= plan.nodes) throw ConfigError("node_rank", "must be in 0.." + std::to_string(plan.nodes - 1));
  if (plan.nodes > 1 && plan.master.empty())
    throw ConfigError(
        "nodes", std::to_string(plan.nodes) + " needs {master} ADDR:PORT, an address of node 0 the others can reach");
  const bool master_given = !plan.master.empty();
  if (!master_given) plan.master = "127.0.0.1:" + std::to_string(free_local_port());
  parse_master(plan.master, "master");
  const int64_t world = plan.procs * plan.nodes;
  for (const auto& o : child_options(plan.command)) {
    const std::string typed = o.name + " " + o.value;
    if (o.key == "world_size" && o.value != std::to_string(world))
      throw UsageError(typed + " in the command contradicts {procs}/{nodes} (" + std::to_string(world) +
                       " ranks); drop it, launch sets it");
    if (o.key == "rank") throw UsageError(typed + " in the command: launch gives each rank its own; drop it");
    if (o.key.rfind("master", 0) == 0 && !(master_given && o.key == "master" && o.value == plan.master))
      throw UsageError(typed + " in the command: give the rendezvous to launch (qkv launch {master} ADDR:PORT -- ...)");
  }
  return plan;
}

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw DataError("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw DataError("cannot find a free local port; name the rendezvous address (ADDR:PORT) yourself");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

int run_local_ranks(const LocalRanks& plan) {
  const auto [addr, port] = parse_master(plan.master, "master");
  const int64_t world = plan.procs * plan.nodes;
  RankTempDir scratch;
  // Ranks share this machine's cores unless the user says otherwise.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max<int64_t>(1, static_cast<int64_t>(cores) / plan.procs));

  std::vector<std::string> args{"qkv"};
  args.insert(args.end(), plan.command.begin(), plan.command.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  say_as_is("launch: " + std::to_string(plan.procs) + " rank(s) here of " + std::to_string(world) + ", master " +
            plan.master);
  struct sigaction forward {};
  forward.sa_handler = on_launcher_signal;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &forward, nullptr);
  sigaction(SIGTERM, &forward, nullptr);
  const pid_t parent = getpid();
  g_children.reserve(static_cast<size_t>(plan.procs));  // no reallocation under the signal handler
  for (int64_t local = 0; local < plan.procs; ++local) {
    const pid_t pid = fork();
    if (pid < 0) {
      forward_signal(SIGTERM);
      throw DataError("fork failed for local rank " + std::to_string(local));
    }
    if (pid == 0) {
      // Own process group: a terminal's Ctrl-C reaches the launcher, which
      // forwards it once (a second SIGINT would kill a rank mid-checkpoint).
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("RANK", std::to_string(plan.node_rank * plan.procs + local).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("MASTER_ADDR", addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("OMP_NUM_THREADS", threads.c_str(), 0);
      setenv("TMPDIR", scratch.path().c_str(), 1);
      execv("/proc/self/exe", argv.data());
      // write(2), not stdio: between fork and exec only async-signal-safe calls.
      constexpr char kCannotRun[] = "launch: cannot run /proc/self/exe\n";
      [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, kCannotRun, sizeof kCannotRun - 1);
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
          killed = "rank " + std::to_string(plan.node_rank * plan.procs + static_cast<int64_t>(local)) +
                   " killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
          deadline = std::chrono::steady_clock::now();
        }
        if (status_out != 0) continue;
        status_out = code;
        // A usage error (exit 2) is a rank's settings or outputs, refused as
        // a rule before the ranks meet: the others wait at the rendezvous for
        // a rank that is gone and would say nothing for the whole grace. They
        // get a second (ranks failing alike usually say so in it; the first
        // rank's line is the one that counts).
        const auto grace = code == 2 ? std::chrono::seconds(1) : std::chrono::seconds(30);
        if (killed.empty()) deadline = std::chrono::steady_clock::now() + grace;
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
  if (!killed.empty()) throw DataError(killed + "; the other ranks were stopped");
  if (status_out == kExitInterrupted)
    say_as_is("launch: interrupted; every rank stopped at the same step");
  else if (status_out != 0)
    say_as_is("launch: a rank failed (exit status " + std::to_string(status_out) + "); the others were stopped");
  return status_out;
}

}  // namespace qkv::distributed
