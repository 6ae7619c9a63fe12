#pragma once
// Multi-head attention, batch-first, with the per-head query/key width r and
// value width d_v chosen independently of the model width D (the article's
// cache argument: the cache holds h*r key and h*d_v value numbers per position
// and layer, and W_O up-projects the concatenated heads back to D).
//
//   q_j = W_q,j x_q    [r]     W_q [h*r, D]        (rows j*r .. j*r+r-1 are head j)
//   k_j = W_k,j x_k    [r]     W_k [h*r, kv_dim]
//   v_j = W_v,j x_v    [d_v]   W_v [h*d_v, kv_dim]
//   out = W_O concat_j(attention_j) + b_O,  W_O [D, h*d_v]
// (each projection has a bias when options.bias). With kv_heads g < h
// (grouped-query attention; multi-query when g = 1, Shazeer 2019; Ainslie et
// al. 2023) W_k and W_v have g heads and query head j reads key/value head
// j / (h / g): the cache stores g heads instead of h. Attention itself is
// scaled_dot_product_attention, so masks, temperature, scale and backend are
// the SdpaOptions of sdpa.h; the module's own dropout and training mode replace
// the options' dropout/training.
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include "qkv/attention/kv_cache.h"
#include "qkv/attention/sdpa.h"

namespace qkv::attention {

struct MultiHeadAttentionOptions {
  MultiHeadAttentionOptions(int64_t embed_dim, int64_t heads) : embed_dim_(embed_dim), heads_(heads) {}
  TORCH_ARG(int64_t, embed_dim);     // D
  TORCH_ARG(int64_t, heads);         // h
  TORCH_ARG(int64_t, qk_dim) = 0;    // r per head; 0 = D / h
  TORCH_ARG(int64_t, v_dim) = 0;     // d_v per head; 0 = D / h
  TORCH_ARG(int64_t, kv_heads) = 0;  // key/value heads g, a divisor of h; 0 = h
  TORCH_ARG(int64_t, kv_dim) = 0;    // width of the key/value sources (cross-attention); 0 = D
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(double, dropout) = 0.0;  // attention dropout, active in training mode
};

struct MultiHeadAttentionOutput {
  at::Tensor output;   // [B,Nq,D]
  at::Tensor weights;  // [B,h,Nq,Nk] when options.need_weights, else undefined
};

class MultiHeadAttentionImpl : public torch::nn::Cloneable<MultiHeadAttentionImpl> {
 public:
  // Throws qkv::UsageError naming the option (non-positive sizes, D not divisible
  // by h when qk_dim or v_dim is 0, dropout outside [0,1)).
  explicit MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options);
  MultiHeadAttentionImpl(int64_t embed_dim, int64_t heads)
      : MultiHeadAttentionImpl(MultiHeadAttentionOptions(embed_dim, heads)) {}

  void reset() override;  // (re)creates the parameters: Xavier-uniform weights, zero biases
  void pretty_print(std::ostream& stream) const override;

  // query [B,Nq,D]; key [B,Nk,kv_dim], value [B,Nk,kv_dim] (self-attention: all three
  // the same tensor). masks etc. as in SdpaOptions, shaped for [B,h,Nq,Nk].
  MultiHeadAttentionOutput forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                   const SdpaOptions& options = {});

  // Self-attention of the new positions x [B,n,D] over a KV cache: projects x,
  // appends its keys/values to `layer` of the cache (cache.append), and attends the
  // n queries over all cached positions. Set options.causal for a decoder (the
  // end-aligned rule then lets new query t see cached keys up to its own position).
  // The cache needs heads = kv_heads, dk = r, dv = d_v, and takes the
  // attention options' scale, temperature and causal; masks and weights are
  // not available with a cache (UsageError). The new positions attend their
  // keys as the cache stores them (KVCache::append_and_attend).
  // (A separate name, not a forward overload: ModuleHolder::operator() needs a
  // single forward.)
  MultiHeadAttentionOutput forward_cached(const at::Tensor& x, KVCache& cache, int64_t layer,
                                          const SdpaOptions& options = {});

  // The pieces: [B,N,D] -> [B,h,N,r]; [B,N,kv_dim] -> [B,g,N,r] / [B,g,N,d_v];
  // [B,h,N,d_v] -> [B,N,D] (concatenate heads, apply W_O).
  at::Tensor project_q(const at::Tensor& x) const;
  at::Tensor project_k(const at::Tensor& x) const;
  at::Tensor project_v(const at::Tensor& x) const;
  at::Tensor merge_heads_and_project(const at::Tensor& heads) const;

  const MultiHeadAttentionOptions& options() const { return options_; }
  int64_t qk_dim() const { return r_; }
  int64_t v_dim() const { return dv_; }
  int64_t kv_dim() const { return kv_dim_; }
  int64_t kv_heads() const { return kv_heads_; }

  // Parameters (registered as w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o).
  at::Tensor w_q, w_k, w_v, w_o;
  at::Tensor b_q, b_k, b_v, b_o;  // undefined without bias

 private:
  at::Tensor split_heads(const at::Tensor& x, int64_t heads, int64_t width) const;  // [B,N,heads*w] -> [B,heads,N,w]
  SdpaOptions effective(const SdpaOptions& o) const;

  MultiHeadAttentionOptions options_;
  int64_t r_ = 0, dv_ = 0, kv_dim_ = 0, kv_heads_ = 0;
};
TORCH_MODULE(MultiHeadAttention);

}  // namespace qkv::attention
