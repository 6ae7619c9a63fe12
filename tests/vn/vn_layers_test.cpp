// Every vector-neuron layer commutes with rotations (or is invariant), to
// float64 rounding; VNAttention is the paper's formula.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>

#include "qkv/attention/sdpa.h"
#include "qkv/core/errors.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"
#include "support/haar_rotation.h"
#include "support/test_files.h"

using namespace qkv;
using qkv::testing::haar_rotation;
using namespace qkv::vn;

namespace {

// R acts on dim 2 of a VN feature [B, C, 3, ...].
at::Tensor rotate_vn(const at::Tensor& x, const at::Tensor& r) {
  return torch::matmul(x.movedim(2, -1), r.to(x.scalar_type()).t()).movedim(-1, 2);
}

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// f(R x) == R f(x) for several rotations, in float64.
void expect_equivariant(const std::function<at::Tensor(const at::Tensor&)>& f, const at::Tensor& x, double tol = 1e-9) {
  for (int64_t s = 1; s <= 3; ++s) {
    const auto r = haar_rotation(s);
    const auto lhs = f(rotate_vn(x, r));
    const auto rhs = rotate_vn(f(x), r);
    EXPECT_LE(max_abs(lhs, rhs), tol) << "rotation seed " << s;
    EXPECT_GT(f(x).abs().max().item<double>(), 1e-3) << "the output must not be trivially zero";
  }
}

void expect_invariant(const std::function<at::Tensor(const at::Tensor&)>& f, const at::Tensor& x, double tol = 1e-9) {
  for (int64_t s = 1; s <= 3; ++s) {
    const auto r = haar_rotation(s);
    EXPECT_LE(max_abs(f(rotate_vn(x, r)), f(x)), tol) << "rotation seed " << s;
  }
}

at::Tensor features(std::vector<int64_t> sizes, int64_t seed = 0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(sizes, gen, torch::kDouble);
}

}  // namespace

// Outside the anonymous namespace: TEST_F derives from it in the area's unit.
class VNLayers : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(7); }
};

TEST_F(VNLayers, LinearIsEquivariantOnPointsAndGraphs) {
  VNLinear lin(5, 7);
  lin->to(torch::kDouble);
  expect_equivariant([&](const at::Tensor& x) { return lin->forward(x); }, features({2, 5, 3, 16}));
  expect_equivariant([&](const at::Tensor& x) { return lin->forward(x); }, features({2, 5, 3, 16, 4}));
  EXPECT_EQ(lin->forward(features({2, 5, 3, 16})).sizes(), (std::vector<int64_t>{2, 7, 3, 16}));
}

TEST_F(VNLayers, LeakyReLUIsEquivariantSharedOrNot) {
  for (bool share : {false, true}) {
    VNLeakyReLU act(6, share, 0.2);
    act->to(torch::kDouble);
    expect_equivariant([&](const at::Tensor& x) { return act->forward(x); }, features({2, 6, 3, 32}));
  }
}

TEST_F(VNLayers, LeakyReLUActuallyRectifies) {
  // With d = x's negation on one channel, <x, d> < 0 and the output loses the
  // component along d: here all of it (slope 0).
  auto x = features({1, 1, 3, 4});
  auto out = vn_leaky_relu(x, -x, 0.0);
  EXPECT_LE(out.abs().max().item<double>(), 1e-5);
  EXPECT_LE(max_abs(vn_leaky_relu(x, x, 0.0), x), 1e-12);  // <x, d> > 0: unchanged
}

TEST_F(VNLayers, ZeroVectorsGiveFiniteOutputsAndGradients) {
  auto x = torch::zeros({2, 4, 3, 8}, torch::kDouble).requires_grad_(true);
  VNLinearLeakyReLU block(4, 4);
  block->to(torch::kDouble);
  VNLayerNorm ln(4);
  ln->to(torch::kDouble);
  auto y = block->forward(x) + ln->forward(x) + vn_leaky_relu(x, torch::zeros_like(x), 0.2);
  y.sum().backward();
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
}

TEST_F(VNLayers, BatchNormIsEquivariantInTrainingAndEval) {
  VNBatchNorm bn(5);
  bn->to(torch::kDouble);
  const auto x = features({4, 5, 3, 16});
  expect_equivariant([&](const at::Tensor& t) { return bn->forward(t); }, x);
  // Training normalises the norms per channel: mean over batch and points ~ 0 (+bias 0).
  const auto out_norm = vn_norm(bn->forward(x), 0);
  EXPECT_GT(bn->running_mean.abs().sum().item<double>(), 0.0);
  bn->eval();
  expect_equivariant([&](const at::Tensor& t) { return bn->forward(t); }, x);
  EXPECT_TRUE(torch::isfinite(out_norm).all().item<bool>());
}

