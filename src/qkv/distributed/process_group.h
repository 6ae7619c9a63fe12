#pragma once
// Data-parallel training across processes and machines on PyTorch's own
// distributed engine: c10d's ProcessGroupGloo, rendezvous through a TCPStore
// served by rank 0. The trainer sees only this class; c10d and gloo stay in
// process_group.cpp. A build without Gloo's headers refuses to join a group
// (process_group_absent.cpp, runtime/build_parts.h).
//
// Failure model: every collective and the rendezvous wait at most `timeout`;
// a peer that never arrives, dies or stops answering becomes a DataError
// naming this rank, the operation and the master address, never a hang.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/layers/rank_sum.h"

namespace torch::nn {
class Module;
}

namespace qkv::distributed {

struct ParallelOptions {
  int64_t world_size = 1;
  int64_t rank = 0;
  std::string master;            // ADDR:PORT of rank 0's store; empty: MASTER_ADDR:MASTER_PORT or 127.0.0.1:29500
  double timeout_seconds = 300;  // rendezvous and every collective

  bool distributed() const { return world_size > 1; }
};

// Options of a run, not settings: config.json does not record them.
template <typename V>
void visit_fields(ParallelOptions& p, V&& visit) {
  visit(Field{"world_size", "data-parallel ranks in all (env WORLD_SIZE); --batch-size is per rank"}.range(1, 65536),
        p.world_size);
  visit(Field{"rank", "this process's rank, 0..world-size-1 (env RANK); rank 0 writes the run folder"}.range(0, 65535),
        p.rank);
  visit(Field{"master",
              "ADDR:PORT where rank 0 serves the rendezvous (env MASTER_ADDR, MASTER_PORT; default 127.0.0.1:29500)"},
        p.master);
  visit(Field{"dist_timeout", "seconds to wait for peers at rendezvous and in each collective before failing"}.range(
            0.1, 86400),
        p.timeout_seconds);
}

// Fills what the command line left unset from WORLD_SIZE, RANK, MASTER_ADDR and
// MASTER_PORT (torchrun's names), then checks it: UsageError naming the option
// or variable otherwise. `set_on_cli` lists which of "world_size", "rank",
// "master" came from the command line (those win).
ParallelOptions resolve_parallel_options(ParallelOptions cli, const std::vector<std::string>& set_on_cli);

// "host:port" -> (host, port); ConfigError naming `key` when malformed.
std::pair<std::string, int> parse_master(const std::string& text, const std::string& key);

class ProcessGroup : public RankSum {
 public:
  // Joins the group: rank 0 serves the store and waits for the others.
  explicit ProcessGroup(const ParallelOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int64_t rank() const { return options_.rank; }
  int64_t world_size() const override { return options_.world_size; }
  const ParallelOptions& options() const { return options_; }

  // In place, over all ranks. Tensors of one dtype and device.
  void all_reduce_sum(at::Tensor& tensor, const std::string& what) override;
  void all_reduce_max(at::Tensor& tensor, const std::string& what);
  void broadcast(std::vector<at::Tensor>& tensors, int64_t root, const std::string& what);
  // Every rank's `tensor` (same shape everywhere), in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const std::string& what);
  void barrier(const std::string& what);

  // Sum of the gradients of `parameters` over ranks, flattened into buckets of
  // about bucket_bytes (one all-reduce per bucket, not per parameter). A
  // parameter without a gradient counts as zero and gets one.
  void all_reduce_gradients(const std::vector<at::Tensor>& parameters, int64_t bucket_bytes = 25 << 20);
  // Rank root's parameters and buffers to every rank.
  void broadcast_module(torch::nn::Module& module, int64_t root = 0);
  // Rank root's bytes (e.g. a checkpoint file) to every rank.
  std::string broadcast_bytes(const std::string& bytes, int64_t root = 0);
  // Whether `flag` holds on any rank (one all-reduce).
  bool any(bool flag, const std::string& what);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ParallelOptions options_;
};

}  // namespace qkv::distributed
