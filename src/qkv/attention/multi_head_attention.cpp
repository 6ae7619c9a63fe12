#include "qkv/attention/multi_head_attention.h"

#include <torch/torch.h>

#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/layers/weight_binding.h"

namespace qkv::attention {
namespace {

[[noreturn]] void mha_fail(const std::string& what) { throw UsageError("MultiHeadAttention: " + what); }

void check_input(const char* fn, const char* name, const at::Tensor& x, int64_t width, const char* wname) {
  if (!x.defined() || x.dim() != 3 || x.size(2) != width)
    throw UsageError(std::string("MultiHeadAttention::") + fn + ": " + name + " must be [B,N," + wname + "] with " +
                     wname + " = " + std::to_string(width) + ", got " + (x.defined() ? shape_of(x) : "undefined"));
}

}  // namespace

MultiHeadAttentionImpl::MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options) : options_(options) {
  const int64_t D = options_.embed_dim(), h = options_.heads();
  if (D < 1) mha_fail("embed_dim must be >= 1, got " + std::to_string(D));
  if (h < 1) mha_fail("heads must be >= 1, got " + std::to_string(h));
  if (options_.qk_dim() < 0) mha_fail("qk_dim must be >= 0 (0 = embed_dim / heads)");
  if (options_.v_dim() < 0) mha_fail("v_dim must be >= 0 (0 = embed_dim / heads)");
  if (options_.kv_dim() < 0) mha_fail("kv_dim must be >= 0 (0 = embed_dim)");
  if ((options_.qk_dim() == 0 || options_.v_dim() == 0) && D % h != 0)
    mha_fail("embed_dim " + std::to_string(D) + " is not divisible by heads " + std::to_string(h) +
             "; set qk_dim and v_dim explicitly");
  if (!(options_.dropout() >= 0 && options_.dropout() < 1))
    mha_fail("dropout must be in [0, 1), got " + std::to_string(options_.dropout()));
  if (options_.kv_heads() < 0 || (options_.kv_heads() > 0 && h % options_.kv_heads() != 0))
    mha_fail("kv_heads must divide heads " + std::to_string(h) + " (0 = heads), got " +
             std::to_string(options_.kv_heads()));
  kv_heads_ = options_.kv_heads() > 0 ? options_.kv_heads() : h;
  r_ = options_.qk_dim() > 0 ? options_.qk_dim() : D / h;
  dv_ = options_.v_dim() > 0 ? options_.v_dim() : D / h;
  kv_dim_ = options_.kv_dim() > 0 ? options_.kv_dim() : D;
  reset();
}

void MultiHeadAttentionImpl::reset() {
  const int64_t D = options_.embed_dim(), h = options_.heads();
  auto xavier = [](int64_t out, int64_t in) {
    const double a = std::sqrt(6.0 / static_cast<double>(in + out));
    return at::empty({out, in}).uniform_(-a, a);
  };
  w_q = register_parameter("w_q", xavier(h * r_, D));
  w_k = register_parameter("w_k", xavier(kv_heads_ * r_, kv_dim_));
  w_v = register_parameter("w_v", xavier(kv_heads_ * dv_, kv_dim_));
  w_o = register_parameter("w_o", xavier(D, h * dv_));
  if (options_.bias()) {
    b_q = register_parameter("b_q", at::zeros({h * r_}));
    b_k = register_parameter("b_k", at::zeros({kv_heads_ * r_}));
    b_v = register_parameter("b_v", at::zeros({kv_heads_ * dv_}));
    b_o = register_parameter("b_o", at::zeros({D}));
  } else {
    b_q = b_k = b_v = b_o = at::Tensor();
  }
}

void MultiHeadAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "qkv::attention::MultiHeadAttention(embed_dim=" << options_.embed_dim() << ", heads=" << options_.heads()
         << ", kv_heads=" << kv_heads_ << ", qk_dim=" << r_ << ", v_dim=" << dv_ << ", kv_dim=" << kv_dim_
         << ", bias=" << options_.bias() << ", dropout=" << options_.dropout() << ")";
}

at::Tensor MultiHeadAttentionImpl::split_heads(const at::Tensor& x, int64_t heads, int64_t width) const {
  return x.view({x.size(0), x.size(1), heads, width}).transpose(1, 2);
}

at::Tensor MultiHeadAttentionImpl::project_q(const at::Tensor& x) const {
  check_input("project_q", "x", x, options_.embed_dim(), "D");
  return split_heads(at::linear(x, live(w_q), live(b_q)), options_.heads(), r_);
}

at::Tensor MultiHeadAttentionImpl::project_k(const at::Tensor& x) const {
  check_input("project_k", "x", x, kv_dim_, "kv_dim");
  return split_heads(at::linear(x, live(w_k), live(b_k)), kv_heads_, r_);
}

