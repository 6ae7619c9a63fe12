// scaled_dot_product_attention against a plain double-precision loop: every
// mask kind, fully masked rows, temperature and scale, weights, dropout, the
// Auto rule, and the UsageError messages for bad input. The Torch backend
// (PyTorch 2.x's fused attention) is checked wherever the build has it, here
// through its CPU kernels, on a GPU by tests/cuda.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/attention/tiled_attention.h"
#include "qkv/core/errors.h"
#include "support/gradcheck.h"
#include "support/test_files.h"
#include "support/tolerance.h"

namespace qa = qkv::attention;
using qa::AttentionBackend;
using qkv::testing::expect_usage_error;
using qkv::testing::max_abs_difference;
using qkv::testing::rnd;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct LoopResult {
  at::Tensor output, weights;
};

// The definition, one query row at a time, in double:
//   logit_ij = scale * sum_c q_ic k_jc / tau + float_mask_ij   for allowed j
//   allowed: (!causal || j <= i + Nk - Nq) && bool_mask_ij && !padding_bj
//   w_ij = exp(logit_ij - max) / sum;  out_i = sum_j w_ij v_j;  no allowed j -> 0.
LoopResult loop_attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, double scale,
                          double tau, bool causal, const at::Tensor& bool_mask, const at::Tensor& float_mask,
                          const at::Tensor& padding) {
  at::Tensor q = q_in.detach().to(at::kDouble), k = k_in.detach().to(at::kDouble), v = v_in.detach().to(at::kDouble);
  const int64_t B = q.size(0), H = q.size(1), Nq = q.size(2), Nk = k.size(2), d = q.size(3), dv = v.size(3);
  at::Tensor bm = bool_mask.defined() ? bool_mask.expand({B, H, Nq, Nk}).contiguous() : at::Tensor();
  at::Tensor fm = float_mask.defined() ? float_mask.to(at::kDouble).expand({B, H, Nq, Nk}).contiguous() : at::Tensor();
  LoopResult r{at::zeros({B, H, Nq, dv}, at::kDouble), at::zeros({B, H, Nq, Nk}, at::kDouble)};
  auto Q = q.accessor<double, 4>(), K = k.accessor<double, 4>(), V = v.accessor<double, 4>();
  auto O = r.output.accessor<double, 4>(), W = r.weights.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Nq; ++i) {
        std::vector<double> logit(Nk, -kInf);
        double mx = -kInf;
        for (int64_t j = 0; j < Nk; ++j) {
          bool ok = !causal || j <= i + Nk - Nq;
          if (bm.defined()) ok = ok && bm[b][h][i][j].item<bool>();
          if (padding.defined()) ok = ok && !padding[b][j].item<bool>();
          if (!ok) continue;
          double s = 0;
          for (int64_t c = 0; c < d; ++c) s += Q[b][h][i][c] * K[b][h][j][c];
          logit[j] = scale * s / tau + (fm.defined() ? fm[b][h][i][j].item<double>() : 0.0);
          mx = std::max(mx, logit[j]);
        }
        if (mx == -kInf) continue;  // nothing visible: zeros
        double sum = 0;
        for (int64_t j = 0; j < Nk; ++j) sum += logit[j] == -kInf ? 0.0 : std::exp(logit[j] - mx);
        for (int64_t j = 0; j < Nk; ++j) {
          const double w = logit[j] == -kInf ? 0.0 : std::exp(logit[j] - mx) / sum;
          W[b][h][i][j] = w;
          for (int64_t c = 0; c < dv; ++c) O[b][h][i][c] += w * V[b][h][j][c];
        }
      }
  return r;
}

