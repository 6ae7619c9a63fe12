// The tiled (FlashAttention-style) kernel against naive attention: values and
// gradients in float32 and float64, odd sizes, causal and key padding, and a
// finite-difference gradient check of the autograd Function.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/attention/tiled_attention.h"
#include "qkv/attention/tiled_attention_rows.h"
#include "qkv/attention/tiled_attention_tile_kernels.h"
#include "qkv/core/errors.h"
#include "qkv/runtime/blas.h"
#include "support/tolerance.h"

namespace qa = qkv::attention;

namespace {

// Naive attention written out with tensor ops: matmul, masked softmax, matmul.
// Rows with no visible key give 0.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double alpha, bool causal,
                     const at::Tensor& pad) {
  const int64_t Nq = q.size(2), Nk = k.size(2);
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * alpha;
  at::Tensor allow = at::ones({q.size(0), 1, Nq, Nk}, at::kBool);
  if (causal) allow = allow & at::ones({Nq, Nk}, at::kBool).tril(Nk - Nq);
  if (pad.defined()) allow = allow & pad.logical_not().view({q.size(0), 1, 1, Nk});
  s = s.masked_fill(allow.logical_not(), -std::numeric_limits<double>::infinity());
  at::Tensor dead = allow.logical_not().all(-1, true);
  at::Tensor w = at::softmax(s.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0);
  return at::matmul(w, v);
}

// count standard-normal floats from rng (the tile kernels' tests work on raw
// arrays, as the kernel does).
std::vector<float> normal_floats(std::mt19937& rng, int64_t count) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(count));
  for (float& e : x) e = normal(rng);
  return x;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

struct Case {
  int64_t B, H, Nq, Nk, d, dv;
  bool causal;
  bool padding;
  int64_t bq, bk;  // 0 = default tiles
};

void compare(const Case& c, at::ScalarType dtype, double tol) {
  SCOPED_TRACE(::testing::Message() << "B=" << c.B << " H=" << c.H << " Nq=" << c.Nq << " Nk=" << c.Nk << " d=" << c.d
                                    << " dv=" << c.dv << " causal=" << c.causal << " pad=" << c.padding
                                    << " tiles=" << c.bq << "x" << c.bk << " " << c10::toString(dtype));
  auto opts = at::TensorOptions().dtype(dtype);
  at::Tensor q = at::randn({c.B, c.H, c.Nq, c.d}, opts).requires_grad_();
  at::Tensor k = at::randn({c.B, c.H, c.Nk, c.d}, opts).requires_grad_();
  at::Tensor v = at::randn({c.B, c.H, c.Nk, c.dv}, opts).requires_grad_();
  at::Tensor pad;
  if (c.padding) {
    pad = at::rand({c.B, c.Nk}) < 0.3;
    pad[0].fill_(true);  // batch 0: every key padded -> all rows empty
  }
  const double alpha = 1.0 / std::sqrt(static_cast<double>(c.d));
  at::Tensor g = at::randn({c.B, c.H, c.Nq, c.dv}, opts);

  at::Tensor out_t = qa::tiled_attention(q, k, v, alpha, c.causal, pad, {c.bq, c.bk});
  auto grads_t = torch::autograd::grad({out_t}, {q, k, v}, {g});
  // The naive path in float64 on the same values is the reference; errors are
  // relative to the size of the reference (at least 1).
  at::Tensor qd = q.detach().to(at::kDouble).requires_grad_(), kd = k.detach().to(at::kDouble).requires_grad_(),
             vd = v.detach().to(at::kDouble).requires_grad_();
  at::Tensor out_n = reference(qd, kd, vd, alpha, c.causal, pad);
  auto grads_n = torch::autograd::grad({out_n}, {qd, kd, vd}, {g.to(at::kDouble)});
  using qkv::testing::scaled_difference;
  EXPECT_LT(scaled_difference(out_t, out_n), tol);
  EXPECT_LT(scaled_difference(grads_t[0], grads_n[0]), tol) << "dq";
  EXPECT_LT(scaled_difference(grads_t[1], grads_n[1]), tol) << "dk";
  EXPECT_LT(scaled_difference(grads_t[2], grads_n[2]), tol) << "dv";
  for (const auto& t : grads_t) EXPECT_TRUE(at::isfinite(t).all().item<bool>());
  if (c.padding) {
    EXPECT_EQ(out_t[0].abs().max().item<double>(), 0.0);
  }
}

}  // namespace

