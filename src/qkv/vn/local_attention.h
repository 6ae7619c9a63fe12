#pragma once
// Local VNAttention: each query point attends only to the k points of its
// neighbourhood graph (vnt-local; our design, not the VNT-Net paper's, whose
// VNAttention is global). For query i with neighbours idx[i, 0..k-1]:
//   s_ij = sum over channels c and axes of Q_(c)i . K_(c)j / sqrt(C),
//   a_i  = softmax over the k neighbours of s_i,   out_i = sum_j a_ij V_j,
// the paper's formula with the softmax restricted to the graph's k columns
// (d_k = C, the channel count, as in vn_attention). The scores are dot
// products, so with a rotation-invariant graph (vn::knn_indices on xyz) the
// layer is SO(3)-equivariant like the global one. Cost O(N k C) in time and
// memory, never an N x N tensor: the neighbours' keys and values are gathered
// for blocks of queries in inference (LocalAttentionOptions::chunk_elements),
// for all queries at once under autograd. Composed
// from LibTorch ops (index_select, mul, sum, softmax), so autograd (and a
// create_graph backward) works; training keeps the gathered keys and values
// of every query for backward, H N k 3d floats each a layer.
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>

#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::vn {

struct LocalAttentionOptions {
  std::optional<double> scale;  // default 1/sqrt(C); must be finite and > 0
  bool need_weights = false;    // return the weights [B, H, Nq, k] (column j: neighbour idx[.., j])
  // Without autograd, queries are processed in blocks whose gathered keys
  // (or values) hold at most this many elements (at least one query a
  // block): bounds the extra memory of inference. Under autograd all queries
  // are one block (blocks would make backward cost blocks x N).
  int64_t chunk_elements = int64_t{1} << 18;
};

// On rows, as vn_attention_rows: q [B, H, Nq, 3C], k [B, H, Nk, 3C],
// v [B, H, Nk, 3Cv], each row a point's entries in an order q and k share;
// idx [B, Nq, kn] int64 in [0, Nk) (kn >= 1; repeated indices count twice,
// as a key listed twice would). Output [B, H, Nq, 3Cv] in v's order.
// channels = C sets the default scale. UsageError on bad shapes, dtypes or
// indices out of range.
VNAttentionResult vn_local_attention_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                          const at::Tensor& idx, int64_t channels,
                                          const LocalAttentionOptions& options = {});

// The same on VN layout, as vn_attention: q [B, H, Nq, C, 3],
// k [B, H, Nk, C, 3], v [B, H, Nk, Cv, 3] -> output [B, H, Nq, Cv, 3].
VNAttentionResult vn_local_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& idx, const LocalAttentionOptions& options = {});

// Multi-headed local VNAttention: VNMultiHeadAttention's projections (the same
// parameters, names and initialisation: w_q, w_k, w_v, w_o) around
// vn_local_attention_rows. A checkpoint of one loads into the other.
class VNLocalMultiHeadAttentionImpl : public VNMultiHeadAttentionImpl {
 public:
  using VNMultiHeadAttentionImpl::VNMultiHeadAttentionImpl;
  // x [B, C, 3, N], idx [B, N, k] -> {[B, C, 3, N], weights [B, H, N, k] when need_weights}
  VNAttentionResult forward(const at::Tensor& x, const at::Tensor& idx, const LocalAttentionOptions& options = {});
};
TORCH_MODULE(VNLocalMultiHeadAttention);

// VNTBlock with local attention: x + LocalMHA(x; idx), then + VN-FFN; with
// layer_norm a VNLayerNorm before each. Parameters named as VNTBlock's.
class VNLocalTBlockImpl : public torch::nn::Module {
 public:
  VNLocalTBlockImpl(int64_t channels, int64_t heads, int64_t head_dim, int64_t ffn_hidden, bool layer_norm);
  // attention_weights, when given, receives the [B, H, N, k] weights.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& idx, at::Tensor* attention_weights = nullptr);
  VNLocalMultiHeadAttention attn{nullptr};
  VNFeedForward ffn{nullptr};
  VNLayerNorm norm_attn{nullptr}, norm_ffn{nullptr};
};
TORCH_MODULE(VNLocalTBlock);

}  // namespace qkv::vn
