// qkv's CUDA kernels for point clouds (point_kernels.h): the launches of
// point_kernels_device.h's kNN and FPS kernels, and what the driver says of
// a GPU. Compiled by nvcc with -fmad=false (CMakeLists.txt): a fused
// multiply-add rounds once where the CPU kernels round twice, and near-ties
// would then order differently.
#include "qkv/cuda/point_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <atomic>
#include <limits>

#include "qkv/core/errors.h"
#include "qkv/cuda/point_kernels_device.h"

namespace qkv::cuda {
namespace {

void require_cuda(const at::Tensor& t, const char* fn) {
  if (!t.is_cuda()) throw UsageError(std::string(fn) + ": expected a tensor on a CUDA device");
}

}  // namespace

bool kernels_built() { return true; }

bool kernels_run_on(const c10::Device& device) {
  if (!device.is_cuda()) return false;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  // Each GPU's answer, read without a lock on every kernel call: 0 not yet
  // asked, 1 runs, 2 no code (two threads asking at once both get the same).
  static std::atomic<int8_t> known[std::numeric_limits<c10::DeviceIndex>::max() + 1];
  if (index < 0) return false;
  if (const int8_t answer = known[index].load(std::memory_order_relaxed)) return answer == 1;
  c10::cuda::CUDAGuard on(index);
  // The driver finds no code for the device (no kernel image) where no
  // architecture built covers it; every kernel of qkv's is built alike.
  cudaFuncAttributes attributes{};
  const bool runs = cudaFuncGetAttributes(&attributes, fps_kernel<float>) == cudaSuccess;
  (void)cudaGetLastError();  // not sticky, but leave nothing for the next check
  known[index].store(runs ? 1 : 2, std::memory_order_relaxed);
  return runs;
}

std::string built_architectures() { return QKV_CUDA_ARCHITECTURES; }

std::optional<GpuInfo> gpu_info(int64_t index) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, static_cast<int>(index)) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  return GpuInfo{p.name, p.major, p.minor, static_cast<int64_t>(p.totalGlobalMem)};
}

at::Tensor knn_direct(const at::Tensor& features, int64_t k) {
  require_cuda(features, "knn_direct");
  const int64_t b = features.size(0), dims = features.size(1), n = features.size(2);
  if (dims > kKnnMaxDims || k < 1 || k > kKnnMaxK || k > n)
    throw UsageError("knn_direct: takes D <= " + std::to_string(kKnnMaxDims) + " and 1 <= k <= min(N, " +
                     std::to_string(kKnnMaxK) + ")");
  const c10::cuda::CUDAGuard guard(features.device());
  const auto points = features.detach().contiguous();
  auto out = at::empty({b, n, k}, points.options().dtype(at::kLong));
  if (b == 0 || n == 0) return out;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "knn_direct", [&] {
    const auto shape = knn_launch_shape(b, dims, n, sizeof(scalar_t));
    knn_direct_kernel<scalar_t><<<shape.blocks, shape.threads, shape.shared_bytes, stream>>>(
        points.data_ptr<scalar_t>(), dims, n, k, knn_blocks_per_cloud(n), out.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor farthest_point_sample(const at::Tensor& points, int64_t m, const at::Tensor& starts) {
  require_cuda(points, "farthest_point_sample");
  const c10::cuda::CUDAGuard guard(points.device());
  const auto p = points.detach().contiguous();
  const int64_t b = p.size(0), n = p.size(1);
  auto out = at::empty({b, m}, p.options().dtype(at::kLong));
  if (b == 0 || m == 0) return out;
  const auto s = starts.to(p.device(), at::kLong).contiguous();
  auto dist = at::empty({b, n}, p.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "farthest_point_sample", [&] {
    const auto shape = fps_launch_shape(b);
    fps_kernel<scalar_t><<<shape.blocks, shape.threads, shape.shared_bytes, stream>>>(
        p.data_ptr<scalar_t>(), n, m, s.data_ptr<int64_t>(), dist.data_ptr<scalar_t>(), out.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace qkv::cuda
