#pragma once
// Vector-neuron kernels (Deng et al., "Vector Neurons", 2021; VNT-Net, 2022) as
// free functions. A VN feature is a list of C 3-D vectors per point:
//   [B, C, 3, N]      per point,
//   [B, C, 3, N, k]   per edge of a kNN graph,
//   [B, C, 3]         per cloud (after pooling).
// Dim 1 is the channel, dim 2 the xyz axis; a rotation R acts on dim 2
// (x' = R x for every channel), and every op here commutes with it: channel
// mixing never touches dim 2, and nonlinearities only use rotation-invariant
// quantities (norms, dot products).
#include <ATen/core/Tensor.h>

#include "qkv/attention/sdpa.h"

namespace qkv {
class RankSum;
}

namespace qkv::vn {

// The eps the reference implementation adds to norms: zero vectors give
// finite outputs and gradients instead of NaN.
constexpr double kVNEps = 1e-6;

// UsageError "<what>: expected a VN feature [B, C, 3, ...], got <shape>"
// unless x has that shape.
void require_vn(const at::Tensor& x, const char* what);

// W x over channels: weight [C_out, C_in], x [B, C_in, 3, ...] -> [B, C_out, 3, ...].
// One batched matmul; no bias (a bias vector would not rotate).
at::Tensor vn_linear(const at::Tensor& x, const at::Tensor& weight);

// Vector leaky ReLU: where <x, d> < 0, remove the component of x along the
// direction d; blend with x by `negative_slope`. d is [B, C or 1, 3, ...]
// (shared across channels when it has one channel). Float32 and float64 with
// d of x's trailing sizes, on the CPU or on a GPU where the build has qkv's
// CUDA kernels (vn_fused_cuda.h): one fused pass forward and backward (an
// autograd Function, vn_fused.cpp; first derivatives only); elsewhere the
// composed version.
at::Tensor vn_leaky_relu(const at::Tensor& x, const at::Tensor& direction, double negative_slope, double eps = kVNEps);
// The same from LibTorch ops: the reference.
at::Tensor vn_leaky_relu_composed(const at::Tensor& x, const at::Tensor& direction, double negative_slope,
                                  double eps = kVNEps);

// Batch norm of the vector norms, directions kept: n = vn_norm(x), y = x n'/n
// with n' = weight (n - mean) / sqrt(var + eps) + bias, statistics per
// channel over batch and trailing dims (training: the batch's, summed over
// `group`'s ranks when given, running statistics updated with the unbiased
// variance; eval: the running ones), as layers::batch_norm on the norms.
// Float32 and float64 on the CPU, or on a GPU where the build has qkv's CUDA
// kernels: two fused passes forward and backward, norms recomputed instead of
// stored (vn_fused.cpp); elsewhere the composed version.
at::Tensor vn_batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double momentum,
                         double eps, RankSum* group);
// vn_rescale(x, n, layers::batch_norm(n, ...)): the reference.
at::Tensor vn_batch_norm_composed(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                  const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                                  double momentum, double eps, RankSum* group);

// <a, b> over the xyz axis, [B, C, 3, ...] -> [B, C, 1, ...]. Every norm and
// dot product goes through it: a plain mul + sum is 17x faster forward and
// 25x faster with backward than torch::linalg_vector_norm or a sum of three
// slice products (16x16x3x256x20 floats; see docs/vnt.md).
at::Tensor vn_dot(const at::Tensor& a, const at::Tensor& b);

// Euclidean norm of every vector, [B, C, 3, ...] -> [B, C, ...], as
// sqrt(|x|^2 + eps^2): finite gradient at 0, unlike |x| + eps through sqrt.
at::Tensor vn_norm(const at::Tensor& x, double eps = kVNEps);

// x rescaled so each vector's norm becomes new_norm (norm = vn_norm(x)).
at::Tensor vn_rescale(const at::Tensor& x, const at::Tensor& norm, const at::Tensor& new_norm);

// Mean over the last dim (points, or neighbours): equivariant.
at::Tensor vn_mean_pool(const at::Tensor& x);

// Indices of the k nearest neighbours of every point, [B, N, k] int64, nearest
// first, the point itself always first (before a duplicate of it of lower
// index, and whatever the rounding of expanded distances). features [B, D, N]: xyz
// (D = 3) or flattened VN features (D = 3C) for dynamic graphs. Squared
// Euclidean distances are rotation invariant, so the graph is too.
// Throws DataError when N < k. On the CPU, float32 and float64: for D <= 8
// direct squared differences, otherwise BLAS products of blocks of queries
// (up to 4 Mi distances, whole clouds where they fit) against all N points;
// never B x N x N; the k best per query kept sorted, equal distances ordered
// by index, so the result is deterministic. Clouds of xyz (D = 3) from 1,024
// points on: a k-d tree per cloud (spatial/kd_tree.h), O(N log N), the same
// indices bit for bit.
at::Tensor knn_indices(const at::Tensor& features, int64_t k);
// The same from every distance (on the CPU, whatever the size): the
// reference of the tree and the baseline of its benchmark.
at::Tensor knn_indices_exhaustive(const at::Tensor& features, int64_t k);

// Edge features of a kNN graph: x [B, C, 3, N], idx [B, N, k] ->
// [B, 2C (3C with cross), 3, N, k] = [nbr - ctr, ctr (, nbr x ctr)].
// The cross product is SO(3)-equivariant (not O(3)): it adds directions that
// no linear map of the inputs can produce.
// On the CPU one pass forward and one scatter per channel backward (an
// autograd Function; first derivatives only); elsewhere the composed version.
at::Tensor edge_features(const at::Tensor& x, const at::Tensor& idx, bool with_cross);
// The same from LibTorch ops (index_select, expand, cat): the reference.
at::Tensor edge_features_composed(const at::Tensor& x, const at::Tensor& idx, bool with_cross);

struct VNAttentionResult {
  at::Tensor output;   // [B, H, Nq, Cv, 3]
  at::Tensor weights;  // [B, H, Nq, Nk] when options.need_weights
};

// VNAttention (VNT-Net, Sec. 3): softmax(sum_c Q_(c) K_(c)^T / sqrt(d_k)) V with
// q [B, H, Nq, C, 3], k [B, H, Nk, C, 3], v [B, H, Nk, Cv, 3] and d_k = C (the
// channel size, not C*3). The sum over channels of the N x 3 by 3 x N products
// is one product of the flattened [N, 3C] matrices, so the attention core's
// kernel (tiled, O(N) memory on the CPU) computes it. options.scale overrides
// 1/sqrt(C).
VNAttentionResult vn_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               attention::SdpaOptions options = {});

}  // namespace qkv::vn
