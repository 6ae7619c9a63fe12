#pragma once
// What a layer whose training statistics span the ranks of data-parallel
// training (batch norm) needs from a process group: its size and a sum over
// the ranks. Declared here, below the layers, and implemented by
// distributed::ProcessGroup, so that layers (layers/, vn/) know no transport; the
// trainer hands the group to the layers of the model it trains
// (layers::RankSumAttachment).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace qkv {

class RankSum {
 public:
  virtual ~RankSum() = default;
  virtual int64_t world_size() const = 0;
  // `tensor` summed over the ranks, in place; `what` names it in errors.
  virtual void all_reduce_sum(at::Tensor& tensor, const std::string& what) = 0;
};

}  // namespace qkv