TEST(Tiled, MatchesNaiveFloat64OddSizes) {
  torch::manual_seed(1);
  for (bool causal : {false, true})
    for (bool padding : {false, true}) {
      compare({2, 3, 37, 37, 5, 7, causal, padding, 8, 16}, at::kDouble, 1e-10);
      compare({1, 2, 19, 53, 3, 3, causal, padding, 8, 8}, at::kDouble, 1e-10);   // Nq < Nk (decode-like block)
      compare({1, 2, 53, 19, 4, 6, causal, padding, 16, 8}, at::kDouble, 1e-10);  // Nq > Nk: first rows see nothing
      compare({2, 1, 70, 130, 33, 17, causal, padding, 0, 0}, at::kDouble, 1e-10);
    }
}

TEST(Tiled, MatchesNaiveFloat32HeadWidths1To128) {
  torch::manual_seed(2);
  for (int64_t d : {1, 2, 7, 16, 31, 48, 64, 65, 100, 128}) {
    compare({1, 2, 67, 67, d, d, false, false, 0, 0}, at::kFloat, 1e-5);
    compare({1, 2, 45, 150, d, d, true, false, 0, 0}, at::kFloat, 1e-5);
  }
  compare({2, 2, 200, 333, 64, 64, true, true, 0, 0}, at::kFloat, 1e-5);
  compare({2, 2, 129, 257, 64, 32, false, true, 32, 64}, at::kFloat, 1e-5);
  // Key blocks off the 16-key panels: BLAS tiles even where the CPU has AVX-512.
  compare({1, 2, 45, 150, 48, 40, true, true, 7, 13}, at::kFloat, 1e-5);
  // Enough batch*heads for a task per head (its keys packed once a task), and
  // the same in float64.
  compare({2, 6, 70, 300, 48, 48, true, true, 32, 64}, at::kFloat, 1e-5);
  compare({2, 6, 70, 300, 48, 48, false, false, 0, 0}, at::kFloat, 1e-5);
  compare({2, 6, 70, 300, 17, 9, true, true, 32, 64}, at::kDouble, 1e-10);
}

TEST(Tiled, MatchesNaiveFloat64HeadWidths1To128) {
  torch::manual_seed(3);
  for (int64_t d : {1, 3, 17, 64, 127, 128}) {
    compare({1, 2, 81, 97, d, d, d % 2 == 1, d == 64, 0, 0}, at::kDouble, 1e-10);
  }
}

TEST(Tiled, GradcheckFloat64) {
  torch::manual_seed(4);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  for (bool causal : {false, true}) {
    at::Tensor q = at::randn({1, 2, 5, 3}, opts), k = at::randn({1, 2, 7, 3}, opts), v = at::randn({1, 2, 7, 2}, opts);
    at::Tensor pad = at::zeros({1, 7}, at::kBool);
    pad[0][2] = true;
    at::Tensor g = at::randn({1, 2, 5, 2}, opts);
    auto f = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv) {
      return (qa::tiled_attention(qq, kk, vv, 0.7, causal, pad, {2, 3}) * g).sum();
    };
    at::Tensor qg = q.clone().requires_grad_(), kg = k.clone().requires_grad_(), vg = v.clone().requires_grad_();
    auto analytic = torch::autograd::grad({f(qg, kg, vg)}, {qg, kg, vg});
    const double eps = 1e-6;
    std::vector<at::Tensor> inputs{q, k, v};
    for (int which = 0; which < 3; ++which) {
      at::Tensor flat = inputs[which].view(-1);
      for (int64_t i = 0; i < flat.numel(); ++i) {
        const double x0 = flat[i].item<double>();
        flat[i] = x0 + eps;
        const double fp = f(q, k, v).item<double>();
        flat[i] = x0 - eps;
        const double fm = f(q, k, v).item<double>();
        flat[i] = x0;
        const double numeric = (fp - fm) / (2 * eps);
        EXPECT_NEAR(analytic[which].view(-1)[i].item<double>(), numeric, 1e-7)
            << "input " << which << " element " << i << " causal " << causal;
      }
    }
  }
}

