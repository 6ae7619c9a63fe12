#include "qkv/attention/scores.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/weight_binding.h"

namespace qkv::attention {
namespace {

void check_sources(const char* fn, const at::Tensor& x_q, const at::Tensor& x_k) {
  if (!x_q.defined() || x_q.dim() != 3)
    throw UsageError(std::string(fn) + ": x_q must be 3-D [B,Nq,Dq], got " +
                     (x_q.defined() ? shape_of(x_q) : "undefined"));
  if (!x_k.defined() || x_k.dim() != 3)
    throw UsageError(std::string(fn) + ": x_k must be 3-D [B,Nk,Dk], got " +
                     (x_k.defined() ? shape_of(x_k) : "undefined"));
  if (x_q.size(0) != x_k.size(0))
    throw UsageError(std::string(fn) + ": x_k batch " + std::to_string(x_k.size(0)) + " differs from x_q's " +
                     std::to_string(x_q.size(0)));
}

void check_weight(const char* fn, const char* name, const at::Tensor& w, int64_t cols, const char* cname) {
  if (!w.defined() || w.dim() != 2 || w.size(1) != cols)
    throw UsageError(std::string(fn) + ": " + name + " must be [r," + cname + "] with " + cname + " = " +
                     std::to_string(cols) + ", got " + (w.defined() ? shape_of(w) : "undefined"));
}

}  // namespace

at::Tensor dot_product_scores(const at::Tensor& q, const at::Tensor& k, std::optional<double> scale) {
  const char* fn = "dot_product_scores";
  if (!q.defined() || q.dim() != 3) throw UsageError(std::string(fn) + ": q must be 3-D [B,Nq,r]");
  if (!k.defined() || k.dim() != 3) throw UsageError(std::string(fn) + ": k must be 3-D [B,Nk,r]");
  if (k.size(0) != q.size(0) || k.size(2) != q.size(2))
    throw UsageError(std::string(fn) + ": k " + shape_of(k) + " does not match q " + shape_of(q) + " in B or r");
  if (scale && !(*scale > 0)) throw UsageError(std::string(fn) + ": scale must be > 0");
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, q.size(2))));
  return at::matmul(q, k.transpose(1, 2)) * s;
}

at::Tensor bilinear_scores(const at::Tensor& x_q, const at::Tensor& x_k, const at::Tensor& A) {
  const char* fn = "bilinear_scores";
  check_sources(fn, x_q, x_k);
  if (!A.defined() || A.dim() != 2 || A.size(0) != x_q.size(2) || A.size(1) != x_k.size(2))
    throw UsageError(std::string(fn) + ": A must be [Dq,Dk] = [" + std::to_string(x_q.size(2)) + ", " +
                     std::to_string(x_k.size(2)) + "], got " + (A.defined() ? shape_of(A) : "undefined"));
  return at::matmul(at::matmul(x_q, A), x_k.transpose(1, 2));
}

at::Tensor low_rank_bilinear_scores(const at::Tensor& x_q, const at::Tensor& x_k, const at::Tensor& W_q,
                                    const at::Tensor& W_k) {
  const char* fn = "low_rank_bilinear_scores";
  check_sources(fn, x_q, x_k);
  check_weight(fn, "W_q", W_q, x_q.size(2), "Dq");
  check_weight(fn, "W_k", W_k, x_k.size(2), "Dk");
  if (W_q.size(0) != W_k.size(0))
    throw UsageError(std::string(fn) + ": W_q has rank r = " + std::to_string(W_q.size(0)) + " but W_k has " +
                     std::to_string(W_k.size(0)));
  // (W_q x_q) . (W_k x_k): r-dimensional queries and keys
  return at::matmul(at::matmul(x_q, W_q.t()), at::matmul(x_k, W_k.t()).transpose(1, 2));
}

at::Tensor additive_scores(const at::Tensor& x_q, const at::Tensor& x_k, const at::Tensor& W_q, const at::Tensor& W_k,
                           const at::Tensor& v, const at::Tensor& bias) {
  const char* fn = "additive_scores";
  check_sources(fn, x_q, x_k);
  check_weight(fn, "W_q", W_q, x_q.size(2), "Dq");
  check_weight(fn, "W_k", W_k, x_k.size(2), "Dk");
  const int64_t h = W_q.size(0);
  if (W_k.size(0) != h)
    throw UsageError(std::string(fn) + ": W_k has " + std::to_string(W_k.size(0)) + " rows but W_q has " +
                     std::to_string(h));
  if (!v.defined() || v.dim() != 1 || v.size(0) != h)
    throw UsageError(std::string(fn) + ": v must be [h] = [" + std::to_string(h) + "]");
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != h))
    throw UsageError(std::string(fn) + ": bias must be [h] = [" + std::to_string(h) + "]");
  at::Tensor a = at::matmul(x_q, W_q.t()).unsqueeze(2);  // [B,Nq,1,h]
  at::Tensor b = at::matmul(x_k, W_k.t()).unsqueeze(1);  // [B,1,Nk,h]
  at::Tensor pre = bias.defined() ? a + b + bias : a + b;
  return at::matmul(at::tanh(pre), v);  // [B,Nq,Nk]
}

