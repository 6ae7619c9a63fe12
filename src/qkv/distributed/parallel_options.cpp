// The data-parallel settings of a run, from its options and the environment
// (torchrun's WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): no c10d
// here, so a build without Gloo (runtime/build_parts.h) checks them too, and
// refuses more than one rank.
#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/distributed/process_group.h"
#include "qkv/runtime/build_parts.h"

namespace qkv::distributed {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int64_t parse_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(what + ": '" + text + "' is not an integer");
}

}  // namespace

std::pair<std::string, int> parse_master(const std::string& text, const std::string& key) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw ConfigError(key, text + ": expected ADDR:PORT (e.g. 10.0.0.1:29500)");
  int64_t port = 0;
  try {
    port = parse_int(text.substr(colon + 1), "port");
  } catch (const UsageError& e) {
    throw ConfigError(key, text + ": " + e.what());
  }
  if (port < 1 || port > 65535) throw ConfigError(key, text + ": port must be in 1..65535");
  return {text.substr(0, colon), static_cast<int>(port)};
}

ParallelOptions resolve_parallel_options(ParallelOptions o, const std::vector<std::string>& set_on_cli) {
  auto on_cli = [&](const char* name) {
    return std::find(set_on_cli.begin(), set_on_cli.end(), name) != set_on_cli.end();
  };
  if (!on_cli("world_size") && std::getenv("WORLD_SIZE"))
    o.world_size = parse_int(env_or("WORLD_SIZE", "1"), "WORLD_SIZE");
  if (!on_cli("rank") && std::getenv("RANK")) o.rank = parse_int(env_or("RANK", "0"), "RANK");
  if (!on_cli("master") || o.master.empty())
    o.master = env_or("MASTER_ADDR", "127.0.0.1") + ":" + env_or("MASTER_PORT", "29500");
  if (o.world_size < 1)
    throw ConfigError("world_size", "must be at least 1 (got " + std::to_string(o.world_size) + ")");
  if (o.rank < 0 || o.rank >= o.world_size)
    throw ConfigError("rank", std::to_string(o.rank) + " is outside 0.." + std::to_string(o.world_size - 1) +
                                  " for {world_size} " + std::to_string(o.world_size));
  if (!(o.timeout_seconds > 0)) throw ConfigError("dist_timeout", "must be positive (seconds)");
  parse_master(o.master, "master");
  if (o.distributed() && !built_with(Part::Gloo))
    refuse_without(Part::Gloo, "{world_size} " + std::to_string(o.world_size));
  return o;
}

c10::Device rank_device(c10::Device requested, const ParallelOptions& o) {
  if (!requested.is_cuda() || requested.has_index() || !o.distributed()) return requested;
  const int64_t local = std::getenv("LOCAL_RANK") ? parse_int(env_or("LOCAL_RANK", "0"), "LOCAL_RANK") : o.rank;
  const int64_t visible = static_cast<int64_t>(torch::cuda::device_count());
  if (local < 0 || local >= visible)
    throw ConfigError("device", "cuda: rank " + std::to_string(o.rank) + " (local rank " + std::to_string(local) +
                                    ") has no GPU of its own: " + std::to_string(visible) +
                                    " visible on this machine; " +
                                    "run one rank per GPU, or share one with --device cuda:0 --dist-backend gloo");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local));
}

std::string collective_backend(const ParallelOptions& o, c10::Device device) {
  if (o.backend == "auto") return device.is_cuda() && built_with(Part::Nccl) ? "nccl" : "gloo";
  if (o.backend == "nccl") {
    if (!built_with(Part::Nccl))
      throw ConfigError("dist_backend", "nccl: this qkv was built without NCCL (" +
                                            std::string(part_info(Part::Nccl).package) + "; docs/build.md); use gloo");
    if (!device.is_cuda())
      throw ConfigError("dist_backend", "nccl reduces GPU tensors: with --device " + device.str() + " use gloo");
  } else if (o.backend != "gloo") {
    throw ConfigError("dist_backend", o.backend + ": expected auto, gloo or nccl");
  }
  return o.backend;
}

}  // namespace qkv::distributed
