#pragma once
// The fused VN kernels' two launches (vn/vn_fused_cuda_kernels.h) as plain
// loops on one CPU thread: the reference the kernels' functors and the
// kernels themselves are checked against.
#include <torch/torch.h>

#include <cstdint>

namespace qkv::testing {

// One thread's work at every index, in order (for_each_index_kernel).
template <typename Body>
void run_body(const Body& body, int64_t total) {
  for (int64_t index = 0; index < total; ++index) body(index);
}

// [2, C] float64: item's two sums per channel over `items` vectors or points
// (channel_sums_kernel and the sum over its slices).
template <typename Item>
at::Tensor run_sums(const Item& item, int64_t c, int64_t items) {
  auto sums = torch::zeros({2, c}, torch::kDouble);
  auto s = sums.accessor<double, 2>();
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t j = 0; j < items; ++j) item(ci, j, s[0][ci], s[1][ci]);
  return sums;
}

}  // namespace qkv::testing