// Runs every backend (the tiled and torch ones where they serve the options)
// and checks output (and weights on the naive path) against the loop.
void check_against_loop(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, qa::SdpaOptions o,
                        double tol = 1e-10) {
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  LoopResult ref =
      loop_attention(q, k, v, scale, o.temperature, o.causal, o.bool_mask, o.float_mask, o.key_padding_mask);
  o.backend = AttentionBackend::Naive;
  o.need_weights = true;
  qa::SdpaResult naive = qa::scaled_dot_product_attention(q, k, v, o);
  EXPECT_LT(max_abs_difference(naive.output, ref.output), tol) << "naive output";
  EXPECT_LT(max_abs_difference(naive.weights, ref.weights), tol) << "naive weights";
  o.need_weights = false;
  if (qa::tiled_unsupported_reason(q, k, v, o).empty()) {
    o.backend = AttentionBackend::Tiled;
    EXPECT_LT(max_abs_difference(qa::scaled_dot_product_attention(q, k, v, o).output, ref.output), tol)
        << "tiled output";
  }
  if (qa::torch_attention_available()) {
    o.backend = AttentionBackend::Torch;
    EXPECT_LT(max_abs_difference(qa::scaled_dot_product_attention(q, k, v, o).output, ref.output), tol)
        << "torch output";
  }
}

}  // namespace

TEST(Sdpa, NoMaskMatchesLoop) {
  torch::manual_seed(10);
  check_against_loop(rnd({2, 3, 5, 4}), rnd({2, 3, 6, 4}), rnd({2, 3, 6, 3}), {});
}

TEST(Sdpa, CausalIsEndAligned) {
  torch::manual_seed(11);
  qa::SdpaOptions o;
  o.causal = true;
  check_against_loop(rnd({1, 2, 6, 3}), rnd({1, 2, 6, 3}), rnd({1, 2, 6, 2}), o);  // square: lower triangle
  check_against_loop(rnd({1, 2, 3, 3}), rnd({1, 2, 8, 3}), rnd({1, 2, 8, 2}), o);  // 3 new queries over 8 keys
  check_against_loop(rnd({1, 2, 7, 3}), rnd({1, 2, 4, 3}), rnd({1, 2, 4, 2}), o);  // Nq > Nk: first rows empty

  // End alignment spelled out: one query over 5 keys sees all 5 (not just key 0).
  at::Tensor q = rnd({1, 1, 1, 2}), k = rnd({1, 1, 5, 2}), v = rnd({1, 1, 5, 1});
  o.need_weights = true;
  qa::SdpaResult r = qa::scaled_dot_product_attention(q, k, v, o);
  EXPECT_GT(r.weights.min().item<double>(), 0.0);
  // Two queries over 5 keys: the first sees keys 0..3, the second all.
  r = qa::scaled_dot_product_attention(rnd({1, 1, 2, 2}), k, v, o);
  EXPECT_EQ(r.weights[0][0][0][4].item<double>(), 0.0);
  EXPECT_GT(r.weights[0][0][0][3].item<double>(), 0.0);
  EXPECT_GT(r.weights[0][0][1][4].item<double>(), 0.0);
}

TEST(Sdpa, BoolMaskBroadcasts) {
  torch::manual_seed(12);
  at::Tensor q = rnd({2, 3, 4, 5}), k = rnd({2, 3, 6, 5}), v = rnd({2, 3, 6, 2});
  for (auto shape : std::vector<std::vector<int64_t>>{{4, 6}, {2, 1, 4, 6}, {1, 3, 1, 6}, {6}, {2, 3, 4, 6}}) {
    qa::SdpaOptions o;
    o.bool_mask = at::rand(shape) < 0.6;
    check_against_loop(q, k, v, o);
    o.causal = true;
    check_against_loop(q, k, v, o);
  }
}

