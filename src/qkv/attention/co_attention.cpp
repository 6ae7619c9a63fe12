#include "qkv/attention/co_attention.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"

namespace qkv::attention {
namespace {

// [B, N, D] -> [B, H, N, D/H]
at::Tensor split_heads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

// [B, H, N, d] -> [B, N, H*d]
at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

}  // namespace

CoAttentionResult co_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
                               const at::Tensor& key_dim, double dropout, bool training) {
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3) throw UsageError("co_attention: q, k and v must be [B, N, D]");
  if (k.sizes() != v.sizes()) throw UsageError("co_attention: k and v must have the same shape");
  if (q.size(0) != k.size(0) || q.size(2) != k.size(2))
    throw UsageError("co_attention: q and k must share batch size and width");
  if (heads < 1 || q.size(2) % heads != 0)
    throw UsageError("co_attention: width " + std::to_string(q.size(2)) + " is not divisible by " +
                     std::to_string(heads) + " heads");
  if (key_dim.numel() != 1) throw UsageError("co_attention: key_dim must hold one value");
  if (!(dropout >= 0 && dropout < 1)) throw UsageError("co_attention: dropout must be in [0, 1)");

  auto qh = split_heads(q, heads), kh = split_heads(k, heads), vh = split_heads(v, heads);
  CoAttentionResult r;
  r.scores = torch::matmul(qh, kh.transpose(-2, -1)) / torch::sqrt(key_dim.reshape({}));
  r.alpha_v = torch::softmax(r.scores, -1);
  r.alpha_q = torch::softmax(r.scores, -2);
  auto av = r.alpha_v, aq = r.alpha_q;
  if (training && dropout > 0) {
    av = torch::dropout(av, dropout, true);
    aq = torch::dropout(aq, dropout, true);
  }
  r.values_out = merge_heads(torch::matmul(av, vh));
  r.queries_out = merge_heads(torch::matmul(aq.transpose(-2, -1), qh));
  return r;
}

}  // namespace qkv::attention