TEST_F(VNLayers, LayerNormIsEquivariant) {
  VNLayerNorm ln(6);
  ln->to(torch::kDouble);
  expect_equivariant([&](const at::Tensor& x) { return ln->forward(x); }, features({2, 6, 3, 10}));
}

TEST_F(VNLayers, LinearLeakyReLUIsEquivariantOnPointsAndGraphs) {
  for (bool share : {false, true}) {
    VNLinearLeakyReLU block(4, 6, share);
    block->to(torch::kDouble);
    expect_equivariant([&](const at::Tensor& x) { return block->forward(x); }, features({3, 4, 3, 12}));
    expect_equivariant([&](const at::Tensor& x) { return block->forward(x); }, features({3, 4, 3, 12, 5}));
  }
}

TEST_F(VNLayers, PoolsAreEquivariant) {
  VNMaxPool pool(5);
  pool->to(torch::kDouble);
  expect_equivariant([&](const at::Tensor& x) { return pool->forward(x); }, features({2, 5, 3, 20}));
  expect_equivariant([](const at::Tensor& x) { return vn_mean_pool(x); }, features({2, 5, 3, 20}));
  // The max pool returns one of the input vectors, the one with the largest <x, d>.
  const auto x = features({1, 5, 3, 20});
  const auto picked = pool->forward(x);
  const auto dot = (x * pool->map_to_dir->forward(x)).sum(2);  // [1, 5, 20]
  const auto best = dot.argmax(-1);
  for (int64_t c = 0; c < 5; ++c) EXPECT_LE(max_abs(picked[0][c], x[0][c].select(1, best[0][c].item<int64_t>())), 0.0);
}

TEST_F(VNLayers, StdFeatureIsInvariantWithFreeAndOrthonormalFrames) {
  for (bool normalize : {false, true}) {
    VNStdFeature std_feature(8, normalize);
    std_feature->to(torch::kDouble);
    const auto x = features({2, 8, 3, 16});
    expect_invariant([&](const at::Tensor& t) { return std_feature->forward(t).first; }, x);
    expect_equivariant([&](const at::Tensor& t) { return std_feature->forward(t).second; }, x);
    if (normalize) {                                                        // F F^T = I, det F = +1 at every point
      const auto f = std_feature->forward(x).second.permute({0, 3, 1, 2});  // [B, N, 3, 3]
      const auto eye = torch::eye(3, torch::kDouble).expand_as(f);
      EXPECT_LE(max_abs(torch::matmul(f, f.transpose(-1, -2)), eye), 1e-9);
      EXPECT_LE((torch::det(f) - 1).abs().max().item<double>(), 1e-9);
    }
  }
}

TEST_F(VNLayers, StdFeatureRefusesAnOrthonormalFrameFromOneChannel) {
  // 4..7 channels leave vn2 one channel: its two predicted vectors are parallel.
  for (int64_t channels = 4; channels < 8; ++channels) {
    qkv::testing::expect_usage_error([&] { VNStdFeature(channels, /*normalize_frame=*/true); },
                                     "normalize_frame needs at least 8 input channels");
    VNStdFeature free_frame(channels, /*normalize_frame=*/false);  // the reference code's: allowed
  }
  qkv::testing::expect_usage_error([] { VNStdFeature(3, false); }, "needs at least 4 input channels");
}

TEST_F(VNLayers, EdgeFeaturesAreEquivariantAndMatchTheirDefinition) {
  const auto x = features({2, 2, 3, 12});
  const auto idx = knn_indices(x.reshape({2, 6, 12}), 4);
  for (bool cross : {false, true}) {
    expect_equivariant([&](const at::Tensor& t) { return edge_features(t, idx, cross); }, x);
    const auto e = edge_features(x, idx, cross);
    EXPECT_EQ(e.sizes(), (std::vector<int64_t>{2, cross ? 6 : 4, 3, 12, 4}));
    // Edge (b=1, point 5, neighbour 2): channel c is nbr - ctr, channel 2 + c is ctr.
    const int64_t j = idx[1][5][2].item<int64_t>();
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_LE(max_abs(e[1][c].select(1, 5).select(1, 2), x[1][c].select(1, j) - x[1][c].select(1, 5)), 1e-15);
      EXPECT_LE(max_abs(e[1][2 + c].select(1, 5).select(1, 2), x[1][c].select(1, 5)), 0.0);
      if (cross) {
        EXPECT_LE(
            max_abs(e[1][4 + c].select(1, 5).select(1, 2), torch::cross(x[1][c].select(1, j), x[1][c].select(1, 5), 0)),
            1e-15);
      }
    }
  }
}