TEST(Sdpa, FloatMaskAddsToLogits) {
  torch::manual_seed(13);
  at::Tensor q = rnd({2, 2, 4, 3}), k = rnd({2, 2, 5, 3}), v = rnd({2, 2, 5, 4});
  qa::SdpaOptions o;
  o.float_mask = rnd({4, 5}) * 2;
  o.float_mask[1][2] = -kInf;
  o.float_mask[3].fill_(-kInf);  // query 3 sees nothing -> zeros
  check_against_loop(q, k, v, o);
  o.need_weights = true;
  qa::SdpaResult r = qa::scaled_dot_product_attention(q, k, v, o);
  EXPECT_EQ(r.output.select(2, 3).abs().max().item<double>(), 0.0);
  EXPECT_EQ(r.weights.select(2, 3).abs().max().item<double>(), 0.0);
  // A relative-position bias shared by heads: [1,1,Nq,Nk] plus a bool mask.
  o.float_mask = rnd({1, 1, 4, 5});
  o.bool_mask = at::rand({2, 1, 1, 5}) < 0.7;
  check_against_loop(q, k, v, o);
}

TEST(Sdpa, KeyPaddingTrueMeansIgnored) {
  torch::manual_seed(14);
  at::Tensor q = rnd({3, 2, 4, 3}), k = rnd({3, 2, 6, 3}), v = rnd({3, 2, 6, 2});
  qa::SdpaOptions o;
  o.key_padding_mask = at::zeros({3, 6}, at::kBool);
  o.key_padding_mask[0][5] = true;
  o.key_padding_mask[0][4] = true;
  o.key_padding_mask[1].fill_(true);  // batch 1 all padding
  check_against_loop(q, k, v, o);
  o.causal = true;
  check_against_loop(q, k, v, o);
  o.causal = false;
  o.need_weights = true;
  qa::SdpaResult r = qa::scaled_dot_product_attention(q, k, v, o);
  EXPECT_EQ(r.weights[0].select(-1, 5).abs().max().item<double>(), 0.0);  // padded key gets no weight
  EXPECT_EQ(r.output[1].abs().max().item<double>(), 0.0);
  EXPECT_NEAR(r.weights[2].sum(-1).min().item<double>(), 1.0, 1e-12);
}

TEST(Sdpa, FullyMaskedRowsGiveZerosAndFiniteGradients) {
  torch::manual_seed(15);
  std::vector<AttentionBackend> backends{AttentionBackend::Naive, AttentionBackend::Tiled};
  if (qa::torch_attention_available()) backends.push_back(AttentionBackend::Torch);
  for (AttentionBackend backend : backends)
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      at::Tensor q = rnd({2, 2, 5, 4}, dtype).requires_grad_(), k = rnd({2, 2, 3, 4}, dtype).requires_grad_(),
                 v = rnd({2, 2, 3, 2}, dtype).requires_grad_();
      qa::SdpaOptions o;
      o.backend = backend;
      o.causal = true;  // Nq = 5 > Nk = 3: queries 0 and 1 see no key
      o.key_padding_mask = at::zeros({2, 3}, at::kBool);
      o.key_padding_mask[1].fill_(true);  // batch 1: nothing at all
      o.need_weights = backend == AttentionBackend::Naive;
      qa::SdpaResult r = qa::scaled_dot_product_attention(q, k, v, o);
      EXPECT_TRUE(at::isfinite(r.output).all().item<bool>());
      EXPECT_EQ(r.output.narrow(2, 0, 2).abs().max().item<double>(), 0.0);
      EXPECT_EQ(r.output[1].abs().max().item<double>(), 0.0);
      EXPECT_GT(r.output[0].narrow(1, 2, 3).abs().max().item<double>(), 0.0);
      if (r.weights.defined()) {
        EXPECT_EQ(r.weights.narrow(2, 0, 2).abs().max().item<double>(), 0.0);
      }
      r.output.pow(2).sum().backward();
      for (const auto* t : {&q, &k, &v}) {
        ASSERT_TRUE(t->grad().defined());
        EXPECT_TRUE(at::isfinite(t->grad()).all().item<bool>()) << qa::backend_name(backend);
      }
      EXPECT_EQ(q.grad().narrow(2, 0, 2).abs().max().item<double>(), 0.0);  // empty rows: zero gradient
      EXPECT_EQ(k.grad()[1].abs().max().item<double>(), 0.0);
      // Also with an all-false bool mask row on the naive and torch paths.
      if (backend != AttentionBackend::Tiled) {
        q.mutable_grad() = at::Tensor();
        qa::SdpaOptions ob;
        ob.backend = backend;
        ob.bool_mask = at::ones({5, 3}, at::kBool);
        ob.bool_mask[2].fill_(false);
        at::Tensor out = qa::scaled_dot_product_attention(q, k, v, ob).output;
        EXPECT_EQ(out.select(2, 2).abs().max().item<double>(), 0.0);
        out.sum().backward();
        EXPECT_TRUE(at::isfinite(q.grad()).all().item<bool>());
      }
    }
}

