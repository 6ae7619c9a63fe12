#include "qkv/vn/local_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/layers/weight_binding.h"
#include "qkv/vn/vn_heads.h"

namespace qkv::vn {
namespace {

void check_local_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& idx,
                        int64_t channels) {
  const std::string shapes =
      "q " + shape_of(q) + ", k " + shape_of(k) + ", v " + shape_of(v) + ", idx " + shape_of(idx);
  if (channels < 1 || q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || q.size(3) != 3 * channels ||
      k.size(3) != q.size(3) || v.size(3) % 3 != 0 || v.size(3) == 0)
    throw UsageError(
        "vn_local_attention_rows: expected q [B, H, Nq, 3C], k [B, H, Nk, 3C], v [B, H, Nk, 3Cv] with C = " +
        std::to_string(channels) + ", got " + shapes);
  for (const auto* t : {&k, &v})
    if (t->size(0) != q.size(0) || t->size(1) != q.size(1))
      throw UsageError("vn_local_attention_rows: q, k and v differ in batch or heads: " + shapes);
  if (v.size(2) != k.size(2)) throw UsageError("vn_local_attention_rows: k and v differ in their points: " + shapes);
  if (idx.dim() != 3 || idx.size(0) != q.size(0) || idx.size(1) != q.size(2) || idx.size(2) < 1)
    throw UsageError("vn_local_attention_rows: expected idx [B, Nq, k] with k >= 1, got " + shapes);
  if (idx.scalar_type() != at::kLong) throw UsageError("vn_local_attention_rows: idx must be int64");
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type() || k.device() != q.device() ||
      v.device() != q.device() || idx.device() != q.device())
    throw UsageError("vn_local_attention_rows: q, k, v and idx must share a device (and q, k, v a dtype)");
  // The gathers check the range themselves; this is for the message (and
  // .item() cannot run under a torch.func transform).
  if (idx.numel() > 0 && !under_function_transform()) {
    const auto range = at::aminmax(idx);
    const int64_t lo = std::get<0>(range).item<int64_t>(), hi = std::get<1>(range).item<int64_t>();
    if (lo < 0 || hi >= k.size(2))
      throw UsageError("vn_local_attention_rows: idx holds " + std::to_string(lo < 0 ? lo : hi) +
                       ", outside the keys' [0, " + std::to_string(k.size(2)) + ")");
  }
}

}  // namespace

VNAttentionResult vn_local_attention_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                          const at::Tensor& idx, int64_t channels,
                                          const LocalAttentionOptions& options) {
  check_local_inputs(q, k, v, idx, channels);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(channels)));
  if (!(scale > 0) || !std::isfinite(scale))
    throw UsageError("vn_local_attention_rows: scale must be finite and > 0, got " + std::to_string(scale));
  const int64_t b = q.size(0), heads = q.size(1), nq = q.size(2), nk = k.size(2), kn = idx.size(2);
  const int64_t d = q.size(3), dv = v.size(3);
  if (b == 0 || heads == 0 || nq == 0) {
    VNAttentionResult empty{at::zeros({b, heads, nq, dv}, q.options()), at::Tensor()};
    if (options.need_weights) empty.weights = at::zeros({b, heads, nq, kn}, q.options());
    return empty;
  }
  // Keys and values point-major, [B*Nk, H*3C]: one row holds a point's
  // entries for every head, so a neighbour is one contiguous read (head-major
  // rows would scatter it over H regions of the table; bench_vnt_local
  // kernel compares both). Neighbour j of query n in cloud b is row
  // b*Nk + idx[b, n, j].
  const auto key_rows = k.permute({0, 2, 1, 3}).reshape({b * nk, heads * d});
  const auto value_rows = v.permute({0, 2, 1, 3}).reshape({b * nk, heads * dv});
  const auto offsets = (at::arange(b, idx.options()) * nk).view({b, 1, 1});
  // Queries a block: its gathered keys (or values) hold at most chunk_elements
  // entries, and every block holds at least one query. Under autograd, one
  // block: every block's gathered tensors are kept for backward anyway, and
  // each block's index_select backward scatters into a zero tensor as large
  // as all the keys, so blocks would cost blocks x N in backward (a training
  // step at batch 8, 1,024 points: 53.6 s in one-query blocks, against
  // vnt's 2.6 s).
  const bool recording = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const double per_query = static_cast<double>(b) * heads * kn * std::max(d, dv);
  const int64_t block =
      recording
          ? nq
          : std::clamp<int64_t>(
                static_cast<int64_t>(static_cast<double>(std::max<int64_t>(options.chunk_elements, 1)) / per_query), 1,
                nq);
  std::vector<at::Tensor> outputs, weights;
  for (int64_t start = 0; start < nq; start += block) {
    const int64_t n = std::min(block, nq - start);
    const auto rows = (idx.narrow(1, start, n) + offsets).reshape({-1});  // [B*n*kn]
    const auto keys = key_rows.index_select(0, rows).view({b, n, kn, heads, d});
    const auto values = value_rows.index_select(0, rows).view({b, n, kn, heads, dv});
    const auto queries = q.narrow(2, start, n).permute({0, 2, 1, 3}).unsqueeze(2) * scale;  // [B, n, 1, H, 3C]
    const auto attention = at::softmax((keys * queries).sum(-1), 2);                        // [B, n, kn, H]
    outputs.push_back((attention.unsqueeze(-1) * values).sum(2));                           // [B, n, H, 3Cv]
    if (options.need_weights) weights.push_back(attention);
  }
  VNAttentionResult result;
  result.output = (outputs.size() == 1 ? outputs[0] : at::cat(outputs, 1)).permute({0, 2, 1, 3}).contiguous();
  if (options.need_weights)
    result.weights = (weights.size() == 1 ? weights[0] : at::cat(weights, 1)).permute({0, 3, 1, 2}).contiguous();
  return result;
}

