#pragma once
// The process supervisor of a data-parallel run on one machine (`qkv
// launch`, as torchrun for PyTorch): W ranks of this very binary, each with
// WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set, watched
// until they have all ended, however they end.
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/core/fields.h"

namespace qkv::distributed {

struct LocalRanks {
  int64_t procs = 2;                 // ranks on this machine
  int64_t nodes = 1;                 // machines taking part
  int64_t node_rank = 0;             // this machine's index; node 0 hosts rank 0
  std::string master;                // ADDR:PORT of rank 0's rendezvous (free_local_port's on one machine)
  std::vector<std::string> command;  // the qkv command each rank runs, e.g. vnt train --epochs 10
};

// The plan's settings but the command (the CLI's positional arguments).
template <typename V>
void visit_fields(LocalRanks& r, V&& visit) {
  visit(Field{"procs", "processes (ranks) on this machine"}.range(1, 1024).short_name("n"), r.procs);
  visit(Field{"nodes", "machines taking part, each running this launch"}.range(1, 65536), r.nodes);
  visit(Field{"node_rank", "this machine's index, 0..nodes-1; node 0 hosts rank 0"}.range(0, 65535), r.node_rank);
  visit(Field{"master", "ADDR:PORT of rank 0's rendezvous; default a free loopback port (one machine only)"}, r.master);
}

// `plan` checked before anything starts, as run_local_ranks needs it: its
// fields' ranges, node 0..nodes-1, a master for several nodes, the master's
// form (ConfigError naming "procs", "nodes", "node_rank" or "master"), an
// empty master made a free loopback port. The command's own world-size,
// rank and master arguments would win over the environment the launcher sets
// (a world size other than the plan's waits for a rank that never comes; a
// rank gives every process the same one): they are refused, named as typed
// (UsageError), but a master equal to the launch's own.
LocalRanks checked_launch_plan(LocalRanks plan);

// A TCP port that is free now on the loopback interface (the kernel's pick);
// DataError when there is none.
int free_local_port();

// Starts the ranks (this binary again, /proc/self/exe, in a process group of
// its own, with OMP_NUM_THREADS cores/procs unless set and a private TMPDIR
// removed at the end), forwards SIGINT and SIGTERM to them once, and waits.
// After the first failure the others get 30 s (the peers' timeout; 1 s after
// a usage error, exit 2) to fail on their own, then SIGTERM, then SIGKILL; a
// rank killed by a signal nobody sent
// through the launcher stops the others at once. Returns the exit status: 0,
// the first failing rank's, or 1 for a killed rank (said on stderr).
int run_local_ranks(const LocalRanks& plan);

}  // namespace qkv::distributed
