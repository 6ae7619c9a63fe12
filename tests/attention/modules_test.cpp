// Score functions, MultiHeadAttention (hand-computed cases, independent head
// widths, cross-attention) and the KV cache (append/overflow/reset, cached
// decoding equals full attention, the article's cache sizes).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>

#include "qkv/attention/kv_cache.h"
#include "qkv/attention/multi_head_attention.h"
#include "qkv/attention/scores.h"
#include "qkv/core/errors.h"
#include "support/test_files.h"
#include "support/tolerance.h"

namespace qa = qkv::attention;

using qkv::testing::expect_usage_error;
using qkv::testing::max_abs_difference;
using qkv::testing::rnd;

// ----------------------------------------------------------------------------- scores

TEST(Scores, DotProductAndBilinearMatchLoops) {
  torch::manual_seed(20);
  const int64_t B = 2, Nq = 3, Nk = 4, D = 5, Dk = 3;
  at::Tensor xq = rnd({B, Nq, D}), xk = rnd({B, Nk, D}), xk2 = rnd({B, Nk, Dk}), A = rnd({D, Dk});
  at::Tensor dot = qa::dot_product_scores(xq, xk);
  at::Tensor bil = qa::bilinear_scores(xq, xk2, A);
  ASSERT_EQ(dot.sizes(), (std::vector<int64_t>{B, Nq, Nk}));
  ASSERT_EQ(bil.sizes(), (std::vector<int64_t>{B, Nq, Nk}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Nq; ++i)
      for (int64_t j = 0; j < Nk; ++j) {
        double s = 0, t = 0;
        for (int64_t a = 0; a < D; ++a) {
          s += xq[b][i][a].item<double>() * xk[b][j][a].item<double>();
          for (int64_t c = 0; c < Dk; ++c)
            t += xq[b][i][a].item<double>() * A[a][c].item<double>() * xk2[b][j][c].item<double>();
        }
        EXPECT_NEAR(dot[b][i][j].item<double>(), s / std::sqrt(5.0), 1e-12);
        EXPECT_NEAR(bil[b][i][j].item<double>(), t, 1e-12);
      }
  // A = I reduces the bilinear form to the plain (unscaled) dot product.
  EXPECT_LT(
      max_abs_difference(qa::bilinear_scores(xq, xk, at::eye(D, at::kDouble)), qa::dot_product_scores(xq, xk, 1.0)),
      1e-12);
}

TEST(Scores, LowRankBilinearIsWqTransposeWk) {
  torch::manual_seed(21);
  qa::ScoreFunctionOptions o;
  o.query_dim = 6;
  o.key_dim = 4;
  o.rank = 2;
  auto f = qa::make_score_function(qa::ScoreKind::Bilinear, o);
  f->to(at::kDouble);
  auto* bilinear = dynamic_cast<qa::BilinearScore*>(f.get());
  ASSERT_NE(bilinear, nullptr);
  EXPECT_EQ(bilinear->W_q.sizes(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(bilinear->W_k.sizes(), (std::vector<int64_t>{2, 4}));
  at::Tensor A = bilinear->matrix();
  EXPECT_EQ(A.sizes(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(at::linalg_matrix_rank(A).item<int64_t>(), 2);
  at::Tensor xq = rnd({2, 3, 6}), xk = rnd({2, 5, 4});
  at::Tensor s = f->forward(xq, xk);
  EXPECT_LT(max_abs_difference(s, qa::bilinear_scores(xq, xk, A)), 1e-12);
  s.sum().backward();
  EXPECT_TRUE(bilinear->W_q.grad().defined());
  EXPECT_EQ(f->parameters().size(), 2u);
}

TEST(Scores, AdditiveMatchesLoop) {
  torch::manual_seed(22);
  qa::ScoreFunctionOptions o;
  o.query_dim = 3;
  o.key_dim = 2;
  o.rank = 4;  // hidden width h
  auto f = qa::make_score_function(qa::ScoreKind::Additive, o);
  f->to(at::kDouble);
  auto* add = dynamic_cast<qa::AdditiveScore*>(f.get());
  ASSERT_NE(add, nullptr);
  {
    at::NoGradGuard ng;
    add->b.copy_(rnd({4}));
  }
  EXPECT_EQ(f->parameters().size(), 4u);
  at::Tensor xq = rnd({1, 2, 3}), xk = rnd({1, 3, 2});
  at::Tensor s = f->forward(xq, xk);
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{1, 2, 3}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double total = 0;
      for (int64_t h = 0; h < 4; ++h) {
        double pre = add->b[h].item<double>();
        for (int64_t a = 0; a < 3; ++a) pre += add->W_q[h][a].item<double>() * xq[0][i][a].item<double>();
        for (int64_t c = 0; c < 2; ++c) pre += add->W_k[h][c].item<double>() * xk[0][j][c].item<double>();
        total += add->v[h].item<double>() * std::tanh(pre);
      }
      EXPECT_NEAR(s[0][i][j].item<double>(), total, 1e-12);
    }
  expect_usage_error([&] { qa::additive_scores(xq, xk, add->W_q, add->W_q, add->v); }, "W_k");
}

TEST(Scores, SelectableAndAttend) {
  torch::manual_seed(23);
  qa::ScoreFunctionOptions o;
  o.query_dim = 4;
  for (auto kind : {qa::ScoreKind::DotProduct, qa::ScoreKind::Bilinear, qa::ScoreKind::Additive}) {
    auto f = qa::make_score_function(kind, o);
    EXPECT_EQ(f->kind(), kind) << qa::score_kind_name(kind);
    EXPECT_EQ(f->forward(at::randn({2, 3, 4}), at::randn({2, 5, 4})).sizes(), (std::vector<int64_t>{2, 3, 5}));
  }
  // attend: softmax over keys, masked keys ignored, an empty row gives 0.
  at::Tensor scores = at::tensor({0.0, std::log(3.0), 5.0}, at::kDouble).view({1, 1, 3}).expand({1, 2, 3}).contiguous();
  at::Tensor values = at::tensor({1.0, 2.0, 100.0}, at::kDouble).view({1, 3, 1});
  at::Tensor mask = at::tensor({1, 1, 0, 0, 0, 0}).view({1, 2, 3}).to(at::kBool);
  at::Tensor out = qa::attend(scores, values, mask);
  EXPECT_NEAR(out[0][0][0].item<double>(), 0.25 * 1 + 0.75 * 2, 1e-12);
  EXPECT_EQ(out[0][1][0].item<double>(), 0.0);
  expect_usage_error([] { qa::make_score_function(qa::ScoreKind::Bilinear, {}); }, "query_dim");
}

// ----------------------------------------------------------------------------- MHA

TEST(MultiHeadAttention, HandComputedSingleHead) {
  // D = 2, one head with r = d_v = 1: the query and key read x[0], the value x[1],
  // W_O = [1, 2]^T writes the attended value to both outputs (times 1 and 2).
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(2, 1).qk_dim(1).v_dim(1).bias(false));
  mha->to(at::kDouble);
  {
    at::NoGradGuard ng;
    mha->w_q.copy_(at::tensor({1.0, 0.0}).view({1, 2}));
    mha->w_k.copy_(at::tensor({1.0, 0.0}).view({1, 2}));
    mha->w_v.copy_(at::tensor({0.0, 1.0}).view({1, 2}));
    mha->w_o.copy_(at::tensor({1.0, 2.0}).view({2, 1}));
  }
  at::Tensor x = at::tensor({0.0, 1.0, 1.0, 3.0}, at::kDouble).view({1, 2, 2});
  qa::SdpaOptions o;
  o.need_weights = true;
  qa::MultiHeadAttentionOutput r = mha(x, x, x, o);
  // token 0: q = 0, scores (0, 0) -> weights (1/2, 1/2) -> value 2 -> output (2, 4)
  // token 1: q = 1, scores (0, 1) -> weights (1, e)/(1+e) -> value (1 + 3e)/(1 + e)
  const double e = std::exp(1.0), val1 = (1 + 3 * e) / (1 + e);
  at::Tensor expect = at::tensor({2.0, 4.0, val1, 2 * val1}, at::kDouble).view({1, 2, 2});
  EXPECT_LT(max_abs_difference(r.output, expect), 1e-12);
  ASSERT_EQ(r.weights.sizes(), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_NEAR(r.weights[0][0][1][1].item<double>(), e / (1 + e), 1e-12);
  // causal: token 0 sees only itself (value 1); token 1 unchanged
  o.causal = true;
  r = mha(x, x, x, o);
  expect = at::tensor({1.0, 2.0, val1, 2 * val1}, at::kDouble).view({1, 2, 2});
  EXPECT_LT(max_abs_difference(r.output, expect), 1e-12);
}

TEST(MultiHeadAttention, IndependentWidthsAndCrossAttention) {
  torch::manual_seed(24);
  const int64_t D = 4, h = 2, r = 3, dv = 2, kv = 5;
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(D, h).qk_dim(r).v_dim(dv).kv_dim(kv));
  mha->to(at::kDouble);
  EXPECT_EQ(mha->w_q.sizes(), (std::vector<int64_t>{h * r, D}));
  EXPECT_EQ(mha->w_k.sizes(), (std::vector<int64_t>{h * r, kv}));
  EXPECT_EQ(mha->w_v.sizes(), (std::vector<int64_t>{h * dv, kv}));
  EXPECT_EQ(mha->w_o.sizes(), (std::vector<int64_t>{D, h * dv}));
  {
    at::NoGradGuard ng;
    for (auto& p : mha->parameters()) p.copy_(at::randn_like(p));
  }
  at::Tensor xq = rnd({2, 3, D}), xkv = rnd({2, 6, kv});
  qa::SdpaOptions o;
  o.need_weights = true;
  o.key_padding_mask = at::zeros({2, 6}, at::kBool);
  o.key_padding_mask[1][0] = true;
  qa::MultiHeadAttentionOutput out = mha(xq, xkv, xkv, o);
  ASSERT_EQ(out.output.sizes(), (std::vector<int64_t>{2, 3, D}));
  ASSERT_EQ(out.weights.sizes(), (std::vector<int64_t>{2, h, 3, 6}));
  // By hand, head by head.
  std::vector<at::Tensor> heads;
  for (int64_t j = 0; j < h; ++j) {
    at::Tensor Q = at::matmul(xq, mha->w_q.narrow(0, j * r, r).t()) + mha->b_q.narrow(0, j * r, r);
    at::Tensor K = at::matmul(xkv, mha->w_k.narrow(0, j * r, r).t()) + mha->b_k.narrow(0, j * r, r);
    at::Tensor V = at::matmul(xkv, mha->w_v.narrow(0, j * dv, dv).t()) + mha->b_v.narrow(0, j * dv, dv);
    at::Tensor s = at::matmul(Q, K.transpose(1, 2)) / std::sqrt(double(r));
    s = s.masked_fill(o.key_padding_mask.view({2, 1, 6}), -INFINITY);
    heads.push_back(at::matmul(at::softmax(s, -1), V));
  }
  at::Tensor expect = at::matmul(at::cat(heads, -1), mha->w_o.t()) + mha->b_o;
  EXPECT_LT(max_abs_difference(out.output, expect), 1e-12);
  // Gradients reach every parameter.
  out.output.sum().backward();
  for (const auto& p : mha->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  // Shapes are checked.
  expect_usage_error([&] { mha(xq, xq, xq); }, "key");
  expect_usage_error([] { qa::MultiHeadAttention(qa::MultiHeadAttentionOptions(5, 2)); }, "not divisible");
}

TEST(MultiHeadAttention, DropoutFollowsTrainingMode) {
  torch::manual_seed(25);
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(8, 2).dropout(0.5));
  at::Tensor x = at::randn({2, 5, 8});
  mha->eval();
  at::Tensor a = mha(x, x, x).output, b = mha(x, x, x).output;
  EXPECT_TRUE(a.equal(b));
  mha->train();
  EXPECT_GT(max_abs_difference(mha(x, x, x).output, a), 1e-4);
}

// ----------------------------------------------------------------------------- KV cache

TEST(KVCache, AppendViewsOverflowReset) {
  qa::KVCache cache(2, 1, 2, 5, 3, 4, at::TensorOptions().dtype(at::kDouble));
  EXPECT_EQ(cache.length(), 0);
  at::Tensor k1 = rnd({1, 2, 2, 3}), v1 = rnd({1, 2, 2, 4});
  cache.append(0, k1, v1);
  EXPECT_EQ(cache.length(0), 2);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_EQ(cache.length(), 0);  // layer 1 has not appended this step yet
  EXPECT_TRUE(cache.keys(0).equal(k1));
  EXPECT_TRUE(cache.values(0).equal(v1));
  cache.append(1, k1 * 2, v1 * 2);
  EXPECT_EQ(cache.length(), 2);
  at::Tensor k2 = rnd({1, 2, 3, 3}).to(at::kFloat), v2 = rnd({1, 2, 3, 4}).to(at::kFloat);  // converted
  cache.append(0, k2, v2);
  EXPECT_EQ(cache.length(0), 5);
  EXPECT_TRUE(cache.keys(0).equal(at::cat({k1, k2.to(at::kDouble)}, 2)));
  EXPECT_EQ(cache.values(0).sizes(), (std::vector<int64_t>{1, 2, 5, 4}));
  expect_usage_error([&] { cache.append(0, rnd({1, 2, 1, 3}), rnd({1, 2, 1, 4})); }, "S_max = 5");
  EXPECT_EQ(cache.length(0), 5);  // nothing written
  expect_usage_error([&] { cache.append(1, rnd({1, 2, 1, 4}), rnd({1, 2, 1, 4})); }, "k_new");
  expect_usage_error([&] { cache.append(1, rnd({1, 2, 1, 3}), rnd({1, 3, 1, 4})); }, "v_new");
  expect_usage_error([&] { cache.append(1, rnd({1, 2, 1, 3}), rnd({1, 2, 2, 4})); }, "v_new has 2");
  expect_usage_error([&] { cache.append(2, rnd({1, 2, 1, 3}), rnd({1, 2, 1, 4})); }, "layer 2");
  cache.reset();
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.keys(0).size(2), 0);
  cache.append(0, k2, v2);
  EXPECT_EQ(cache.length(0), 3);
  EXPECT_EQ(cache.size_bytes().key_bytes, 2 * 1 * 2 * 5 * 3 * 8);
  EXPECT_EQ(cache.size_bytes().value_bytes, 2 * 1 * 2 * 5 * 4 * 8);
  expect_usage_error([] { qa::KVCache(1, 1, 1, 0, 2, 2); }, "S_max");
}

TEST(KVCache, ArticleSizes) {
  // seq 5000, 50 layers, 20 heads, width 1000, 2 bytes: 10 GB of keys, 10 GB of values.
  qa::KVCacheSize s = qa::kv_cache_bytes(50, 20, 1000, 1000, 5000, 1, 2);
  EXPECT_EQ(s.key_bytes, 10'000'000'000LL);
  EXPECT_EQ(s.value_bytes, 10'000'000'000LL);
  EXPECT_EQ(s.total_bytes, 20'000'000'000LL);
  // r = 200: 2 GB each (5x smaller).
  s = qa::kv_cache_bytes(50, 20, 200, 200, 5000, 1, 2);
  EXPECT_EQ(s.key_bytes, 2'000'000'000LL);
  EXPECT_EQ(s.value_bytes, 2'000'000'000LL);
  EXPECT_EQ(s.total_bytes, 4'000'000'000LL);
  // Independent key and value widths, batch.
  s = qa::kv_cache_bytes(2, 3, 4, 5, 6, 7, 4);
  EXPECT_EQ(s.key_bytes, 2 * 3 * 4 * 6 * 7 * 4);
  EXPECT_EQ(s.value_bytes, 2 * 3 * 5 * 6 * 7 * 4);
  expect_usage_error([] { qa::kv_cache_bytes(-1, 1, 1, 1, 1, 1, 1); }, "layers");
}

TEST(KVCache, CachedDecodingEqualsFullCausalAttention) {
  torch::NoGradGuard no_grad;  // decoding with a cache keeps no graph
  torch::manual_seed(26);
  const int64_t B = 2, N = 9, D = 6, h = 2, r = 2, dv = 3;
  for (auto backend : {qa::AttentionBackend::Naive, qa::AttentionBackend::Tiled}) {
    qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(D, h).qk_dim(r).v_dim(dv));
    mha->to(at::kDouble);
    at::Tensor x = rnd({B, N, D});
    qa::SdpaOptions o;
    o.causal = true;
    o.backend = backend;
    at::Tensor full = mha(x, x, x, o).output;
    qa::KVCache cache(2, B, h, N, r, dv, at::TensorOptions().dtype(at::kDouble));
    std::vector<at::Tensor> pieces;
    pieces.push_back(mha->forward_cached(x.narrow(1, 0, 4), cache, 1, o).output);  // prefill 4 positions at once
    for (int64_t t = 4; t < N; ++t) pieces.push_back(mha->forward_cached(x.narrow(1, t, 1), cache, 1, o).output);
    EXPECT_LT(max_abs_difference(at::cat(pieces, 1), full), 1e-12) << qa::backend_name(backend);
    EXPECT_EQ(cache.length(1), N);
    EXPECT_EQ(cache.length(), 0);  // layer 0 never appended: min over layers
    // The cache holds exactly the projected keys and values of the sequence.
    EXPECT_LT(max_abs_difference(cache.keys(1), mha->project_k(x)), 1e-12);
    EXPECT_LT(max_abs_difference(cache.values(1), mha->project_v(x)), 1e-12);
    expect_usage_error([&] { mha->forward_cached(x.narrow(1, 0, 1), cache, 1, o); }, "S_max");
    // The pieces by hand: project, attend, merge.
    at::Tensor q = mha->project_q(x), k = mha->project_k(x), v = mha->project_v(x);
    EXPECT_EQ(q.sizes(), (std::vector<int64_t>{B, h, N, r}));
    EXPECT_EQ(v.sizes(), (std::vector<int64_t>{B, h, N, dv}));
    at::Tensor manual = mha->merge_heads_and_project(qa::scaled_dot_product_attention(q, k, v, o).output);
    EXPECT_LT(max_abs_difference(manual, full), 1e-12);
  }
}
