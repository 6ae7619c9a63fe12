#pragma once
// Multi-head co-attention (MHCA paper, Equations 1-4): one score matrix
// between two token sets, normalised both ways. Queries q come from one
// modality (DNA methylation), keys k and values v from the other (SPECT):
//   S      = q k^T / sqrt(d_k)              per head, [B, H, Nq, Nk]
//   alpha_v = softmax over keys of S         (each query's distribution over keys)
//   alpha_q = softmax over queries of S      (each key's distribution over queries)
//   v'     = alpha_v v        [B, Nq, D]     (keys' values gathered to each query)
//   q'     = alpha_q^T q      [B, Nk, D]     (queries gathered to each key)
// Heads split the feature width D into H contiguous chunks and are
// concatenated back in the same order. d_k is a tensor so that a model can
// train it, as the authors' released code does.
#include <ATen/core/Tensor.h>

namespace qkv::attention {

struct CoAttentionResult {
  at::Tensor values_out;   // v' [B, Nq, D]
  at::Tensor queries_out;  // q' [B, Nk, D]
  at::Tensor scores;       // S [B, H, Nq, Nk]
  at::Tensor alpha_v;      // [B, H, Nq, Nk], rows (over keys) sum to 1
  at::Tensor alpha_q;      // [B, H, Nq, Nk], columns (over queries) sum to 1
};

// q [B, Nq, D], k and v [B, Nk, D], D divisible by heads; key_dim a
// one-element tensor (> 0). Dropout (rate in [0, 1)) applies to both
// attention maps when training. Throws UsageError on inconsistent shapes.
CoAttentionResult co_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                               const at::Tensor& key_dim, double dropout = 0.0, bool training = false);

}  // namespace qkv::attention