TEST(Sdpa, TemperatureAndScale) {
  torch::manual_seed(16);
  at::Tensor q = rnd({1, 2, 4, 3}), k = rnd({1, 2, 5, 3}), v = rnd({1, 2, 5, 2});
  qa::SdpaOptions o;
  o.scale = 0.8;
  o.temperature = 0.25;
  check_against_loop(q, k, v, o);
  // logits = scale * q.k / tau: (scale 0.8, tau 0.25) == (scale 3.2, tau 1)
  qa::SdpaOptions o2;
  o2.scale = 3.2;
  EXPECT_LT(max_abs_difference(qa::scaled_dot_product_attention(q, k, v, o).output,
                               qa::scaled_dot_product_attention(q, k, v, o2).output),
            1e-12);
  // A huge temperature flattens the softmax: the output is the mean of the values.
  qa::SdpaOptions hot;
  hot.temperature = 1e12;
  hot.need_weights = true;
  qa::SdpaResult r = qa::scaled_dot_product_attention(q, k, v, hot);
  EXPECT_LT(max_abs_difference(r.weights, at::full_like(r.weights, 1.0 / 5)), 1e-9);
  EXPECT_LT(max_abs_difference(r.output, v.mean(2, true).expand({1, 2, 4, 2})), 1e-9);
  // A tiny temperature picks the argmax key.
  qa::SdpaOptions cold;
  cold.temperature = 1e-9;
  cold.need_weights = true;
  r = qa::scaled_dot_product_attention(q, k, v, cold);
  at::Tensor best = at::matmul(q, k.transpose(-2, -1)).argmax(-1);
  EXPECT_TRUE(r.weights.argmax(-1).equal(best));
  EXPECT_NEAR(r.weights.amax(-1).min().item<double>(), 1.0, 1e-9);
}

TEST(Sdpa, DropoutOnlyWhenTraining) {
  torch::manual_seed(17);
  at::Tensor q = rnd({1, 1, 6, 4}), k = rnd({1, 1, 6, 4}), v = rnd({1, 1, 6, 4});
  qa::SdpaOptions o;
  o.dropout = 0.5;
  at::Tensor plain = qa::scaled_dot_product_attention(q, k, v, {}).output;
  EXPECT_LT(max_abs_difference(qa::scaled_dot_product_attention(q, k, v, o).output, plain), 1e-15);  // training = false
  o.training = true;
  at::Tensor dropped = qa::scaled_dot_product_attention(q, k, v, o).output;
  EXPECT_GT(max_abs_difference(dropped, plain), 1e-3);
  EXPECT_TRUE(at::isfinite(dropped).all().item<bool>());
  EXPECT_EQ(qa::resolve_backend(q, k, v, o), AttentionBackend::Naive);
  o.backend = AttentionBackend::Tiled;
  EXPECT_THROW(qa::scaled_dot_product_attention(q, k, v, o), qkv::UsageError);
}

