#pragma once
// Saturating arithmetic for a model's size from its options (ModelSize,
// model.h): the options may ask for a model whose counts do not fit in
// int64, and a count that wraps around would pass every later size check.
// Every operand is a non-negative count; a sum or product that does not fit
// saturates at kSaturated and stays there (kSaturated * 0 is 0, as the true
// product). Also the parameter counts of the layers several models share,
// each next to the constructor it mirrors in a comment.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/models/model.h"

namespace qkv::models {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t out = 0;
  return checked_add(a, b, out) ? out : kSaturated;
}

template <typename... Rest>
int64_t sat_add(int64_t a, int64_t b, Rest... rest) {
  return sat_add(sat_add(a, b), rest...);
}

inline int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  int64_t out = 0;
  return checked_mul(a, b, out) ? out : kSaturated;
}

template <typename... Rest>
int64_t sat_mul(int64_t a, int64_t b, Rest... rest) {
  return sat_mul(sat_mul(a, b), rest...);
}

inline int64_t sat_sum(const std::vector<int64_t>& values) {
  int64_t total = 0;
  for (const auto v : values) total = sat_add(total, v);
  return total;
}

// total += part, both fields saturating.
inline void accumulate(ModelSize& total, const ModelSize& part) {
  total.parameters = sat_add(total.parameters, part.parameters);
  total.activation_floats = sat_add(total.activation_floats, part.activation_floats);
}

// The sample's point (or token) count of a size() call, checked.
inline void check_points(const std::string& model, int64_t points) {
  if (points < 1)
    throw UsageError(model + ": a size needs at least 1 point (or token) per sample, got " + std::to_string(points));
}

// torch::nn::Linear(in, out) (with or without bias), Conv1d(in, out, 1) the same.
inline int64_t linear_parameters(int64_t in, int64_t out, bool bias = true) {
  return sat_add(sat_mul(in, out), bias ? out : 0);
}

// torch::nn::LayerNorm({channels}), layers::SyncBatchNorm(channels) and
// vn::VNLayerNorm(channels): a weight and a bias per channel (the batch norms'
// running statistics are buffers).
inline int64_t norm_parameters(int64_t channels) { return sat_mul(2, channels); }

// vn::VNLinearLeakyReLU(in, out, share, batch_norm = true): map_to_feat [out, in],
// the batch norm's weight and bias, map_to_dir [share ? 1 : out, in].
inline int64_t vn_linear_leaky_relu_parameters(int64_t in, int64_t out, bool share = false) {
  return sat_add(sat_mul(in, out), norm_parameters(out), sat_mul(in, share ? 1 : out));
}

// vn::VNStdFeature(in, normalize_frame): vn1 in -> in/2, vn2 in/2 -> in/4 (one
// direction per channel), vn_lin in/4 -> 2 or 3.
inline int64_t vn_std_feature_parameters(int64_t in, bool normalize_frame = false) {
  return sat_add(vn_linear_leaky_relu_parameters(in, in / 2), vn_linear_leaky_relu_parameters(in / 2, in / 4),
                 sat_mul(in / 4, normalize_frame ? 2 : 3));
}

// vn::VNMultiHeadAttention(channels, heads, head_dim): W_Q, W_K, W_V
// [heads * head_dim, channels] and W_O [channels, heads * head_dim].
inline int64_t vn_attention_parameters(int64_t channels, int64_t heads, int64_t head_dim) {
  return sat_mul(4, channels, sat_mul(heads, head_dim));
}

// attention::MultiHeadAttention with its options' zeros resolved (embed_dim
// D, h query heads of width r and value width dv, g key/value heads over
// sources of width kv): W_Q [h r, D], W_K [g r, kv], W_V [g dv, kv], W_O
// [D, h dv], and with bias one per output row of each.
inline int64_t multi_head_attention_parameters(int64_t embed_dim, int64_t heads, int64_t qk_dim, int64_t v_dim,
                                               int64_t kv_heads, int64_t kv_dim, bool bias) {
  const int64_t q = sat_mul(heads, qk_dim), k = sat_mul(kv_heads, qk_dim), v = sat_mul(kv_heads, v_dim),
                o = sat_mul(heads, v_dim);
  return sat_add(linear_parameters(embed_dim, q, bias), linear_parameters(kv_dim, k, bias),
                 linear_parameters(kv_dim, v, bias), linear_parameters(o, embed_dim, bias));
}

// vn::VNFeedForward(channels, hidden): lin1 [hidden, channels], the ReLU's
// directions [hidden, hidden], lin2 [channels, hidden].
inline int64_t vn_feed_forward_parameters(int64_t channels, int64_t hidden) {
  return sat_add(sat_mul(2, channels, hidden), sat_mul(hidden, hidden));
}

// vn::VNTBlock(channels, heads, head_dim, ffn_hidden, layer_norm): the
// attention, the feed-forward and, with layer_norm, two VNLayerNorms.
inline int64_t vnt_block_parameters(int64_t channels, int64_t heads, int64_t head_dim, int64_t ffn_hidden,
                                    bool layer_norm) {
  return sat_add(vn_attention_parameters(channels, heads, head_dim), vn_feed_forward_parameters(channels, ffn_hidden),
                 layer_norm ? sat_mul(2, norm_parameters(channels)) : 0);
}

}  // namespace qkv::models
