#pragma once
// qkv's CUDA kernels for point clouds: the k-nearest-neighbour graph of small
// feature spaces (xyz, xyz + normals) and farthest point sampling. Built with
// nvcc where CMake's QKV_CUDA is on (point_kernels.cu); elsewhere
// point_kernels_absent.cpp says so through kernels_built(), and the callers
// (vn::knn_indices, pointcloud::farthest_point_sample) run composed ATen code
// on a GPU instead. Each kernel has the CPU kernel of its caller as its
// reference: the same floats give the same indices, tie rules included.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

namespace qkv::cuda {

// Whether this build holds qkv's CUDA kernels (these and vn/vn_fused_cuda.h's).
bool kernels_built();

// Whether they have code for `device`'s GPU: the architectures they were built
// for (TORCH_CUDA_ARCH_LIST) cover its compute capability. False for a CPU
// device and where kernels_built() is false; callers then run composed ATen
// code, which LibTorch's own kernels serve on every GPU it supports. The
// driver is asked once per GPU.
bool kernels_run_on(const c10::Device& device);

// The architectures the kernels were built for ("9.0"); empty without them.
std::string built_architectures();

// A GPU, as qkv doctor shows it.
struct GpuInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int64_t memory_bytes = 0;
};
// nullopt where this build has no CUDA code of its own to ask with.
std::optional<GpuInfo> gpu_info(int64_t index);

// Largest k the kNN kernel keeps per query (its best list lives in registers
// and local memory); beyond it the caller's composed path runs.
constexpr int64_t kKnnMaxK = 64;
// Largest feature dimension the kNN kernel takes (direct squared differences,
// as the CPU kernel up to this size).
constexpr int64_t kKnnMaxDims = 8;

// features [B, D, N] (float32 or float64, on a CUDA device, D <= kKnnMaxDims)
// -> [B, N, k] int64: each point's k nearest, nearest first, the point itself
// first, equal distances by index. Distances are sums of squared differences
// over the dims in order, without fused multiply-adds, as on the CPU.
at::Tensor knn_direct(const at::Tensor& features, int64_t k);

// points [B, N, 3] (float32 or float64, on a CUDA device), starts [B] int64
// on the same device -> [B, m] int64: farthest point sampling from each start,
// ties to the lowest index, as on the CPU.
at::Tensor farthest_point_sample(const at::Tensor& points, int64_t m, const at::Tensor& starts);

}  // namespace qkv::cuda
