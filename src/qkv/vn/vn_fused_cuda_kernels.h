#pragma once
// The two kernels that run vn_fused_cuda_bodies.h's functors, with their
// launch shapes: a grid-stride loop of a body over every index, and a channel
// sum as one block per (channel, slice of the batch) with a block reduction
// in double. CUDA C++ that vn_fused_cuda.cu compiles with nvcc and launches,
// and that tests/cuda/kernels_on_cpu_test.cpp compiles with the host compiler
// under tests/support/cuda_on_cpu.h, so that the launches and the block
// reduction run on every machine (cuda/point_kernels_device.h says more).
// In an unnamed namespace for the same reason as there.
#include <algorithm>
#include <cstdint>

namespace qkv::vn::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 16;
// Blocks a channel-sum launch aims at (a few per multiprocessor).
constexpr int64_t kSumBlocks = 1024;

// Blocks of kThreads for `total` indices (total > 0); past kMaxBlocks the
// threads stride.
inline int64_t for_each_index_blocks(int64_t total) {
  return std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks);
}

template <typename Body>
__global__ void for_each_index_kernel(Body body, int64_t total) {
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < total;
       index += static_cast<int64_t>(blockDim.x) * gridDim.x)
    body(index);
}

// Slices of the batch per channel: about kSumBlocks blocks in all, no more
// than there are blocks of kThreads items.
inline int64_t channel_sum_slices(int64_t c, int64_t items) {
  if (c <= 0) return 1;
  return std::max<int64_t>(1, std::min<int64_t>((kSumBlocks + c - 1) / c, (items + kThreads - 1) / kThreads));
}

// Block (channel ci, slice s) of c * slices sums item(ci, j, s0, s1) over j =
// s * kThreads + thread, stepping by slices * kThreads, below `items`;
// partial [slices, 2, C], whose sum over slices is the channel sums.
template <typename Item>
__global__ void channel_sums_kernel(Item item, int64_t c, int64_t items, int64_t slices, double* partial) {
  const int64_t ci = blockIdx.x % c, slice = blockIdx.x / c;
  double s0 = 0, s1 = 0;
  for (int64_t j = slice * kThreads + threadIdx.x; j < items; j += slices * kThreads) item(ci, j, s0, s1);
  __shared__ double shared[2][kThreads];
  shared[0][threadIdx.x] = s0;
  shared[1][threadIdx.x] = s1;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      shared[0][threadIdx.x] += shared[0][threadIdx.x + stride];
      shared[1][threadIdx.x] += shared[1][threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[(slice * 2) * c + ci] = shared[0][0];
    partial[(slice * 2 + 1) * c + ci] = shared[1][0];
  }
}

}  // namespace
}  // namespace qkv::vn::gpu