TEST(Sdpa, AutoRuleAndTiledEqualsNaiveThroughTheApi) {
  torch::manual_seed(18);
  const int64_t N = qa::kTiledMinKeys + 37;
  at::Tensor q = rnd({1, 2, 40, 16}, at::kFloat), k = rnd({1, 2, N, 16}, at::kFloat), v = rnd({1, 2, N, 8}, at::kFloat);
  qa::SdpaOptions o;
  EXPECT_EQ(qa::resolve_backend(q, k, v, o), AttentionBackend::Tiled);
  o.causal = true;
  o.key_padding_mask = at::rand({1, N}) < 0.2;
  EXPECT_EQ(qa::resolve_backend(q, k, v, o), AttentionBackend::Tiled);
  at::Tensor tiled = qa::scaled_dot_product_attention(q, k, v, o).output;
  o.backend = AttentionBackend::Naive;
  EXPECT_LT(max_abs_difference(tiled, qa::scaled_dot_product_attention(q, k, v, o).output), 1e-5);
  o.backend = AttentionBackend::Auto;
  // Short key ranges, weights, arbitrary masks and other dtypes stay naive.
  EXPECT_EQ(qa::resolve_backend(q, k.narrow(2, 0, 100), v.narrow(2, 0, 100), {}), AttentionBackend::Naive);
  qa::SdpaOptions w;
  w.need_weights = true;
  EXPECT_EQ(qa::resolve_backend(q, k, v, w), AttentionBackend::Naive);
  qa::SdpaOptions bm;
  bm.bool_mask = at::ones({40, N}, at::kBool);
  EXPECT_EQ(qa::resolve_backend(q, k, v, bm), AttentionBackend::Naive);
  EXPECT_EQ(qa::resolve_backend(q.to(at::kBFloat16), k.to(at::kBFloat16), v.to(at::kBFloat16), {}),
            AttentionBackend::Naive);
  bm.backend = AttentionBackend::Tiled;
  try {
    qa::scaled_dot_product_attention(q, k, v, bm);
    ADD_FAILURE() << "Tiled with a bool_mask must throw";
  } catch (const qkv::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bool_mask"), std::string::npos) << e.what();
  }
}

TEST(Sdpa, BadInputNamesTheArgument) {
  at::Tensor q = rnd({2, 3, 4, 5}), k = rnd({2, 3, 6, 5}), v = rnd({2, 3, 6, 7});
  auto call = [](at::Tensor q, at::Tensor k, at::Tensor v, qa::SdpaOptions o = {}) {
    return [=] { qa::scaled_dot_product_attention(q, k, v, o); };
  };
  expect_usage_error(call(rnd({3, 4, 5}), k, v), "q must be 4-D");
  expect_usage_error(call(q, rnd({3, 6, 5}), v), "k must be 4-D");
  expect_usage_error(call(q, k, rnd({2, 3, 6})), "v must be 4-D");
  expect_usage_error(call(q, rnd({1, 3, 6, 5}), rnd({1, 3, 6, 7})), "k batch size");
  expect_usage_error(call(q, rnd({2, 2, 6, 5}), rnd({2, 2, 6, 7})), "k heads");
  expect_usage_error(call(q, rnd({2, 3, 6, 4}), v), "k head width d");
  expect_usage_error(call(q, k, rnd({2, 3, 5, 7})), "v has Nk = 5");
  expect_usage_error(call(rnd({2, 3, 4, 0}), rnd({2, 3, 6, 0}), v), "d = 0");
  expect_usage_error(call(q, k.to(at::kFloat), v), "dtype");
  qa::SdpaOptions o;
  o.bool_mask = at::ones({4, 5}, at::kBool);  // Nk is 6
  expect_usage_error(call(q, k, v, o), "bool_mask");
  o.bool_mask = at::ones({3, 2, 4, 6}, at::kBool);  // B is 2
  expect_usage_error(call(q, k, v, o), "bool_mask");
  o.bool_mask = at::ones({4, 6});  // float, not bool
  expect_usage_error(call(q, k, v, o), "bool_mask must have dtype bool");
  o = {};
  o.float_mask = at::zeros({1, 2, 4, 6});
  expect_usage_error(call(q, k, v, o), "float_mask");
  o = {};
  o.key_padding_mask = at::zeros({2, 5}, at::kBool);
  expect_usage_error(call(q, k, v, o), "key_padding_mask");
  o.key_padding_mask = at::zeros({2, 6});  // not bool
  expect_usage_error(call(q, k, v, o), "key_padding_mask");
  o = {};
  o.temperature = 0;
  expect_usage_error(call(q, k, v, o), "temperature");
  o.temperature = -1;
  expect_usage_error(call(q, k, v, o), "temperature");
  o = {};
  o.scale = 0.0;
  expect_usage_error(call(q, k, v, o), "scale");
  o.scale = -2.0;
  expect_usage_error(call(q, k, v, o), "scale");
  o = {};
  o.dropout = 1.0;
  expect_usage_error(call(q, k, v, o), "dropout");
  // The tiled kernel's own entry point checks too.
  expect_usage_error([&] { qa::tiled_attention(q, k, rnd({2, 3, 5, 7}), 1.0); }, "v");
}

