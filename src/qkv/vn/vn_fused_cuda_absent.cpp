// A build without qkv's CUDA kernels (QKV_CUDA off, or no nvcc): callers see
// cuda::kernels_run_on() false (point_kernels.h) and never reach these.
#include <stdexcept>
#include <string>

#include "qkv/vn/vn_fused_cuda.h"

namespace qkv::vn::gpu {
namespace {

[[noreturn]] void absent(const char* fn) {
  throw std::logic_error(std::string("qkv::vn::gpu::") + fn + ": this build has no CUDA kernels (QKV_CUDA is off)");
}

}  // namespace

at::Tensor vn_leaky_relu(const at::Tensor&, const at::Tensor&, double, double) { absent("vn_leaky_relu"); }
std::pair<at::Tensor, at::Tensor> vn_leaky_relu_backward(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                         double, double) {
  absent("vn_leaky_relu_backward");
}
at::Tensor vn_frame_coordinates(const at::Tensor&, const at::Tensor&) { absent("vn_frame_coordinates"); }
std::pair<at::Tensor, at::Tensor> vn_frame_coordinates_backward(const at::Tensor&, const at::Tensor&,
                                                                const at::Tensor&) {
  absent("vn_frame_coordinates_backward");
}
at::Tensor vn_norm_sums(const at::Tensor&, double) { absent("vn_norm_sums"); }
at::Tensor vn_rescale(const at::Tensor&, const ChannelPointers&) { absent("vn_rescale"); }
at::Tensor vn_rescale_backward_sums(const at::Tensor&, const at::Tensor&, const ChannelPointers&) {
  absent("vn_rescale_backward_sums");
}
at::Tensor vn_rescale_backward(const at::Tensor&, const at::Tensor&, const ChannelPointers&) {
  absent("vn_rescale_backward");
}
at::Tensor edge_norm_sums(const at::Tensor&, const at::Tensor&, const at::Tensor&, double) { absent("edge_norm_sums"); }
at::Tensor edge_conv_mean(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const ChannelPointers&) {
  absent("edge_conv_mean");
}
at::Tensor edge_conv_mean_backward_direction(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                             const at::Tensor&, const at::Tensor&, const ChannelPointers&, at::Tensor&,
                                             at::Tensor&) {
  absent("edge_conv_mean_backward_direction");
}
void edge_conv_mean_backward_feature(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                     const at::Tensor&, const at::Tensor&, const ChannelPointers&, at::Tensor&,
                                     at::Tensor&) {
  absent("edge_conv_mean_backward_feature");
}

}  // namespace qkv::vn::gpu
