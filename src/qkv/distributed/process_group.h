#pragma once
// Data-parallel training across processes and machines on PyTorch's own
// distributed engine: c10d's ProcessGroupGloo, or its ProcessGroupNCCL for
// GPUs where LibTorch has CUDA (2.x); rendezvous through a TCPStore served by
// rank 0. The trainer sees only this class; c10d, gloo and NCCL stay in
// process_group.cpp. A build without Gloo's headers refuses to join a group
// (process_group_absent.cpp, runtime/build_parts.h).
//
// Failure model: every collective and the rendezvous wait at most `timeout`;
// a peer that never arrives, dies or stops answering becomes a DataError
// naming this rank, the operation and the master address, never a hang.
// NCCL runs in c10d's blocking-wait mode for it (no watchdog that aborts the
// process), unless TORCH_NCCL_BLOCKING_WAIT says otherwise.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

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
  std::string backend = "auto";  // auto, gloo or nccl (collective_backend)

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
  visit(Field{"dist_backend",
              "collectives through nccl (GPUs, one per rank; a LibTorch with CUDA) or gloo (CPU tensors, or GPU "
              "tensors through host copies); auto = nccl where --device is cuda and this build has NCCL, else gloo"}
            .one_of("auto|gloo|nccl"),
        p.backend);
}

// Fills what the command line left unset from WORLD_SIZE, RANK, MASTER_ADDR and
// MASTER_PORT (torchrun's names), then checks it: UsageError naming the option
// or variable otherwise. `set_on_cli` lists which of "world_size", "rank",
// "master" came from the command line (those win).
ParallelOptions resolve_parallel_options(ParallelOptions cli, const std::vector<std::string>& set_on_cli);

// "host:port" -> (host, port); ConfigError naming `key` when malformed.
std::pair<std::string, int> parse_master(const std::string& text, const std::string& key);

// The device this rank computes on: `requested`, except that a bare "cuda"
// in a run of several ranks is this rank's own GPU, cuda:LOCAL_RANK (set by
// qkv launch and torchrun; the rank where unset). ConfigError naming device
// when this machine has no such GPU.
c10::Device rank_device(c10::Device requested, const ParallelOptions& options);

// "gloo" or "nccl": options.backend for a rank computing on `device` (auto:
// nccl for a GPU where the build has NCCL, runtime/build_parts.h, else gloo).
// ConfigError naming dist_backend for nccl on the CPU or in a build without.
std::string collective_backend(const ParallelOptions& options, c10::Device device);

class ProcessGroup : public RankSum {
 public:
  // Joins the group: rank 0 serves the store and waits for the others.
  // `device` is where this rank computes (rank_device): NCCL's collectives run
  // there, and tensors given from elsewhere (CPU sums, flags) travel there and
  // back; gloo takes them where they are.
  explicit ProcessGroup(const ParallelOptions& options, c10::Device device = c10::Device(c10::kCPU));
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int64_t rank() const { return options_.rank; }
  const std::string& backend() const { return backend_; }  // "gloo" or "nccl"
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
  std::string backend_;
};

}  // namespace qkv::distributed