TEST_F(VNLayers, EdgeConvIsEquivariantAndItsGraphInvariant) {
  VNEdgeConv conv(1, 8, 6, /*with_cross=*/true);
  conv->to(torch::kDouble);
  const auto points = features({2, 1, 3, 30});
  auto f = [&](const at::Tensor& p) { return conv->forward(p, knn_indices(p.reshape({2, 3, 30}), 6)); };
  expect_equivariant(f, points);
  // A graph of another k than the module's is refused, not silently used.
  qkv::testing::expect_usage_error(
      [&] {
        conv->forward(points, knn_indices(points.reshape({2, 3, 30}), 5));
      },
      "expected idx [B, N, k] with the module's k = 6, got [2, 30, 5]");
  qkv::testing::expect_usage_error([] { VNEdgeConv(1, 8, 0); }, "k must be at least 1, got 0");
}

TEST_F(VNLayers, KnnMatchesBruteForceAndRejectsTooFewPoints) {
  const auto pts = features({2, 3, 40});
  const auto idx = knn_indices(pts, 5);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 40; ++i) {
      const auto d = (pts[b] - pts[b].select(1, i).unsqueeze(1)).pow(2).sum(0);  // [40]
      const auto expected = std::get<1>(d.sort());
      for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(idx[b][i][j].item<int64_t>(), expected[j].item<int64_t>());
    }
  try {
    knn_indices(features({1, 3, 4}), 5);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("fewer points than k = 5"), std::string::npos) << e.what();
  }
}

TEST_F(VNLayers, VNAttentionIsThePerChannelSumOfProducts) {
  const int64_t b = 2, h = 3, n = 140, c = 4;  // n >= 128: Auto picks the tiled kernel
  const auto q = features({b, h, n, c, 3}, 1), k = features({b, h, n, c, 3}, 2), v = features({b, h, n, 5, 3}, 3);
  // The paper's definition: S = sum_c Q_(c) K_(c)^T with Q_(c) [N, 3].
  auto s = torch::zeros({b, h, n, n}, torch::kDouble);
  for (int64_t ch = 0; ch < c; ++ch) s += torch::matmul(q.select(3, ch), k.select(3, ch).transpose(-1, -2));
  const auto w = torch::softmax(s / std::sqrt(static_cast<double>(c)), -1);
  const auto expected = torch::matmul(w, v.flatten(3)).view({b, h, n, 5, 3});
  for (auto backend : {attention::AttentionBackend::Naive, attention::AttentionBackend::Tiled}) {
    attention::SdpaOptions o;
    o.backend = backend;
    EXPECT_LE(max_abs(vn_attention(q, k, v, o).output, expected), 1e-12) << attention::backend_name(backend);
  }
  attention::SdpaOptions with_weights;
  with_weights.need_weights = true;
  EXPECT_LE(max_abs(vn_attention(q, k, v, with_weights).weights, w), 1e-12);
}

TEST_F(VNLayers, VNAttentionWithOneDimensionIsOrdinaryAttention) {
  // The paper's reduction: with D = 1 (vectors along one axis) VNAttention is
  // softmax(Q K^T / sqrt(d_k)) V on the scalars.
  const int64_t n = 20, c = 6;
  const auto qs = features({1, 2, n, c}, 4), ks = features({1, 2, n, c}, 5), vs = features({1, 2, n, c}, 6);
  auto lift = [](const at::Tensor& t) {
    return torch::stack({t, torch::zeros_like(t), torch::zeros_like(t)}, -1);  // [.., C, 3]
  };
  const auto out = vn_attention(lift(qs), lift(ks), lift(vs)).output;
  const auto ordinary = attention::scaled_dot_product_attention(qs, ks, vs).output;
  EXPECT_LE(max_abs(out.select(-1, 0), ordinary), 1e-12);
  EXPECT_LE(out.select(-1, 1).abs().max().item<double>(), 0.0);
}

