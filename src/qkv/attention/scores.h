#pragma once
// The attention score functions the article walks through, each mapping a
// query source x_q [B,Nq,Dq] and a key source x_k [B,Nk,Dk] to scores [B,Nq,Nk]:
//   dot product (scaled)  s_ij = scale * q_i . k_j              (q, k already projected, Dq == Dk)
//   bilinear              s_ij = x_qi^T A x_kj, A [Dq,Dk]
//     of rank r           A = W_q^T W_k, W_q [r,Dq], W_k [r,Dk]: s_ij = (W_q x_qi) . (W_k x_kj),
//                         i.e. a dot product of r-dimensional query and key (what a KV
//                         cache stores is W_k x_kj: r numbers per position instead of Dk)
//   additive (Bahdanau)   s_ij = v^T tanh(W_q x_qi + W_k x_kj + b), W_q [h,Dq], W_k [h,Dk], v [h]
// Free functions do the math on given weights; the modules own the weights and
// can be chosen at run time through make_score_function.
#include <torch/nn/module.h>

#include <memory>
#include <optional>

namespace qkv::attention {

// q [B,Nq,r], k [B,Nk,r]; scale defaults to 1/sqrt(r).
at::Tensor dot_product_scores(const at::Tensor& q, const at::Tensor& k, std::optional<double> scale = std::nullopt);
// x_q [B,Nq,Dq], x_k [B,Nk,Dk], A [Dq,Dk].
at::Tensor bilinear_scores(const at::Tensor& x_q, const at::Tensor& x_k, const at::Tensor& A);
// The same form with A = W_q^T W_k, computed without forming A.
at::Tensor low_rank_bilinear_scores(const at::Tensor& x_q, const at::Tensor& x_k, const at::Tensor& W_q,
                                    const at::Tensor& W_k);
// bias [h] is optional. Forms a [B,Nq,Nk,h] intermediate.
at::Tensor additive_scores(const at::Tensor& x_q, const at::Tensor& x_k, const at::Tensor& W_q, const at::Tensor& W_k,
                           const at::Tensor& v, const at::Tensor& bias = {});

// softmax over keys of scores / temperature (masked where bool_mask, broadcastable
// to [B,Nq,Nk], is false; rows with nothing visible give 0) times values [B,Nk,dv].
at::Tensor attend(const at::Tensor& scores, const at::Tensor& values, const at::Tensor& bool_mask = {},
                  double temperature = 1.0);

enum class ScoreKind { DotProduct, Bilinear, Additive };
const char* score_kind_name(ScoreKind kind);

struct ScoreFunctionOptions {
  int64_t query_dim = 0;        // Dq
  int64_t key_dim = 0;          // Dk (0 = query_dim)
  int64_t rank = 0;             // Bilinear: r (rows of W_q and W_k); Additive: hidden width h; 0 = query_dim
  std::optional<double> scale;  // DotProduct only (default 1/sqrt(Dq))
  bool bias = true;             // Additive only: the b inside tanh
};

// A score function with its weights: forward(x_q, x_k) -> [B,Nq,Nk].
class ScoreFunction : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x_q, const at::Tensor& x_k) = 0;
  virtual ScoreKind kind() const = 0;
};

// Scaled dot product: no weights (x_q and x_k are the query and key).
class DotProductScore : public ScoreFunction {
 public:
  explicit DotProductScore(const ScoreFunctionOptions& o);
  at::Tensor forward(const at::Tensor& x_q, const at::Tensor& x_k) override;
  ScoreKind kind() const override { return ScoreKind::DotProduct; }

 private:
  std::optional<double> scale_;
};

// x_q^T (W_q^T W_k) x_k with W_q [r,Dq], W_k [r,Dk].
class BilinearScore : public ScoreFunction {
 public:
  explicit BilinearScore(const ScoreFunctionOptions& o);
  at::Tensor forward(const at::Tensor& x_q, const at::Tensor& x_k) override;
  ScoreKind kind() const override { return ScoreKind::Bilinear; }
  at::Tensor matrix() const;  // A = W_q^T W_k [Dq,Dk], rank <= r

  at::Tensor W_q, W_k;
};

// v^T tanh(W_q x_q + W_k x_k + b) with W_q [h,Dq], W_k [h,Dk], v [h], b [h].
class AdditiveScore : public ScoreFunction {
 public:
  explicit AdditiveScore(const ScoreFunctionOptions& o);
  at::Tensor forward(const at::Tensor& x_q, const at::Tensor& x_k) override;
  ScoreKind kind() const override { return ScoreKind::Additive; }

  at::Tensor W_q, W_k, v, b;  // b undefined without bias
};

// Throws qkv::UsageError for non-positive dimensions.
std::shared_ptr<ScoreFunction> make_score_function(ScoreKind kind, const ScoreFunctionOptions& o);

}  // namespace qkv::attention
