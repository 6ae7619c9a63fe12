#pragma once
// Vector-neuron modules: thin owners of parameters around the kernels of
// vn_ops.h. Shapes as there: [B, C, 3, N] (or [B, C, 3, N, k] on graphs).
// Every module is SO(3)-equivariant in its first input, except VNStdFeature,
// whose first output is invariant (tests/vn checks each).
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <utility>

#include "qkv/layers/part_hooks.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/layers/weight_binding.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::vn {

// The VN layers' constructor defaults, written here once: the constructors
// below and the Python bindings (qkv.nn) read them.
struct VNDefaults {
  static constexpr bool share = false;            // a learned direction per channel (the reference code's)
  static constexpr double negative_slope = 0.2;   // the reference code (vnn)
  static constexpr double momentum = 0.1;         // batch norm: LibTorch's BatchNorm
  static constexpr double eps = 1e-5;             // batch and layer norm: LibTorch's
  static constexpr bool batch_norm = true;        // VNLinearLeakyReLU: the reference code's
  static constexpr bool normalize_frame = false;  // VNStdFeature: the reference code's three predicted vectors
  static constexpr bool with_cross = false;  // VNEdgeConv: [x_j - x_i, x_i] as Vector Neurons (the paper is silent)
  static constexpr bool layer_norm = false;  // VNTBlock: the paper's block has none
};

// Channel mixing W x, W [out, in], no bias. Initialised like nn::Linear.
class VNLinearImpl : public torch::nn::Module {
 public:
  VNLinearImpl(int64_t in_channels, int64_t out_channels);
  at::Tensor forward(const at::Tensor& x) { return observed(*this, {x}, vn_linear(x, live(weight))); }
  at::Tensor weight;
};
TORCH_MODULE(VNLinear);

// Leaky ReLU with a learned direction: d = U x, one direction per output
// channel, or one shared by all channels (share = true).
class VNLeakyReLUImpl : public torch::nn::Module {
 public:
  VNLeakyReLUImpl(int64_t channels, bool share = VNDefaults::share, double negative_slope = VNDefaults::negative_slope);
  at::Tensor forward(const at::Tensor& x);
  VNLinear map_to_dir{nullptr};
  double negative_slope;
};
TORCH_MODULE(VNLeakyReLU);

// Batch norm of the vector norms; directions are kept. Works for any number of
// trailing dims (points, neighbours), like BatchNorm1d/2d on [B, C, ...]:
// vn_batch_norm with SyncBatchNorm's parameters, buffers and counter (its
// statistics over all ranks in distributed training).
class VNBatchNormImpl : public layers::SyncBatchNormImpl {
 public:
  explicit VNBatchNormImpl(int64_t channels, double momentum = VNDefaults::momentum, double eps = VNDefaults::eps)
      : SyncBatchNormImpl(channels, momentum, eps) {}
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(VNBatchNorm);

// Layer norm of the vector norms over the channels of each point.
class VNLayerNormImpl : public torch::nn::Module {
 public:
  explicit VNLayerNormImpl(int64_t channels, double eps = VNDefaults::eps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight, bias;
  double eps;
};
TORCH_MODULE(VNLayerNorm);

// Vector Neurons' VNLinearLeakyReLU: p = BN(W x), d = U x (direction from the
// block's input, not from p), output leaky-ReLU(p; d).
class VNLinearLeakyReLUImpl : public torch::nn::Module {
 public:
  VNLinearLeakyReLUImpl(int64_t in_channels, int64_t out_channels, bool share = VNDefaults::share,
                        double negative_slope = VNDefaults::negative_slope, bool batch_norm = VNDefaults::batch_norm);
  at::Tensor forward(const at::Tensor& x);
  // The same on [x; m] with m [B, C_m, 3, 1] broadcast over the points (the
  // invariant layer's mean over N): W [x; m] = W_x x + W_m m, the second term
  // once per cloud, so the concatenation is never built.
  at::Tensor forward_with_constant(const at::Tensor& x, const at::Tensor& m);
  VNLinear map_to_feat{nullptr}, map_to_dir{nullptr};
  VNBatchNorm batchnorm{nullptr};  // null when batch_norm is false
  double negative_slope;

