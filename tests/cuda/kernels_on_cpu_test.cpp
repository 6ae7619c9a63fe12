// qkv's CUDA kernels, compiled by the host compiler and run under CUDA's
// thread model on the CPU (support/cuda_on_cpu.h): kNN and FPS
// (cuda/point_kernels_device.h) give their CPU references' indices, ties
// included, at sizes that cross the kernels' tiles, blocks and warps; the
// fused VN ops' launches (vn/vn_fused_cuda_kernels.h) visit every index once
// and sum channels over blocks and slices as a plain loop does (their
// functors are checked in tests/vn/vn_fused_cuda_bodies_test.cpp). These run
// on every machine; cuda_test.cpp runs the same kernels, built by nvcc, on a
// GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "qkv/pointcloud/transforms.h"
#include "qkv/vn/vn_fused_cuda_bodies.h"
#include "qkv/vn/vn_ops.h"
#include "support/clouds_with_ties.h"
#include "support/cuda_on_cpu.h"
#include "support/tolerance.h"
#include "support/vn_kernel_loops.h"

// The CUDA names the kernels use (threadIdx, __syncthreads, ...), in the
// kernels' namespaces.
namespace qkv::cuda {
using namespace on_cpu;
}  // namespace qkv::cuda
namespace qkv::vn::gpu {
using namespace cuda::on_cpu;
}  // namespace qkv::vn::gpu

#pragma push_macro("__global__")
#pragma push_macro("__device__")
#pragma push_macro("__shared__")
#undef __global__
#undef __device__
#undef __shared__
#define __global__
#define __device__
// One array per kernel instance, which all threads of the block see (blocks
// run one at a time).
#define __shared__ static
#include "qkv/cuda/point_kernels_device.h"
#include "qkv/vn/vn_fused_cuda_kernels.h"
#pragma pop_macro("__shared__")
#pragma pop_macro("__device__")
#pragma pop_macro("__global__")