VNAttentionResult vn_local_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& idx, const LocalAttentionOptions& options) {
  for (const auto* t : {&q, &k, &v})
    if (t->dim() != 5 || t->size(4) != 3)
      throw UsageError("vn_local_attention: expected q, k, v [B, H, N, C, 3], got q " + shape_of(q) + ", k " +
                       shape_of(k) + ", v " + shape_of(v));
  const int64_t channels = q.size(3), cv = v.size(3);
  auto r = vn_local_attention_rows(q.flatten(3), k.flatten(3), v.flatten(3), idx, channels, options);
  r.output = r.output.unflatten(3, {cv, 3});
  return r;
}

VNAttentionResult VNLocalMultiHeadAttentionImpl::forward(const at::Tensor& x, const at::Tensor& idx,
                                                         const LocalAttentionOptions& options) {
  if (x.dim() != 4 || x.size(2) != 3)
    throw UsageError("VNLocalMultiHeadAttention: expected x [B, C, 3, N], got " + shape_of(x));
  // The global layer's projections into rows (vn_heads.h), the local core, W^O.
  auto r = vn_local_attention_rows(project_to_heads(*w_q, x, heads), project_to_heads(*w_k, x, heads),
                                   project_to_heads(*w_v, x, heads), idx, head_dim, options);
  return {observed(*this, {x, idx}, project_from_heads(*w_o, r.output)), r.weights};
}

VNLocalTBlockImpl::VNLocalTBlockImpl(int64_t channels, int64_t heads, int64_t head_dim, int64_t ffn_hidden,
                                     bool layer_norm) {
  attn = register_module("attn", VNLocalMultiHeadAttention(channels, heads, head_dim));
  ffn = register_module("ffn", VNFeedForward(channels, ffn_hidden));
  if (layer_norm) {
    norm_attn = register_module("norm_attn", VNLayerNorm(channels));
    norm_ffn = register_module("norm_ffn", VNLayerNorm(channels));
  }
}

at::Tensor VNLocalTBlockImpl::forward(const at::Tensor& x, const at::Tensor& idx, at::Tensor* attention_weights) {
  LocalAttentionOptions options;
  options.need_weights = attention_weights != nullptr;
  auto r = attn->forward(norm_attn ? norm_attn->forward(x) : x, idx, options);
  if (attention_weights) *attention_weights = r.weights;
  const auto y = x + r.output;
  return observed(*this, {x, idx}, y + ffn->forward(norm_ffn ? norm_ffn->forward(y) : y));
}

}  // namespace qkv::vn