at::Tensor attend(const at::Tensor& scores, const at::Tensor& values, const at::Tensor& bool_mask, double temperature) {
  const char* fn = "attend";
  if (!scores.defined() || scores.dim() != 3) throw UsageError(std::string(fn) + ": scores must be 3-D [B,Nq,Nk]");
  if (!values.defined() || values.dim() != 3 || values.size(0) != scores.size(0) || values.size(1) != scores.size(2))
    throw UsageError(std::string(fn) + ": values must be [B,Nk,dv] matching scores " + shape_of(scores) + ", got " +
                     (values.defined() ? shape_of(values) : "undefined"));
  if (!(temperature > 0)) throw UsageError(std::string(fn) + ": temperature must be > 0");
  at::Tensor logits = scores / temperature;
  at::Tensor w;
  if (bool_mask.defined()) {
    if (bool_mask.scalar_type() != at::kBool) throw UsageError(std::string(fn) + ": bool_mask must be bool");
    at::Tensor allow = bool_mask.to(scores.device()).expand_as(scores);
    at::Tensor dead = allow.logical_not().all(-1, true);
    logits = logits.masked_fill(allow.logical_not(), -std::numeric_limits<double>::infinity()).masked_fill(dead, 0.0);
    w = at::softmax(logits, -1).masked_fill(dead, 0.0);
  } else {
    w = at::softmax(logits, -1);
  }
  return at::matmul(w, values);
}

const char* score_kind_name(ScoreKind kind) {
  switch (kind) {
    case ScoreKind::DotProduct: return "dot_product";
    case ScoreKind::Bilinear: return "bilinear";
    case ScoreKind::Additive: return "additive";
  }
  return "?";
}

DotProductScore::DotProductScore(const ScoreFunctionOptions& o) : scale_(o.scale) {}

at::Tensor DotProductScore::forward(const at::Tensor& x_q, const at::Tensor& x_k) {
  return dot_product_scores(x_q, x_k, scale_);
}

BilinearScore::BilinearScore(const ScoreFunctionOptions& o) {
  const int64_t dq = o.query_dim, dk = o.key_dim > 0 ? o.key_dim : o.query_dim, r = o.rank > 0 ? o.rank : o.query_dim;
  // Entries ~ U(-1/sqrt(D), 1/sqrt(D)) like nn::Linear.
  W_q = register_parameter("W_q", at::empty({r, dq}).uniform_(-1.0 / std::sqrt(dq), 1.0 / std::sqrt(dq)));
  W_k = register_parameter("W_k", at::empty({r, dk}).uniform_(-1.0 / std::sqrt(dk), 1.0 / std::sqrt(dk)));
}

at::Tensor BilinearScore::forward(const at::Tensor& x_q, const at::Tensor& x_k) {
  return low_rank_bilinear_scores(x_q, x_k, live(W_q), live(W_k));
}

at::Tensor BilinearScore::matrix() const { return at::matmul(live(W_q).t(), live(W_k)); }

AdditiveScore::AdditiveScore(const ScoreFunctionOptions& o) {
  const int64_t dq = o.query_dim, dk = o.key_dim > 0 ? o.key_dim : o.query_dim, h = o.rank > 0 ? o.rank : o.query_dim;
  W_q = register_parameter("W_q", at::empty({h, dq}).uniform_(-1.0 / std::sqrt(dq), 1.0 / std::sqrt(dq)));
  W_k = register_parameter("W_k", at::empty({h, dk}).uniform_(-1.0 / std::sqrt(dk), 1.0 / std::sqrt(dk)));
  v = register_parameter("v", at::empty({h}).uniform_(-1.0 / std::sqrt(h), 1.0 / std::sqrt(h)));
  if (o.bias) b = register_parameter("b", at::zeros({h}));
}

at::Tensor AdditiveScore::forward(const at::Tensor& x_q, const at::Tensor& x_k) {
  return additive_scores(x_q, x_k, live(W_q), live(W_k), live(v), live(b));
}

std::shared_ptr<ScoreFunction> make_score_function(ScoreKind kind, const ScoreFunctionOptions& o) {
  const char* fn = "make_score_function";
  if (kind != ScoreKind::DotProduct && o.query_dim < 1)
    throw UsageError(std::string(fn) + ": query_dim must be >= 1, got " + std::to_string(o.query_dim));
  if (o.key_dim < 0) throw UsageError(std::string(fn) + ": key_dim must be >= 0 (0 = query_dim)");
  if (o.rank < 0) throw UsageError(std::string(fn) + ": rank must be >= 0 (0 = query_dim)");
  if (o.scale && !(*o.scale > 0)) throw UsageError(std::string(fn) + ": scale must be > 0");
  switch (kind) {
    case ScoreKind::DotProduct: return std::make_shared<DotProductScore>(o);
    case ScoreKind::Bilinear: return std::make_shared<BilinearScore>(o);
    case ScoreKind::Additive: return std::make_shared<AdditiveScore>(o);
  }
  throw UsageError(std::string(fn) + ": unknown score kind");
}

}  // namespace qkv::attention
