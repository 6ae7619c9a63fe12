// A build without qkv's CUDA kernels (QKV_CUDA off, or no nvcc): callers see
// kernels_built() and kernels_run_on() false and never reach the two kernels.
#include "qkv/cuda/point_kernels.h"

#include <stdexcept>

namespace qkv::cuda {

bool kernels_built() { return false; }

bool kernels_run_on(const c10::Device&) { return false; }

std::string built_architectures() { return ""; }

std::optional<GpuInfo> gpu_info(int64_t) { return std::nullopt; }

at::Tensor knn_direct(const at::Tensor&, int64_t) {
  throw std::logic_error("qkv::cuda::knn_direct: this build has no CUDA kernels (QKV_CUDA is off)");
}

at::Tensor farthest_point_sample(const at::Tensor&, int64_t, const at::Tensor&) {
  throw std::logic_error("qkv::cuda::farthest_point_sample: this build has no CUDA kernels (QKV_CUDA is off)");
}

}  // namespace qkv::cuda