TEST(Tiled, ThreadCountsAndTileSizesAgree) {
  // One worker vs several (the backward then sums per-worker dQ buffers), and
  // different tile sizes, give the same values and gradients.
  torch::manual_seed(5);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor q = at::randn({2, 3, 50, 8}, opts).requires_grad_(), k = at::randn({2, 3, 70, 8}, opts).requires_grad_(),
             v = at::randn({2, 3, 70, 4}, opts).requires_grad_();
  at::Tensor g = at::randn({2, 3, 50, 4}, opts);
  const int saved = at::get_num_threads();
  std::vector<std::vector<at::Tensor>> results;
  for (int threads : {1, 2, 4})
    for (qa::TileSizes tiles : {qa::TileSizes{}, qa::TileSizes{16, 8}, qa::TileSizes{7, 13}}) {
      at::set_num_threads(threads);
      at::Tensor out = qa::tiled_attention(q, k, v, 0.3, true, {}, tiles);
      auto grads = torch::autograd::grad({out}, {q, k, v}, {g});
      results.push_back({out, grads[0], grads[1], grads[2]});
    }
  at::set_num_threads(saved);
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t t = 0; t < 4; ++t) EXPECT_LT(max_abs_diff(results[r][t], results[0][t]), 1e-12) << r << " " << t;
  EXPECT_GT(qa::default_tile_sizes(64, 64).block_q, 0);
  EXPECT_GT(qa::default_tile_sizes(1, 1).block_k, 0);
}

TEST(Tiled, RowKernelsMatchTheirScalarDefinitions) {
  // Every float version this CPU runs (portable, AVX2, AVX-512; the kernel
  // uses the widest); every length up to 70 exercises the vector bodies and
  // the masked or padded tails; -inf, far-negative and positive shifted
  // scores cover exp's underflow and clamping.
  std::vector<float> base;
  for (int i = 0; i < 70; ++i)
    base.push_back(i % 11 == 3  ? -std::numeric_limits<float>::infinity()
                   : i % 7 == 5 ? -120.0f
                                : std::sin(1.3f * i) * 12.0f);
  const auto versions = qa::rows::float_row_kernels_here();
  EXPECT_EQ(std::string(versions.front().name), "portable");
  for (const auto& rows : versions)
    for (int64_t n = 0; n <= 70; ++n) {
      SCOPED_TRACE(std::string(rows.name) + ", n = " + std::to_string(n));
      float expected_max = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < n; ++i) expected_max = std::max(expected_max, base[i]);
      EXPECT_EQ(rows.max(base.data(), n), expected_max);
      std::vector<float> x(base.begin(), base.begin() + n);
      x.resize(n + 16, 7.0f);  // past the end: must stay untouched
      const float sum = rows.exp_sum(x.data(), n, 2.5f);
      double expected_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double e = std::exp(static_cast<double>(base[i] - 2.5f));  // of the argument as float rounds it
        EXPECT_NEAR(x[i], e, 2e-7 * e + 1e-37) << "i = " << i;
        expected_sum += e;
      }
      EXPECT_NEAR(sum, expected_sum, 1e-6 * expected_sum);
      std::vector<float> dp(n + 16, 3.0f), p(x.begin(), x.begin() + n);
      for (int64_t i = 0; i < n; ++i) dp[i] = 0.25f * static_cast<float>(i);
      rows.dsoftmax(dp.data(), p.data(), n, 1.5f);
      rows.scale(x.data(), n, -2.0f);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_FLOAT_EQ(dp[i], p[i] * (0.25f * static_cast<float>(i) - 1.5f));
        EXPECT_FLOAT_EQ(x[i], -2.0f * p[i]);
      }
      for (int64_t i = n; i < n + 16; ++i) {
        EXPECT_EQ(x[i], 7.0f);
        EXPECT_EQ(dp[i], 3.0f);
      }
    }
  // The dispatching functions are the widest version's.
  std::vector<float> a(base.begin(), base.begin() + 37), b = a;
  EXPECT_EQ(qa::rows::exp_sum(a.data(), 37, 1.0f), versions.back().exp_sum(b.data(), 37, 1.0f));
  EXPECT_EQ(a, b);
}

