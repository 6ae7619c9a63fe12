// CUDA kernels for point clouds (point_kernels.h). Compiled by nvcc with
// -fmad=false (CMakeLists.txt): a fused multiply-add rounds once where the CPU
// kernels round twice, and near-ties would then order differently.
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

namespace qkv::cuda {
namespace {

// kNN: one thread per query; the cloud's points pass through shared memory in
// tiles that every thread of the block scans.
constexpr int kKnnThreads = 128;
constexpr int kKnnTile = 256;

template <typename T>
__global__ void knn_direct_kernel(const T* __restrict__ points, int64_t dims, int64_t n, int64_t k,
                                  int64_t blocks_per_cloud, int64_t* __restrict__ out) {
  extern __shared__ unsigned char shared_bytes[];
  T* tile = reinterpret_cast<T*>(shared_bytes);  // [dims, kKnnTile]
  const int64_t cloud = blockIdx.x / blocks_per_cloud;
  const int64_t q = (blockIdx.x % blocks_per_cloud) * kKnnThreads + threadIdx.x;
  const T* p = points + cloud * dims * n;
  const bool active = q < n;
  T query[kKnnMaxDims];
  for (int64_t c = 0; c < dims; ++c) query[c] = active ? p[c * n + q] : T(0);
  // The k best so far, sorted; a later point enters only when strictly
  // nearer than the worst and goes after the entries of its distance (their
  // indices are lower): the CPU's select_k_nearest, entry for entry.
  T best_d[kKnnMaxK];
  int64_t best_i[kKnnMaxK];
  int64_t filled = 0;
  for (int64_t t0 = 0; t0 < n; t0 += kKnnTile) {
    const int64_t len = min(static_cast<int64_t>(kKnnTile), n - t0);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < dims * len; i += kKnnThreads) {
      const int64_t c = i / len, j = i % len;
      tile[c * kKnnTile + j] = p[c * n + t0 + j];
    }
    __syncthreads();
    if (!active) continue;
    for (int64_t j = 0; j < len; ++j) {
      T d = 0;
      for (int64_t c = 0; c < dims; ++c) {
        const T diff = tile[c * kKnnTile + j] - query[c];
        d += diff * diff;
      }
      const int64_t index = t0 + j;
      if (index == q) d = -std::numeric_limits<T>::infinity();  // itself first, before its duplicates
      int64_t at;
      if (filled < k) {
        at = filled++;
      } else {
        if (!(d < best_d[k - 1])) continue;
        at = k - 1;
      }
      while (at > 0 && d < best_d[at - 1]) {
        best_d[at] = best_d[at - 1];
        best_i[at] = best_i[at - 1];
        --at;
      }
      best_d[at] = d;
      best_i[at] = index;
    }
  }
  if (!active) return;
  int64_t* o = out + (cloud * n + q) * k;
  for (int64_t i = 0; i < k; ++i) o[i] = best_i[i];
}

// FPS: one block per cloud. Each thread keeps the running minimum distance of
// its strided share of the points in `dist` and proposes its farthest; the
// block's arg-max (ties to the lowest index) is the next pick.
constexpr int kFpsThreads = 512;

template <typename T>
__device__ void take_farther(T& best_d, int64_t& best_i, T d, int64_t i) {
  if (d > best_d || (d == best_d && i < best_i)) {
    best_d = d;
    best_i = i;
  }
}

template <typename T>
__global__ void fps_kernel(const T* __restrict__ points, int64_t n, int64_t m, const int64_t* __restrict__ starts,
                           T* __restrict__ dist_all, int64_t* __restrict__ out) {
  __shared__ T shared_d[kFpsThreads / 32];
  __shared__ int64_t shared_i[kFpsThreads / 32];
  __shared__ int64_t current_shared;
  const int64_t cloud = blockIdx.x;
  const T* p = points + cloud * n * 3;
  T* dist = dist_all + cloud * n;
  int64_t* o = out + cloud * m;
  for (int64_t i = threadIdx.x; i < n; i += kFpsThreads) dist[i] = std::numeric_limits<T>::infinity();
  int64_t current = starts[cloud];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t pick = 0; pick < m; ++pick) {
    if (threadIdx.x == 0) o[pick] = current;
    const T cx = p[3 * current], cy = p[3 * current + 1], cz = p[3 * current + 2];
    T best_d = -1;  // below every squared distance: a thread with points always proposes one
    int64_t best_i = n;
    for (int64_t i = threadIdx.x; i < n; i += kFpsThreads) {
      const T dx = p[3 * i] - cx, dy = p[3 * i + 1] - cy, dz = p[3 * i + 2] - cz;
      const T fresh = dx * dx + dy * dy + dz * dz;
      const T d = fresh < dist[i] ? fresh : dist[i];  // std::min(dist, fresh), as on the CPU
      dist[i] = d;
      take_farther(best_d, best_i, d, i);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const T other_d = __shfl_down_sync(0xffffffffu, best_d, offset);
      const int64_t other_i = __shfl_down_sync(0xffffffffu, best_i, offset);
      take_farther(best_d, best_i, other_d, other_i);
    }
    if (lane == 0) {
      shared_d[warp] = best_d;
      shared_i[warp] = best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kFpsThreads / 32; ++w) take_farther(shared_d[0], shared_i[0], shared_d[w], shared_i[w]);
      current_shared = shared_i[0];
    }
    __syncthreads();
    current = current_shared;
    __syncthreads();  // shared_* are written again in the next pick
  }
}

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
  const int64_t blocks_per_cloud = (n + kKnnThreads - 1) / kKnnThreads;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "knn_direct", [&] {
    const size_t shared = static_cast<size_t>(dims) * kKnnTile * sizeof(scalar_t);
    knn_direct_kernel<scalar_t><<<static_cast<unsigned>(b * blocks_per_cloud), kKnnThreads, shared, stream>>>(
        points.data_ptr<scalar_t>(), dims, n, k, blocks_per_cloud, out.data_ptr<int64_t>());
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
    fps_kernel<scalar_t><<<static_cast<unsigned>(b), kFpsThreads, 0, stream>>>(
        p.data_ptr<scalar_t>(), n, m, s.data_ptr<int64_t>(), dist.data_ptr<scalar_t>(), out.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace qkv::cuda