TEST_F(VNLayers, MultiHeadAttentionEqualsItsComposedDefinition) {
  // The module (projections straight into the attention rows, vn_heads.h)
  // against the definition: W^Q, W^K, W^V as VN linears, per head [N, d, 3]
  // tokens, vn_attention, concat, W^O. Values, weights and every gradient;
  // N = 140 runs the tiled kernel, N = 20 the naive one.
  for (const int64_t n : {20, 140}) {
    SCOPED_TRACE("N = " + std::to_string(n));
    torch::manual_seed(6);
    VNMultiHeadAttention mha(5, 3, 4);
    mha->to(torch::kDouble);
    const auto x = features({2, 5, 3, n}, 7);
    const auto up = features({2, 5, 3, n}, 8);
    attention::SdpaOptions options;
    options.need_weights = true;
    auto reference = [&](const at::Tensor& t) {
      auto split = [&](const at::Tensor& p) { return p.view({2, 3, 4, 3, n}).permute({0, 1, 4, 2, 3}); };
      auto r = vn_attention(split(vn_linear(t, mha->w_q->weight)), split(vn_linear(t, mha->w_k->weight)),
                            split(vn_linear(t, mha->w_v->weight)), options);
      return VNAttentionResult{vn_linear(r.output.permute({0, 1, 3, 4, 2}).reshape({2, 12, 3, n}), mha->w_o->weight),
                               r.weights};
    };
    VNAttentionResult results[2];
    std::vector<at::Tensor> grads[2];
    for (int module = 0; module < 2; ++module) {
      const auto leaf = x.clone().requires_grad_();
      mha->zero_grad();
      results[module] = module ? mha->forward(leaf, options) : reference(leaf);
      (results[module].output * up).sum().backward();
      grads[module] = {leaf.grad()};
      for (const auto& p : mha->parameters()) grads[module].push_back(p.grad().clone());
    }
    ASSERT_EQ(results[1].output.sizes(), x.sizes());
    EXPECT_LE(max_abs(results[0].output, results[1].output), 1e-12);
    EXPECT_LE(max_abs(results[0].weights, results[1].weights), 1e-12);
    for (size_t g = 0; g < grads[0].size(); ++g)
      EXPECT_LE(max_abs(grads[0][g], grads[1][g]), 1e-11) << "gradient " << g;
  }
  EXPECT_THROW(VNMultiHeadAttention(5, 3, 4)->forward(torch::randn({1, 4, 3, 8})), UsageError);
}

TEST_F(VNLayers, MultiHeadAttentionFeedForwardAndBlockAreEquivariant) {
  VNMultiHeadAttention mha(6, 3, 4);
  mha->to(torch::kDouble);
  expect_equivariant([&](const at::Tensor& x) { return mha->forward(x).output; }, features({2, 6, 3, 24}));
  VNFeedForward ffn(6, 12);
  ffn->to(torch::kDouble);
  expect_equivariant([&](const at::Tensor& x) { return ffn->forward(x); }, features({2, 6, 3, 24}));
  for (bool ln : {false, true}) {
    VNTBlock block(6, 3, 4, 12, ln);
    block->to(torch::kDouble);
    expect_equivariant([&](const at::Tensor& x) { return block->forward(x); }, features({2, 6, 3, 130}));
  }
  // The attention matrix itself is invariant (the paper's Figure 3).
  at::Tensor w1, w2;
  VNTBlock block(6, 3, 4, 12, false);
  block->to(torch::kDouble);
  const auto x = features({1, 6, 3, 24});
  block->forward(x, &w1);
  block->forward(rotate_vn(x, haar_rotation(9)), &w2);
  EXPECT_EQ(w1.sizes(), (std::vector<int64_t>{1, 3, 24, 24}));
  EXPECT_LE(max_abs(w1, w2), 1e-12);
}

TEST_F(VNLayers, BadShapesAreUsageErrors) {
  VNLinear lin(4, 4);
  EXPECT_THROW(lin->forward(torch::zeros({2, 3, 3, 5})), UsageError);
  EXPECT_THROW(lin->forward(torch::zeros({2, 4, 2, 5})), UsageError);
  VNMultiHeadAttention mha(4, 2, 2);
  EXPECT_THROW(mha->forward(torch::zeros({2, 4, 3})), UsageError);
}
