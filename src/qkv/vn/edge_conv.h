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

}  // namespace qkv::vn