TEST(Tiled, ScoreTileKernelsEqualTheirDefinitions) {
  // The fused pass of the float backward on AVX-512 (P and dS of a tile in
  // registers) against P = exp(alpha q.k + bias - lse), dS = P (dO.v - D)
  // written out in double, and the forward's S = alpha q.k: row counts
  // around the 6- and 12-row blocks, key counts around the 16-lane vectors
  // and 32-key blocks, causal diagonals that cut blocks, padded keys, rows
  // that see nothing; columns past n untouched.
  namespace st = qa::tile_kernels;
  if (!st::available()) GTEST_SKIP() << "no AVX-512 F here: the backward composes GEMMs and the row kernels";
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::mt19937 rng(11);
  int cases = 0;
  for (int64_t m : {1, 5, 6, 7, 12, 13, 40})
    for (int64_t n : {1, 15, 16, 17, 32, 33, 70})
      for (auto [d, dv] : {std::pair<int64_t, int64_t>{1, 2}, {3, 17}, {48, 48}})
        for (int mask = 0; mask < 4; ++mask) {
          const bool causal = mask & 1, padding = mask & 2;
          const int64_t diagonal = causal ? static_cast<int64_t>(n % 7) - 3 : 0;
          SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " d=" << d << " dv=" << dv
                                            << " causal=" << causal << " diagonal=" << diagonal << " pad=" << padding);
          auto randoms = [&](int64_t count) { return normal_floats(rng, count); };
          const std::vector<float> q = randoms(m * d), k = randoms(n * d), dout = randoms(m * dv), v = randoms(n * dv),
                                   D = randoms(m);
          std::vector<float> bias(static_cast<size_t>(st::panel_floats(n, 1)), 0.0f);
          if (padding)
            for (int64_t c = 0; c < n; ++c)
              if (c % 3 == 1 || n == 1) bias[c] = kNegInf;
          const float alpha = 0.37f;
          auto sees = [&](int64_t r, int64_t c) { return bias[c] == 0.0f && (!causal || c <= r + diagonal); };
          auto score = [&](int64_t r, int64_t c) {
            double s = 0;
            for (int64_t e = 0; e < d; ++e) s += double(q[r * d + e]) * k[c * d + e];
            return alpha * s;
          };
          std::vector<float> lse(static_cast<size_t>(m), kNegInf);  // the forward's, over the visible keys
          for (int64_t r = 0; r < m; ++r) {
            double sum = 0;
            for (int64_t c = 0; c < n; ++c)
              if (sees(r, c)) sum += std::exp(score(r, c));
            if (sum > 0) lse[r] = static_cast<float>(std::log(sum));
          }
          std::vector<float> kp(st::panel_floats(n, d)), vp(st::panel_floats(n, dv));
          st::pack_panels(k.data(), n, d, kp.data());
          st::pack_panels(v.data(), n, dv, vp.data());
          const int64_t ld = n + 5;
          std::vector<float> P(m * ld, 7.0f), dS(m * ld, 7.0f);
          st::ScoreTile t;
          t.m = m;
          t.n = n;
          t.q = q.data();
          t.d = d;
          t.k_panels = kp.data();
          t.dout = dout.data();
          t.dv = dv;
          t.v_panels = vp.data();
          t.lse = lse.data();
          t.D = D.data();
          t.column_bias = padding ? bias.data() : nullptr;
          t.alpha = alpha;
          t.causal = causal;
          t.diagonal = diagonal;
          t.p = P.data();
          t.ds = dS.data();
          t.ld = ld;
          st::score_tile(t);
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t c = 0; c < n; ++c) {
              const float p = P[r * ld + c], ds = dS[r * ld + c];
              if (!sees(r, c) || lse[r] == kNegInf) {
                EXPECT_EQ(p, 0.0f) << r << ", " << c;
                EXPECT_EQ(ds, 0.0f) << r << ", " << c;
                continue;
              }
              const double p_ref = std::exp(score(r, c) - lse[r]);
              double dp = 0, dp_size = 0, s_size = 0;
              for (int64_t e = 0; e < dv; ++e) {
                dp += double(dout[r * dv + e]) * v[c * dv + e];
                dp_size += std::abs(double(dout[r * dv + e]) * v[c * dv + e]);
              }
              for (int64_t e = 0; e < d; ++e) s_size += alpha * std::abs(double(q[r * d + e]) * k[c * d + e]);
              // Float sums of d products and the float lse: the exponent's
              // error grows with their sizes (a wrong mask or column is O(1)).
              const double p_tol = p_ref * 1e-6 * (1 + s_size + std::abs(lse[r])) + 1e-7;
              EXPECT_NEAR(p, p_ref, p_tol) << r << ", " << c;
              EXPECT_NEAR(ds, p_ref * (dp - D[r]),
                          p_tol * std::abs(dp - D[r]) + p_ref * 1e-6 * (1 + dp_size + std::abs(D[r])))
                  << r << ", " << c;
            }
            for (int64_t c = n; c < ld; ++c) {
              EXPECT_EQ(P[r * ld + c], 7.0f);
              EXPECT_EQ(dS[r * ld + c], 7.0f);
            }
          }
          std::vector<float> S(m * ld, 7.0f);
          st::scaled_scores(m, n, q.data(), d, kp.data(), alpha, S.data(), ld);
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t c = 0; c < n; ++c) {
              double s_size = 0;
              for (int64_t e = 0; e < d; ++e) s_size += alpha * std::abs(double(q[r * d + e]) * k[c * d + e]);
              EXPECT_NEAR(S[r * ld + c], score(r, c), 1e-6 * (1 + s_size)) << "S " << r << ", " << c;
            }
            for (int64_t c = n; c < ld; ++c) EXPECT_EQ(S[r * ld + c], 7.0f);
          }
          ++cases;
        }
  EXPECT_EQ(cases, 7 * 7 * 3 * 4);
}