TEST(Sdpa, ValuesThatAreNotFiniteSpreadAsTheReferenceSpreadsThemOnEveryBackend) {
  // The tiled kernel's running maximum skipped a NaN score (the key dropped);
  // the composed formula spreads it. Both backends now give the composed result.
  torch::manual_seed(12);
  const auto q = rnd({1, 2, 4, 8}), v = rnd({1, 2, 200, 8});
  auto k = rnd({1, 2, 200, 8});
  k[0][1][37][3] = std::numeric_limits<float>::quiet_NaN();
  for (const auto backend : {AttentionBackend::Naive, AttentionBackend::Tiled, AttentionBackend::Auto}) {
    qa::SdpaOptions o;
    o.backend = backend;
    const auto out = qa::scaled_dot_product_attention(q, k, v, o).output;
    EXPECT_FALSE(at::isnan(out[0][0]).any().item<bool>());  // head 0 never sees the NaN key
    EXPECT_TRUE(at::isnan(out[0][1]).all().item<bool>());   // every row of head 1 attends to it
  }
  // Finite inputs still take the tiled kernel, equal to the composed one.
  qa::SdpaOptions tiled, naive;
  tiled.backend = AttentionBackend::Tiled;
  naive.backend = AttentionBackend::Naive;
  k[0][1][37][3] = 0.25;
  EXPECT_LT(max_abs_difference(qa::scaled_dot_product_attention(q, k, v, tiled).output,
                               qa::scaled_dot_product_attention(q, k, v, naive).output),
            1e-5);
}