 private:
  // batch norm and leaky ReLU of both products, stacked as [p; d] along dim 1.
  at::Tensor activate(const at::Tensor& both);
};
TORCH_MODULE(VNLinearLeakyReLU);

// Max pool over the last dim, of vectors picked by <x, d> with a learned
// direction d = U x: [B, C, 3, N] -> [B, C, 3].
class VNMaxPoolImpl : public torch::nn::Module {
 public:
  explicit VNMaxPoolImpl(int64_t channels);
  at::Tensor forward(const at::Tensor& x);
  VNLinear map_to_dir{nullptr};
};
TORCH_MODULE(VNMaxPool);

// The invariant layer (Vector Neurons' "std feature"): two VNLinearLeakyReLU
// and a VNLinear predict an equivariant 3x3 frame F(x) per point; x projected
// on it, <x_c, F_j>, is invariant since both rotate together.
// normalize_frame: Gram-Schmidt on two predicted vectors plus their cross
// product (an orthonormal, right-handed frame) instead of three free vectors;
// it needs in_channels >= 8, so that in_channels / 4 channels predict two
// independent vectors. Without it, fewer than 12 give a frame of fewer than
// three independent vectors, as in the reference code.
// Coordinates of every vector channel in a per-point frame: x [B, C, 3, ...],
// frame [B, 3, 3, ...] (dim 1 frame vector, dim 2 xyz) -> [B, C, 3, ...] with
// dim 2 indexing the frame vectors. Invariant when x and frame rotate together.
// Float32/float64 on the CPU, or on a GPU where the build has qkv's CUDA
// kernels: one pass forward and one backward (vn_fused.cpp); elsewhere, and as
// the reference, the composed version: a batched matmul.
at::Tensor vn_frame_coordinates(const at::Tensor& x, const at::Tensor& frame);
at::Tensor vn_frame_coordinates_composed(const at::Tensor& x, const at::Tensor& frame);

class VNStdFeatureImpl : public torch::nn::Module {
 public:
  VNStdFeatureImpl(int64_t in_channels, bool normalize_frame = VNDefaults::normalize_frame,
                   bool share = VNDefaults::share, double negative_slope = VNDefaults::negative_slope);
  // x [B, C, 3, ...] -> {invariant [B, C, 3, ...] (dim 2 indexes the frame
  // vectors now), frame [B, 3, 3, ...] (dim 1 frame vector, dim 2 xyz)}.
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& x);
  // forward(cat({x, x.mean(-1, true).expand_as(x)}, 1)) for x [B, C, 3, N] and
  // in_channels = 2C, without the concatenation: vn1's product with the mean
  // half is one vector per cloud (half of the layer's largest GEMM), and the
  // mean's coordinates are one GEMM over the frames.
  std::pair<at::Tensor, at::Tensor> forward_with_mean(const at::Tensor& x);
  VNLinearLeakyReLU vn1{nullptr}, vn2{nullptr};
  VNLinear vn_lin{nullptr};
  bool normalize_frame;
};
TORCH_MODULE(VNStdFeature);

// The input block of VNT-Net ("linear dependency problem"): edge features on
// a kNN graph of the points, VNLinearLeakyReLU to C channels, mean over the
// neighbours. One xyz channel would otherwise stay one direction per point.
class VNEdgeConvImpl : public torch::nn::Module {
 public:
  VNEdgeConvImpl(int64_t in_channels, int64_t out_channels, int64_t k, bool with_cross = VNDefaults::with_cross,
                 double negative_slope = VNDefaults::negative_slope);
  // x [B, C_in, 3, N]; idx [B, N, k] from knn_indices, k this module's (a
  // UsageError otherwise) -> [B, C_out, 3, N].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& idx);
  VNLinearLeakyReLU conv{nullptr};
  int64_t k;
  bool with_cross;
};
TORCH_MODULE(VNEdgeConv);

// Multi-headed VNAttention: per-head VN projections W_i^Q, W_i^K, W_i^V of the
// C input channels to head_dim channels (stored stacked as one VNLinear each),
// VNAttention per head, concat, W^O back to C channels. The residual is the
// caller's (VNTBlock).
class VNMultiHeadAttentionImpl : public torch::nn::Module {
 public:
  VNMultiHeadAttentionImpl(int64_t channels, int64_t heads, int64_t head_dim);
  // x [B, C, 3, N] -> {[B, C, 3, N], weights [B, H, N, N] when need_weights}
  VNAttentionResult forward(const at::Tensor& x, const attention::SdpaOptions& options = {});
  VNLinear w_q{nullptr}, w_k{nullptr}, w_v{nullptr}, w_o{nullptr};
  int64_t heads, head_dim;
};
TORCH_MODULE(VNMultiHeadAttention);

// A multi-head VN attention's projection into its heads' rows ([B, C, 3, N]
// -> [B, H, N, 3d]) and back (vn_heads.h): fused, or run as the VNLinear part
// it is when a forward hook is on that part (layers/part_hooks.h).
at::Tensor project_to_heads(VNLinearImpl& projection, const at::Tensor& x, int64_t heads);
at::Tensor project_from_heads(VNLinearImpl& projection, const at::Tensor& rows);

// VN-FFN: f_lin(VN-ReLU(f_lin(x; W1)); W2); the ReLU's direction is learned
// per hidden channel.
class VNFeedForwardImpl : public torch::nn::Module {
 public:
  VNFeedForwardImpl(int64_t channels, int64_t hidden);
  at::Tensor forward(const at::Tensor& x);
  VNLinear lin1{nullptr}, lin2{nullptr};
  VNLeakyReLU relu{nullptr};
};
TORCH_MODULE(VNFeedForward);

// The basic block of VNT-Net: x + MHA(x), then + FFN. With layer_norm, a
// VNLayerNorm before each (pre-norm); the paper has none.
class VNTBlockImpl : public torch::nn::Module {
 public:
  VNTBlockImpl(int64_t channels, int64_t heads, int64_t head_dim, int64_t ffn_hidden,
               bool layer_norm = VNDefaults::layer_norm);
  // attention_weights, when given, receives the [B, H, N, N] weights.
  at::Tensor forward(const at::Tensor& x, at::Tensor* attention_weights = nullptr);
  VNMultiHeadAttention attn{nullptr};
  VNFeedForward ffn{nullptr};
  VNLayerNorm norm_attn{nullptr}, norm_ffn{nullptr};
};
TORCH_MODULE(VNTBlock);

}  // namespace qkv::vn
