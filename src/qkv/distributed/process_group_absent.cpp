// A build without Gloo's headers (not found, or QKV_WITHOUT names it): one
// process trains alone as always; joining a group refuses with the line
// runtime/build_parts.h words (resolve_parallel_options already refuses
// more than one rank), so no method below is ever reached on an object.
#include "qkv/distributed/process_group.h"
#include "qkv/runtime/build_parts.h"

namespace qkv::distributed {

struct ProcessGroup::Impl {};

namespace {
[[noreturn]] void refuse() { refuse_without(Part::Gloo, "data-parallel training"); }
}  // namespace

ProcessGroup::ProcessGroup(const ParallelOptions& options, c10::Device) : options_(options) { refuse(); }
ProcessGroup::~ProcessGroup() = default;
void ProcessGroup::all_reduce_sum(at::Tensor&, const std::string&) { refuse(); }
void ProcessGroup::all_reduce_max(at::Tensor&, const std::string&) { refuse(); }
void ProcessGroup::broadcast(std::vector<at::Tensor>&, int64_t, const std::string&) { refuse(); }
std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor&, const std::string&) { refuse(); }
void ProcessGroup::barrier(const std::string&) { refuse(); }
void ProcessGroup::all_reduce_gradients(const std::vector<at::Tensor>&, int64_t) { refuse(); }
void ProcessGroup::broadcast_module(torch::nn::Module&, int64_t) { refuse(); }
std::string ProcessGroup::broadcast_bytes(const std::string&, int64_t) { refuse(); }
bool ProcessGroup::any(bool, const std::string&) { refuse(); }

}  // namespace qkv::distributed