TEST(Tiled, AccumulateProductEqualsItsDefinition) {
  // The products of the float backward on AVX-512 (dV += P^T dO, dK += dS^T Q,
  // dQ += dS K, A read in place) against C += alpha A B in double: A read
  // directly and transposed, row counts around the 6- and 8-row blocks,
  // widths around the 16-lane vectors and the 64-column chunks; C's entries
  // past w untouched.
  namespace tk = qa::tile_kernels;
  if (!tk::available()) GTEST_SKIP() << "no AVX-512 F here: the backward uses BLAS for these products";
  std::mt19937 rng(12);
  auto randoms = [&](int64_t count) { return normal_floats(rng, count); };
  for (int64_t rows : {1, 5, 6, 7, 8, 9, 13, 40})
    for (int64_t w : {1, 15, 16, 17, 33, 48, 64, 65, 100, 130})
      for (int64_t depth : {1, 7, 33})
        for (bool transposed : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "rows=" << rows << " w=" << w << " depth=" << depth << " transposed=" << transposed);
          // A is rows x depth, stored as such (lda = depth + 3) or transposed (lda = rows + 3).
          const int64_t lda = transposed ? rows + 3 : depth + 3;
          const std::vector<float> a = randoms((transposed ? depth : rows) * lda), b = randoms(depth * w);
          const int64_t ldc = w + 4;
          std::vector<float> c = randoms(rows * ldc);
          const std::vector<float> c0 = c;
          const float alpha = 0.7f;
          const int64_t rs = transposed ? 1 : lda, cs = transposed ? lda : 1;
          tk::accumulate_product(rows, w, depth, alpha, a.data(), rs, cs, b.data(), w, c.data(), ldc);
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < w; ++j) {
              double ref = 0, size = 0;
              for (int64_t k = 0; k < depth; ++k) {
                ref += double(a[i * rs + k * cs]) * b[k * w + j];
                size += std::abs(double(a[i * rs + k * cs]) * b[k * w + j]);
              }
              EXPECT_NEAR(c[i * ldc + j], c0[i * ldc + j] + alpha * ref,
                          1e-6 * (1 + alpha * size + std::abs(c0[i * ldc + j])))
                  << i << ", " << j;
            }
            for (int64_t j = w; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]);
          }
        }
}

TEST(Tiled, LeavesTheBlasThreadCountAsItWas) {
  // The kernels hold OpenBLAS at one thread while they run (their own workers
  // use the cores) and must give the caller's count back, after the forward
  // and after the backward.
  const auto before = qkv::blas::openblas_threads();
  if (!before) GTEST_SKIP() << "the loaded BLAS is not OpenBLAS";
  qkv::blas::set_openblas_threads(2);
  at::Tensor q = at::randn({2, 4, 300, 16}).requires_grad_(), k = at::randn({2, 4, 300, 16}).requires_grad_(),
             v = at::randn({2, 4, 300, 16}).requires_grad_();
  at::Tensor out = qa::tiled_attention(q, k, v, 0.25);
  EXPECT_EQ(qkv::blas::openblas_threads(), 2);
  out.sum().backward();
  EXPECT_EQ(qkv::blas::openblas_threads(), 2);
  qkv::blas::set_openblas_threads(*before);
}

TEST(Tiled, RejectsNonCpuAndBadShapes) {
  at::Tensor q = at::randn({1, 1, 4, 3}), k = at::randn({1, 1, 5, 3}), v = at::randn({1, 1, 5, 2});
  EXPECT_THROW(qa::tiled_attention(q.to(at::kHalf), k.to(at::kHalf), v.to(at::kHalf), 1.0), qkv::UsageError);
  EXPECT_THROW(qa::tiled_attention(q, k, at::randn({1, 1, 4, 2}), 1.0), qkv::UsageError);
  EXPECT_THROW(qa::tiled_attention(q, k, v, 0.0), qkv::UsageError);
  EXPECT_THROW(qa::tiled_attention(q, k, v, 1.0, false, at::zeros({1, 4}, at::kBool)), qkv::UsageError);
}