// The Torch backend gives what the naive path gives, output and gradients,
// under every mask qkv has: masks PyTorch's kernels take in another form
// (end-aligned causal with Nq != Nk, padding, fully masked rows) included.
// A build without it refuses the request by name.
TEST(Sdpa, TorchBackendMatchesNaiveInOutputAndGradients) {
  at::Tensor q0 = rnd({1, 1, 2, 2}), k0 = rnd({1, 1, 2, 2});
  qa::SdpaOptions torch_backend;
  torch_backend.backend = AttentionBackend::Torch;
  if (!qa::torch_attention_available()) {
    expect_usage_error([&] { qa::scaled_dot_product_attention(q0, k0, k0, torch_backend); }, "2.1 or later");
    GTEST_SKIP() << "this build's LibTorch has no fused attention";
  }
  torch_backend.need_weights = true;
  expect_usage_error([&] { qa::scaled_dot_product_attention(q0, k0, k0, torch_backend); }, "need_weights");

  torch::manual_seed(21);
  const int64_t B = 2, H = 2, Nk = 7, d = 5, dv = 3;
  std::vector<std::pair<std::string, std::function<qa::SdpaOptions(int64_t nq)>>> cases = {
      {"plain", [](int64_t) { return qa::SdpaOptions{}; }},
      {"causal",
       [](int64_t) {
         qa::SdpaOptions o;
         o.causal = true;
         return o;
       }},
      {"scale and temperature",
       [](int64_t) {
         qa::SdpaOptions o;
         o.scale = 0.6;
         o.temperature = 0.5;
         return o;
       }},
      {"bool mask with an empty row and padding",
       [&](int64_t nq) {
         qa::SdpaOptions o;
         o.bool_mask = at::rand({B, 1, nq, Nk}) < 0.6;
         o.bool_mask[0][0][0].fill_(false);
         o.key_padding_mask = at::zeros({B, Nk}, at::kBool);
         o.key_padding_mask[1][2] = true;
         return o;
       }},
      {"float mask with an empty row, causal",
       [&](int64_t nq) {
         qa::SdpaOptions o;
         o.float_mask = rnd({1, H, nq, Nk});
         o.float_mask[0][1][nq - 1].fill_(-kInf);
         o.causal = true;
         return o;
       }},
  };
  for (const int64_t nq : {int64_t{7}, int64_t{4}, int64_t{9}})  // Nq = Nk, fewer queries, more (empty rows)
    for (const auto& [name, make] : cases)
      for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
        SCOPED_TRACE(name + ", Nq " + std::to_string(nq) + ", " + c10::toString(dtype));
        const qa::SdpaOptions options = make(nq);
        const at::Tensor q = rnd({B, H, nq, d}, dtype), k = rnd({B, H, Nk, d}, dtype), v = rnd({B, H, Nk, dv}, dtype);
        const at::Tensor up = rnd({B, H, nq, dv}, dtype);
        auto run = [&](AttentionBackend backend) {
          std::vector<at::Tensor> leaves{q.clone().requires_grad_(), k.clone().requires_grad_(),
                                         v.clone().requires_grad_()};
          qa::SdpaOptions o = options;
          o.backend = backend;
          at::Tensor out = qa::scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], o).output;
          (out * up).sum().backward();
          return std::vector<at::Tensor>{out, leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
        };
        const auto fused = run(AttentionBackend::Torch), naive = run(AttentionBackend::Naive);
        const double bound = dtype == at::kDouble ? 1e-12 : 1e-5;
        const char* const names[] = {"output", "dq", "dk", "dv"};
        for (size_t i = 0; i < fused.size(); ++i)
          EXPECT_LT(qkv::testing::precision_difference(fused[i], naive[i]), bound) << names[i];
      }

  // Central differences on small float64 inputs, with a padded key and causal rows.
  qa::SdpaOptions o;
  o.backend = AttentionBackend::Torch;
  o.causal = true;
  o.key_padding_mask = at::zeros({1, 6}, at::kBool);
  o.key_padding_mask[0][1] = true;
  const double error = qkv::testing::max_gradient_error(
      [&](const std::vector<at::Tensor>& in) {
        return qa::scaled_dot_product_attention(in[0], in[1], in[2], o).output;
      },
      {rnd({1, 2, 4, 3}), rnd({1, 2, 6, 3}), rnd({1, 2, 6, 2})});
  EXPECT_LT(error, 1e-7);
}

