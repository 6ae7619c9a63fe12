#pragma once
// The edge convolution of (VN-)DGCNN without its edge-sized linear work.
// vn::edge_features builds [x_j - x_i, x_i] per edge; a VNLinearLeakyReLU on
// it multiplies every edge by W = [W_a | W_b]. The same product is
// W_a x_j + (W_b - W_a) x_i: two products per point (k times fewer FLOPs)
// whose results are gathered per edge, and no [B, 2C, 3, N, k] input is ever
// built or saved for backward. Batch norm and the leaky ReLU act on the same
// edge tensors as before. Equal to the composed version up to rounding
// (tests/vn/models_test.cpp, float64 and float32, values and gradients).
#include <ATen/core/Tensor.h>

#include "qkv/vn/vn_layers.h"

namespace qkv::vn {

// a [B, C, 3, N] at each point's neighbours idx [B, N, k] (int64) -> [B, C, 3, N, k].
at::Tensor gather_neighbours(const at::Tensor& a, const at::Tensor& idx);

// conv->forward(edge_features(x, idx, false)) for x [B, C, 3, N], idx [B, N, k];
// conv takes 2C input channels.
at::Tensor factorised_edge_conv(VNLinearLeakyReLUImpl& conv, const at::Tensor& x, const at::Tensor& idx);

// vn_mean_pool(factorised_edge_conv(conv, x, idx)): [B, C_out, 3, N]. The
// fused pass (edge_conv_mean) when conv has batch norm and one direction per
// channel; the composed one otherwise. Counts the batch in the batch norm's
// num_batches_tracked as its forward does.
at::Tensor factorised_edge_conv_mean(VNLinearLeakyReLUImpl& conv, const at::Tensor& x, const at::Tensor& idx);

// The mean over the k neighbours of vn_leaky_relu(vn_batch_norm(p), d) per edge,
// with p = A[idx] + Ac and d = D[idx] + Dc: A = feat_towards, Ac = feat_centre,
// D = dir_towards, Dc = dir_centre, all [B, C, 3, N]; idx [B, N, k] int64.
// The batch-norm arguments are vn_batch_norm's. Float32 and float64 on the
// CPU, or on a GPU where the build has qkv's CUDA kernels (vn_fused_cuda.h):
// one pass forward (two in training: the norms' statistics first) and two
// backward, recomputing the edges (vn_fused.cpp; first derivatives only);
// elsewhere edge_conv_mean_composed.
at::Tensor edge_conv_mean(const at::Tensor& feat_towards, const at::Tensor& feat_centre, const at::Tensor& dir_towards,
                          const at::Tensor& dir_centre, const at::Tensor& idx, const at::Tensor& weight,
                          const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                          bool training, double momentum, double eps, RankSum* group, double negative_slope);
// The same from gather_neighbours, vn_batch_norm, vn_leaky_relu and
// vn_mean_pool: the reference.
at::Tensor edge_conv_mean_composed(const at::Tensor& feat_towards, const at::Tensor& feat_centre,
                                   const at::Tensor& dir_towards, const at::Tensor& dir_centre, const at::Tensor& idx,
                                   const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& running_mean,
                                   const at::Tensor& running_var, bool training, double momentum, double eps,
                                   RankSum* group, double negative_slope);

}  // namespace qkv::vn