namespace qkv::testing {
namespace {

namespace on_cpu = cuda::on_cpu;

// knn_direct's launch (point_kernels.cu), its kernel on CPU threads.
template <typename T>
at::Tensor knn_kernel_on_cpu(const at::Tensor& features, int64_t k) {
  const auto x = features.contiguous();
  const int64_t b = x.size(0), dims = x.size(1), n = x.size(2);
  auto out = torch::full({b, n, k}, -1, torch::kLong);
  const auto shape = cuda::knn_launch_shape(b, dims, n, sizeof(T));
  on_cpu::launch(shape.blocks, shape.threads, shape.shared_bytes, cuda::knn_direct_kernel<T>, x.data_ptr<T>(), dims, n,
                 k, cuda::knn_blocks_per_cloud(n), out.data_ptr<int64_t>());
  return out;
}

// farthest_point_sample's launch (point_kernels.cu), its kernel on CPU threads.
template <typename T>
at::Tensor fps_kernel_on_cpu(const at::Tensor& points, int64_t m, const std::vector<int64_t>& starts) {
  const auto p = points.contiguous();
  const int64_t b = p.size(0), n = p.size(1);
  auto out = torch::full({b, m}, -1, torch::kLong);
  auto dist = torch::empty({b, n}, p.options());
  auto s = torch::tensor(starts, torch::kLong);
  const auto shape = cuda::fps_launch_shape(b);
  on_cpu::launch(shape.blocks, shape.threads, shape.shared_bytes, cuda::fps_kernel<T>, p.data_ptr<T>(), n, m,
                 s.data_ptr<int64_t>(), dist.data_ptr<T>(), out.data_ptr<int64_t>());
  return out;
}

TEST(CudaKernelsOnCpu, KnnGivesTheCpuKernelsIndices) {
  // 20 points: one partial block; 300: three blocks of 128 queries (the last
  // partial) and two tiles of 256 points (the second partial).
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const int64_t dims : {int64_t{1}, int64_t{3}, cuda::kKnnMaxDims})
      for (const int64_t n : {20, 300})
        for (const int64_t k : {int64_t{1}, int64_t{7}, std::min(n, cuda::kKnnMaxK)}) {
          const auto x = clouds_with_ties(2, n, dims, dtype, 3 + dims + n + k);
          const auto got = dtype == torch::kFloat ? knn_kernel_on_cpu<float>(x, k) : knn_kernel_on_cpu<double>(x, k);
          EXPECT_TRUE(torch::equal(got, vn::knn_indices_exhaustive(x, k)))
              << "dtype " << dtype << " dims " << dims << " n " << n << " k " << k;
        }
}

TEST(CudaKernelsOnCpu, KnnRanksAPointThatIsNotANumberAsTheCpuKernelDoes) {
  for (const int64_t n : {20, 300}) {
    auto x = clouds_with_ties(1, n, 3, torch::kFloat, 5 + n);
    x[0][2][1] = std::numeric_limits<float>::quiet_NaN();
    x[0][0][n - 1] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(torch::equal(knn_kernel_on_cpu<float>(x, 7), vn::knn_indices_exhaustive(x, 7))) << "n " << n;
  }
}

TEST(CudaKernelsOnCpu, FarthestPointSampleGivesTheCpuKernelsIndices) {
  // 300 points: fewer than the block's 512 threads (idle threads, idle
  // warps); 1100: three strides of the block. Each cloud its own start. A
  // pick is 23 barriers of 512 CPU threads (about 50 ms on 2 cores): few
  // picks, but ties among the farthest from the first on.
  for (const auto& [dtype, n] : {std::pair{torch::kDouble, int64_t{300}}, std::pair{torch::kFloat, int64_t{1100}}}) {
    const auto points = clouds_with_ties(2, n, 3, dtype, 11 + n).transpose(1, 2).contiguous();  // [B, N, 3]
    const int64_t m = 12;
    const std::vector<int64_t> starts = {n - 1, 17};
    const auto got = dtype == torch::kFloat ? fps_kernel_on_cpu<float>(points, m, starts)
                                            : fps_kernel_on_cpu<double>(points, m, starts);
    for (int64_t c = 0; c < 2; ++c)
      EXPECT_TRUE(torch::equal(got[c], pointcloud::farthest_point_sample_exhaustive(points[c], m, starts[c])))
          << "dtype " << dtype << " n " << n << " cloud " << c;
  }
  const auto same = torch::zeros({1, 5, 3});
  EXPECT_TRUE(
      torch::equal(fps_kernel_on_cpu<float>(same, 5, {2}), pointcloud::farthest_point_sample_exhaustive(same, 5, 2)))
      << "all points the same: ties to the lowest index";
}

// One visit per thread and index.
struct CountVisits {
  std::atomic<int>* visits;
  void operator()(int64_t index) const { visits[index].fetch_add(1); }
};

TEST(CudaKernelsOnCpu, ForEachIndexVisitsEveryIndexOnce) {
  // The launch's own grid (4 blocks for 1000), and a grid of 3 blocks for
  // 2000 indices, whose threads stride (as past kMaxBlocks).
  for (const auto& [blocks, total] :
       {std::pair{vn::gpu::for_each_index_blocks(1000), int64_t{1000}}, std::pair{int64_t{3}, int64_t{2000}}}) {
    std::vector<std::atomic<int>> visits(static_cast<size_t>(total));
    on_cpu::launch(static_cast<unsigned>(blocks), vn::gpu::kThreads, 0, vn::gpu::for_each_index_kernel<CountVisits>,
                   CountVisits{visits.data()}, total);
    for (int64_t i = 0; i < total; ++i) ASSERT_EQ(visits[i].load(), 1) << "index " << i << " of " << total;
  }
}

TEST(CudaKernelsOnCpu, ChannelSumsOverBlocksAndSlicesEqualAPlainLoop) {
  // 3 x 300 points of 4 channels: 4 slices a channel, 16 blocks.
  const int64_t b = 3, c = 4, m = 300, items = b * m;
  ASSERT_EQ(vn::gpu::channel_sum_slices(c, items), 4);
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    AT_DISPATCH_FLOATING_TYPES(dtype, "channel_sums", [&] {
      const auto x = torch::randn({b, c, 3, m}, torch::kDouble).to(dtype);
      const vn::gpu::bodies::NormSums<scalar_t> item{x.data_ptr<scalar_t>(), c, m, scalar_t(1e-12)};
      const int64_t slices = vn::gpu::channel_sum_slices(c, items);
      auto partial = torch::full({slices, 2, c}, std::numeric_limits<double>::quiet_NaN(), torch::kDouble);
      on_cpu::launch(static_cast<unsigned>(c * slices), vn::gpu::kThreads, 0,
                     vn::gpu::channel_sums_kernel<vn::gpu::bodies::NormSums<scalar_t>>, item, c, items, slices,
                     partial.data_ptr<double>());
      EXPECT_LE(scaled_difference(partial.sum(0), run_sums(item, c, items)), 1e-12) << dtype;
    });
}

// The model itself: shared memory that the block's threads see, barriers
// that order their writes and reads, shuffles within a warp, and a barrier
// that one thread skips reported, not waited on forever.
void rotate_through_shared_memory(int64_t* out) {
  static int64_t shared[64];
  shared[on_cpu::threadIdx.x] = 10 * on_cpu::threadIdx.x;
  on_cpu::__syncthreads();
  out[on_cpu::blockIdx.x * 64 + on_cpu::threadIdx.x] =
      shared[(on_cpu::threadIdx.x + 1) % 64] + on_cpu::__shfl_down_sync(0xffffffffu, on_cpu::threadIdx.x, 3);
}

void thread_zero_skips_the_barrier() {
  if (on_cpu::threadIdx.x == 0) return;
  on_cpu::__syncthreads();
}

TEST(CudaKernelsOnCpu, TheThreadModelSharesMemoryOrdersItAndShufflesWithinAWarp) {
  std::vector<int64_t> out(2 * 64, -1);
  on_cpu::launch(2, 64, 0, rotate_through_shared_memory, out.data());
  for (int64_t block = 0; block < 2; ++block)
    for (int64_t t = 0; t < 64; ++t) {
      const int64_t lane = t % 32, from_below = lane + 3 < 32 ? t + 3 : t;
      EXPECT_EQ(out[block * 64 + t], 10 * ((t + 1) % 64) + from_below) << "block " << block << " thread " << t;
    }
  try {
    on_cpu::launch(1, 64, 0, thread_zero_skips_the_barrier);
    ADD_FAILURE() << "a barrier that thread 0 never reached was passed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("__syncthreads that not every thread"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qkv::testing