// The Torch backend's gradients follow qkv's rules for fused kernels: a
// learnable float_mask gets its gradient, a backward can run twice
// (retain_graph), and a second-order gradient (create_graph, a gradient
// penalty) equals the naive path's, which it differentiates.
TEST(Sdpa, TorchBackendGradientsOfEveryOrderEqualTheNaivePaths) {
  if (!qa::torch_attention_available()) GTEST_SKIP() << "this build's LibTorch has no fused attention";
  torch::manual_seed(22);
  const at::Tensor q0 = rnd({2, 2, 5, 4}), k0 = rnd({2, 2, 6, 4}), v0 = rnd({2, 2, 6, 3}), mask0 = rnd({1, 2, 5, 6});
  const at::Tensor up = rnd({2, 2, 5, 3});
  auto run = [&](AttentionBackend backend) {
    std::vector<at::Tensor> in{q0.clone().requires_grad_(), k0.clone().requires_grad_(), v0.clone().requires_grad_(),
                               mask0.clone().requires_grad_()};
    qa::SdpaOptions o;
    o.backend = backend;
    o.causal = true;
    o.float_mask = in[3];
    const at::Tensor out = qa::scaled_dot_product_attention(in[0], in[1], in[2], o).output;
    const at::Tensor loss = (out * up).sum();
    const auto first = torch::autograd::grad({loss}, in, {}, /*retain_graph=*/true, /*create_graph=*/true);
    const auto again = torch::autograd::grad({loss}, in, {}, /*retain_graph=*/true);
    at::Tensor penalty = at::zeros({}, at::kDouble);
    for (const auto& g : first) penalty = penalty + g.pow(2).sum();
    auto second = torch::autograd::grad({penalty}, in);
    second.insert(second.end(), first.begin(), first.end());
    second.insert(second.end(), again.begin(), again.end());
    return second;
  };
  const auto fused = run(AttentionBackend::Torch), naive = run(AttentionBackend::Naive);
  ASSERT_EQ(fused.size(), naive.size());
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_LT(max_abs_difference(fused[i], naive[i]), 1e-10) << (i < 4 ? "second order " : "first order ") << i % 4;
}

// Self-attention feeds one tensor to q, k and v (and here 2x to k): a fused
// backward under create_graph must give each input its partial derivative,
// not the total one, which the engine would then sum three times over.
TEST(Sdpa, FusedGradientsOfSelfAttentionEqualTheNaivePathsToSecondOrder) {
  torch::manual_seed(23);
  const at::Tensor x0 = rnd({2, 2, 6, 4}), up = rnd({2, 2, 6, 4});
  auto run = [&](AttentionBackend backend) {
    const at::Tensor x = x0.clone().requires_grad_();
    qa::SdpaOptions o;
    o.backend = backend;
    o.causal = true;
    const at::Tensor loss = (qa::scaled_dot_product_attention(x, 2 * x, x, o).output * up).sum();
    const auto first = torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    const auto plain = torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true)[0];
    const auto second = torch::autograd::grad({first.pow(2).sum()}, {x})[0];
    return std::vector<at::Tensor>{first, plain, second};
  };
  const auto naive = run(AttentionBackend::Naive);
  std::vector<AttentionBackend> fused{AttentionBackend::Tiled};
  if (qa::torch_attention_available()) fused.push_back(AttentionBackend::Torch);
  for (const auto backend : fused) {
    const auto got = run(backend);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LT(max_abs_difference(got[i], naive[i]), 1e-10 * naive[i].abs().max().item<double>())
          << qa::backend_name(backend)
          << (i == 0   ? ": first order under create_graph"
              : i == 1 ? ": first order"
                       : ": second order");
  }
}

// Off the CPU, Auto takes PyTorch's fused kernels where the build has them
// (meta tensors stand for a GPU's here: the rule looks at the device alone).
TEST(Sdpa, AutoTakesTheFusedKernelsOffTheCpu) {
  const auto meta = at::TensorOptions().device(at::kMeta);
  const at::Tensor q = at::empty({1, 2, 300, 8}, meta), k = at::empty({1, 2, 300, 8}, meta);
  EXPECT_EQ(qa::resolve_backend(q, k, k, {}),
            qa::torch_attention_available() ? AttentionBackend::Torch : AttentionBackend::Naive);
  qa::SdpaOptions weights;
  weights.need_weights = true;
  EXPECT_EQ(qa::resolve_backend(q, k, k, weights), AttentionBackend::Naive);
  // On the CPU Auto never takes them: the tiled kernel or the composed path.
  EXPECT_EQ(qa::resolve_backend(rnd({1, 2, 300, 8}), rnd({1, 2, 300, 8}), rnd({1, 2, 300, 8}), {}),
            AttentionBackend::Tiled);
}
