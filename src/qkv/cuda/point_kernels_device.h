#pragma once
// The kNN and FPS kernels themselves, with their launch shapes: CUDA C++ that
// point_kernels.cu compiles with nvcc and launches, and that
// tests/cuda/kernels_on_cpu_test.cpp compiles with the host compiler under
// tests/support/cuda_on_cpu.h (a block's threads as CPU threads, its
// barriers and warp shuffles), so that every machine runs the kernels against
// their CPU references, not only one with a GPU. Kept to what both compile:
// plain arithmetic, __shared__ arrays, __syncthreads, __shfl_down_sync, and
// dynamic_shared_memory() below.
//
// The kernels sit in an unnamed namespace: the two compilations define them
// differently (a GPU launch stub, a CPU function), and each must keep its own.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "qkv/cuda/point_kernels.h"

namespace qkv::cuda {
namespace {

#if defined(__CUDACC__)
// The block's dynamic shared memory (the launch's third argument).
__device__ inline unsigned char* dynamic_shared_memory() {
  extern __shared__ unsigned char shared_bytes[];
  return shared_bytes;
}
#endif

struct LaunchShape {
  unsigned blocks = 0, threads = 0;
  size_t shared_bytes = 0;
};

// kNN: one thread per query; the cloud's points pass through shared memory in
// tiles that every thread of the block scans.
constexpr int kKnnThreads = 128;
constexpr int kKnnTile = 256;

inline int64_t knn_blocks_per_cloud(int64_t n) { return (n + kKnnThreads - 1) / kKnnThreads; }

inline LaunchShape knn_launch_shape(int64_t b, int64_t dims, int64_t n, size_t scalar_bytes) {
  return {static_cast<unsigned>(b * knn_blocks_per_cloud(n)), kKnnThreads,
          static_cast<size_t>(dims) * kKnnTile * scalar_bytes};
}

template <typename T>
__global__ void knn_direct_kernel(const T* __restrict__ points, int64_t dims, int64_t n, int64_t k,
                                  int64_t blocks_per_cloud, int64_t* __restrict__ out) {
  T* tile = reinterpret_cast<T*>(dynamic_shared_memory());  // [dims, kKnnTile]
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
    const int64_t len = n - t0 < kKnnTile ? n - t0 : kKnnTile;
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
      if (d != d) d = std::numeric_limits<T>::infinity();       // not a number: after every other (select_k_nearest)
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

inline LaunchShape fps_launch_shape(int64_t b) { return {static_cast<unsigned>(b), kFpsThreads, 0}; }

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

}  // namespace
}  // namespace qkv::cuda
