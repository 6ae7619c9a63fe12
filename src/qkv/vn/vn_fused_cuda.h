#pragma once
// qkv's CUDA kernels for the fused vector-neuron ops (vn_fused.cpp): the
// leaky ReLU, the batch norm of the norms, the edge convolution's gather +
// batch norm + leaky ReLU + mean over k, and coordinates in a per-point
// frame, forward and backward. Their per-vector math is vn/vn_math.h, the
// same code the CPU loops run; vn_fused.cpp's autograd Functions call these
// for CUDA tensors and keep everything else (saved tensors, statistics and
// their reduction over ranks, second-order gradients through the composed
// versions). Built with nvcc where QKV_CUDA is on (vn_fused_cuda.cu); elsewhere
// vn_fused_cuda_absent.cpp refuses, and cuda::kernels_run_on()
// (cuda/point_kernels.h: the build has every .cu, with code for the GPU) is
// false, so the callers never reach it.
//
// Every tensor is contiguous, float32 or float64 (one type), on one CUDA
// device; VN features are [B, C, 3, M], directions [B, C or 1, 3, M], frames
// [B, 3, 3, M], idx [B, N, k] int64 with every entry in 0..N-1 (checked by
// the caller). Channel sums come back as [2, C] float64 on the device.
#include <ATen/core/Tensor.h>

#include <utility>

#include "qkv/vn/vn_fused_cuda_bodies.h"

namespace qkv::vn::gpu {

// `norm`: the batch norm of the norms per channel as pointers to [C] doubles
// on the device (vn_fused.cpp's NormAffine::pointers, as the CPU loops use
// them): n' = scale n + shift with the statistics behind it, in a training
// backward the batch's [2, C] sums of gm and gm * nhat (null otherwise), the
// leaky ReLU's slope where one follows, the norms' eps (vn::kVNEps).
using bodies::ChannelPointers;

// Leaky ReLU: y, and the gradients (of x, of d) for the gradient g of y.
at::Tensor vn_leaky_relu(const at::Tensor& x, const at::Tensor& d, double slope, double eps);
std::pair<at::Tensor, at::Tensor> vn_leaky_relu_backward(const at::Tensor& x, const at::Tensor& d, const at::Tensor& g,
                                                         double slope, double eps);

// Coordinates in a per-point frame: y, and the gradients (of x, of frame).
at::Tensor vn_frame_coordinates(const at::Tensor& x, const at::Tensor& frame);
std::pair<at::Tensor, at::Tensor> vn_frame_coordinates_backward(const at::Tensor& x, const at::Tensor& frame,
                                                                const at::Tensor& g);

// Batch norm of the norms: the channel sums of n and n^2 (training
// statistics); y = x n'/n; the channel sums of gm and gm * nhat for the
// gradient g of y; the gradient of x (norm.global non-null in training).
at::Tensor vn_norm_sums(const at::Tensor& x, double eps);
at::Tensor vn_rescale(const at::Tensor& x, const ChannelPointers& norm);
at::Tensor vn_rescale_backward_sums(const at::Tensor& x, const at::Tensor& g, const ChannelPointers& norm);
at::Tensor vn_rescale_backward(const at::Tensor& x, const at::Tensor& g, const ChannelPointers& norm);

// The edge convolution (vn/edge_conv.h): per edge p = a[q] + ac[i], d = dd[q]
// + dc[i]; the channel sums of |p| and |p|^2; out[i] = the mean over the k
// edges of leaky(rescale(p), d); backward pass 1 adds the directions'
// gradients into grad_dd (scattered to the neighbours) and grad_dc (zeroed
// [B, C, 3, N]) and returns the channel sums of gm and gm * nhat; pass 2 adds
// the features' gradients into grad_a and grad_ac.
at::Tensor edge_norm_sums(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& idx, double eps);
at::Tensor edge_conv_mean(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd, const at::Tensor& dc,
                          const at::Tensor& idx, const ChannelPointers& norm);
at::Tensor edge_conv_mean_backward_direction(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd,
                                             const at::Tensor& dc, const at::Tensor& idx, const at::Tensor& g,
                                             const ChannelPointers& norm, at::Tensor& grad_dd, at::Tensor& grad_dc);
void edge_conv_mean_backward_feature(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd,
                                     const at::Tensor& dc, const at::Tensor& idx, const at::Tensor& g,
                                     const ChannelPointers& norm, at::Tensor& grad_a, at::Tensor& grad_ac);

}  // namespace qkv::vn::gpu