at::Tensor MultiHeadAttentionImpl::project_v(const at::Tensor& x) const {
  check_input("project_v", "x", x, kv_dim_, "kv_dim");
  return split_heads(at::linear(x, live(w_v), live(b_v)), kv_heads_, dv_);
}

at::Tensor MultiHeadAttentionImpl::merge_heads_and_project(const at::Tensor& heads) const {
  if (!heads.defined() || heads.dim() != 4 || heads.size(1) != options_.heads() || heads.size(3) != dv_)
    throw UsageError("MultiHeadAttention::merge_heads_and_project: heads must be [B,h,N,d_v] = [B, " +
                     std::to_string(options_.heads()) + ", N, " + std::to_string(dv_) + "], got " +
                     (heads.defined() ? shape_of(heads) : "undefined"));
  at::Tensor cat = heads.transpose(1, 2).reshape({heads.size(0), heads.size(2), options_.heads() * dv_});
  return at::linear(cat, live(w_o), live(b_o));
}

SdpaOptions MultiHeadAttentionImpl::effective(const SdpaOptions& o) const {
  SdpaOptions e = o;
  e.dropout = options_.dropout();
  e.training = is_training();
  return e;
}

MultiHeadAttentionOutput MultiHeadAttentionImpl::forward(const at::Tensor& query, const at::Tensor& key,
                                                         const at::Tensor& value, const SdpaOptions& options) {
  check_input("forward", "query", query, options_.embed_dim(), "D");
  check_input("forward", "key", key, kv_dim_, "kv_dim");
  check_input("forward", "value", value, kv_dim_, "kv_dim");
  if (key.size(0) != query.size(0) || value.size(0) != query.size(0))
    throw UsageError("MultiHeadAttention::forward: query, key and value must share the batch size");
  if (key.size(1) != value.size(1))
    throw UsageError("MultiHeadAttention::forward: key has " + std::to_string(key.size(1)) +
                     " positions but value has " + std::to_string(value.size(1)));
  at::Tensor k = project_k(key), v = project_v(value);
  if (kv_heads_ < options_.heads()) {  // each kv head serves h / g query heads
    k = k.repeat_interleave(options_.heads() / kv_heads_, 1);
    v = v.repeat_interleave(options_.heads() / kv_heads_, 1);
  }
  SdpaResult r = scaled_dot_product_attention(project_q(query), k, v, effective(options));
  return {observed(*this, {query, key, value}, merge_heads_and_project(r.output)), r.weights};
}

MultiHeadAttentionOutput MultiHeadAttentionImpl::forward_cached(const at::Tensor& x, KVCache& cache, int64_t layer,
                                                                const SdpaOptions& options) {
  check_input("forward_cached", "x", x, options_.embed_dim(), "D");
  if (kv_dim_ != options_.embed_dim())
    throw UsageError("MultiHeadAttention::forward_cached: the cached (self-attention) form needs kv_dim == embed_dim");
  if (cache.heads() != kv_heads_ || cache.key_dim() != r_ || cache.value_dim() != dv_ || cache.batch() != x.size(0))
    throw UsageError("MultiHeadAttention::forward_cached: cache is [B=" + std::to_string(cache.batch()) +
                     ", H=" + std::to_string(cache.heads()) + ", dk=" + std::to_string(cache.key_dim()) +
                     ", dv=" + std::to_string(cache.value_dim()) +
                     "] but this module needs [B=" + std::to_string(x.size(0)) + ", H=" + std::to_string(kv_heads_) +
                     ", dk=" + std::to_string(r_) + ", dv=" + std::to_string(dv_) + "]");
  if (options.bool_mask.defined() || options.float_mask.defined() || options.key_padding_mask.defined() ||
      options.need_weights)
    throw UsageError("MultiHeadAttention::forward_cached: masks and attention weights are not available with a cache");
  if (!(options.temperature > 0) || (options.scale && !(*options.scale > 0)))
    throw UsageError("MultiHeadAttention::forward_cached: scale and temperature must be > 0");
  // The cache holds plain values, no autograd graph: gradients would reach
  // the output projection alone, silently. Decoding runs without them.
  if (at::GradMode::is_enabled()) {
    bool wants_grad = x.requires_grad();
    for (const auto& p : parameters()) wants_grad = wants_grad || p.requires_grad();
    if (wants_grad)
      throw UsageError(
          "MultiHeadAttention::forward_cached: a KV cache keeps no autograd graph (gradients would reach W_O "
          "alone); decode under torch.no_grad() (C++: torch::NoGradGuard), train with forward and a causal mask");
  }
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(r_));
  at::Tensor out = cache.append_and_attend(layer, project_q(x), project_k(x), project_v(x), scale / options.temperature,
                                           options.causal);
  return {observed(*this, {x}, merge_heads_and_project(out)), at::Tensor()};
}

}  // namespace qkv::attention
