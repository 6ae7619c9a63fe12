// The MHCA paper's networks: parameter counts of Table 1, the co-attention
// against a naive computation, where each SPECT token sits in the input, and
// a model that learns.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "qkv/attention/co_attention.h"
#include "qkv/core/errors.h"
#include "qkv/models/mhca.h"
#include "qkv/tasks/mhca_explain.h"

namespace qkv::testing {
namespace {

using models::count_parameters;

TEST(MhcaModels, ParameterCountsReproduceThePapersTable) {
  const auto& mhca = models::find_model("mhca");
  EXPECT_EQ(count_parameters(*mhca.make(nlohmann::json::object())), 2020883);
  EXPECT_EQ(count_parameters(*models::find_model("concatnet").make(nlohmann::json::object())), 3824066);
  EXPECT_EQ(count_parameters(*models::find_model("spectnet").make(nlohmann::json::object())), 3793378);
}

TEST(MhcaModels, DefaultTokenGridIsSevenByNineBySeven) {
  models::SpectEncoderOptions o;
  EXPECT_EQ(o.token_grid(), (std::array<int64_t, 3>{7, 9, 7}));
  EXPECT_EQ(o.tokens(), 441);
  models::SpectEncoder encoder(o);
  auto out = encoder->forward(torch::zeros({1, 1, 91, 109, 91}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{1, 64, 7, 9, 7}));
}

TEST(MhcaModels, BadSizesAreUsageErrorsNamingTheOption) {
  try {
    models::find_model("mhca").make({{"features", 100}});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("441"), std::string::npos) << e.what();
  }
  EXPECT_THROW(models::find_model("spectnet").make({{"volume_shape", {20, 20, 20}}}), UsageError);
  EXPECT_THROW(models::find_model("mhca").make({{"heads", 3}}), UsageError);
  EXPECT_THROW(models::find_model("concatnet").make({{"volume_shape", {20, 20}}}), UsageError);
}

// Naive co-attention in double, one head at a time, with explicit loops.
void naive_co_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads, double key_dim,
                        at::Tensor& values_out, at::Tensor& queries_out) {
  const int64_t B = q.size(0), Nq = q.size(1), Nk = k.size(1), D = q.size(2), d = D / heads;
  values_out = torch::zeros({B, Nq, D}, torch::kDouble);
  queries_out = torch::zeros({B, Nk, D}, torch::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<std::vector<double>> s(Nq, std::vector<double>(Nk));
      for (int64_t i = 0; i < Nq; ++i)
        for (int64_t j = 0; j < Nk; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += q[b][i][h * d + c].item<double>() * k[b][j][h * d + c].item<double>();
          s[i][j] = dot / std::sqrt(key_dim);
        }
      for (int64_t i = 0; i < Nq; ++i) {  // softmax over keys
        double z = 0;
        for (int64_t j = 0; j < Nk; ++j) z += std::exp(s[i][j]);
        for (int64_t j = 0; j < Nk; ++j)
          for (int64_t c = 0; c < d; ++c)
            values_out[b][i][h * d + c] += std::exp(s[i][j]) / z * v[b][j][h * d + c].item<double>();
      }
      for (int64_t j = 0; j < Nk; ++j) {  // softmax over queries
        double z = 0;
        for (int64_t i = 0; i < Nq; ++i) z += std::exp(s[i][j]);
        for (int64_t i = 0; i < Nq; ++i)
          for (int64_t c = 0; c < d; ++c)
            queries_out[b][j][h * d + c] += std::exp(s[i][j]) / z * q[b][i][h * d + c].item<double>();
      }
    }
}

TEST(CoAttention, HandComputedTwoByTwoCase) {
  // One head, width 1, d_k = 1: S = q k^T exactly.
  auto q = torch::tensor({1.0, 2.0}, torch::kDouble).view({1, 2, 1});
  auto k = torch::tensor({0.0, 1.0}, torch::kDouble).view({1, 2, 1});
  auto v = torch::tensor({10.0, 20.0}, torch::kDouble).view({1, 2, 1});
  auto r = attention::co_attention(q, k, v, 1, torch::ones({1}, torch::kDouble));
  // S = [[0, 1], [0, 2]]; softmax over keys: row 0 (1, e)/(1+e), row 1 (1, e^2)/(1+e^2).
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.values_out[0][0][0].item<double>(), (10 + 20 * e) / (1 + e), 1e-12);
  EXPECT_NEAR(r.values_out[0][1][0].item<double>(), (10 + 20 * e * e) / (1 + e * e), 1e-12);
  // Softmax over queries: column 0 (1, 1)/2, column 1 (e, e^2)/(e+e^2).
  EXPECT_NEAR(r.queries_out[0][0][0].item<double>(), (1 + 2) / 2.0, 1e-12);
  EXPECT_NEAR(r.queries_out[0][1][0].item<double>(), (e * 1 + e * e * 2) / (e + e * e), 1e-12);
  EXPECT_TRUE(torch::allclose(r.alpha_v.sum(-1), torch::ones({1, 1, 2}, torch::kDouble)));
  EXPECT_TRUE(torch::allclose(r.alpha_q.sum(-2), torch::ones({1, 1, 2}, torch::kDouble)));
}

TEST(CoAttention, EqualsNaiveLoopsForSeveralHeads) {
  torch::manual_seed(3);
  auto q = torch::randn({2, 5, 6}, torch::kDouble);
  auto k = torch::randn({2, 4, 6}, torch::kDouble);
  auto v = torch::randn({2, 4, 6}, torch::kDouble);
  auto r = attention::co_attention(q, k, v, 3, torch::full({1}, 2.0, torch::kDouble));
  at::Tensor vo, qo;
  naive_co_attention(q, k, v, 3, 2.0, vo, qo);
  EXPECT_TRUE(torch::allclose(r.values_out, vo, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(r.queries_out, qo, 1e-12, 1e-12));
  EXPECT_EQ(r.scores.sizes(), (std::vector<int64_t>{2, 3, 5, 4}));
}

TEST(CoAttention, ModuleAddsResidualsThenReluThenLayerNorm) {
  torch::manual_seed(5);
  models::MultiHeadCoAttention block(3, 5, 4, 2, 0.0);
  block->to(torch::kDouble);
  auto m = torch::randn({2, 6, 3}, torch::kDouble), s = torch::randn({2, 6, 5}, torch::kDouble);
  auto out = block->forward(m, s);
  auto P = block->named_parameters();
  auto lin = [&](const std::string& name, const at::Tensor& x) {
    return torch::relu(torch::matmul(x, P[name + ".weight"].t()) + P[name + ".bias"]);
  };
  at::Tensor vo, qo;
  naive_co_attention(lin("q", m), lin("k", s), lin("v", s), 2, P["key_dim"].item<double>(), vo, qo);
  EXPECT_DOUBLE_EQ(P["key_dim"].item<double>(), 2.0);  // initialised to the head width 4 / 2
  auto pre = torch::relu(vo + lin("res_k", m) + qo + lin("res_q", s));
  auto mean = pre.mean(-1, true), var = pre.var(-1, false, true);
  auto expected = (pre - mean) / torch::sqrt(var + 1e-5) * P["norm.weight"] + P["norm.bias"];
  EXPECT_TRUE(torch::allclose(out.hidden, expected, 1e-9, 1e-9));
  EXPECT_THROW(block->forward(m, s.slice(1, 0, 5)), UsageError);
  // key_dim_init replaces the head width as d_k's first value; the scores follow.
  torch::manual_seed(5);
  models::MultiHeadCoAttention sharp(3, 5, 4, 2, 0.0, 0.125);
  sharp->to(torch::kDouble);
  EXPECT_DOUBLE_EQ(sharp->named_parameters()["key_dim"].item<double>(), 0.125);
  EXPECT_TRUE(torch::allclose(sharp->forward(m, s).attention.scores, out.attention.scores * 4.0, 1e-9, 1e-9));
  EXPECT_EQ(models::MHCAOptions::from_json({{"key_dim_init", 0.5}, {"features", 441}}).key_dim_init, 0.5);
  EXPECT_THROW(models::MHCAOptions::from_json({{"key_dim_init", -1}}), UsageError);
}

// Token t's receptive field by interval arithmetic, layer by layer from the
// output back: a conv (k 3, pad p) widens [lo, hi] to [lo - p, hi - p + 2], a
// 2-pool maps it to [2 lo, 2 hi + 1]. Its centre is where token_offset +
// token_stride * t puts the token, and voxels outside it do not move the token.
TEST(MhcaModels, TokenCentresAreReceptiveFieldCentres) {
  for (int64_t padding : {0, 1}) {
    models::SpectEncoderOptions o;
    o.volume_shape = {30, 38, 30};
    o.padding = padding;
    o.channels = {2, 2, 2};
    const auto grid = o.token_grid();
    for (int64_t t = 0; t < grid[1]; ++t) {
      int64_t lo = t, hi = t;
      for (int64_t layer = static_cast<int64_t>(o.channels.size()) - 1; layer >= 0; --layer) {
        lo -= padding;
        hi += 2 - padding;
        if (layer > 0) {
          lo *= 2;
          hi = 2 * hi + 1;
        }
      }
      EXPECT_DOUBLE_EQ((lo + hi) / 2.0, o.token_offset() + o.token_stride() * t) << "padding " << padding;
      if (t != 1) continue;
      torch::manual_seed(1);
      models::SpectEncoder encoder(o);
      encoder->eval();
      auto x = torch::randn({1, 1, 30, 38, 30});
      auto before = encoder->forward(x).select(3, t);
      auto outside = x.clone();
      for (int64_t y = 0; y < 38; ++y)
        if (y < lo || y > hi) outside.select(3, y).fill_(5.0);
      auto inside = x.clone();
      inside.select(3, std::max<int64_t>(lo, 0)).fill_(5.0);
      EXPECT_TRUE(torch::equal(encoder->forward(outside).select(3, t), before)) << "padding " << padding;
      EXPECT_FALSE(torch::equal(encoder->forward(inside).select(3, t), before)) << "padding " << padding;
    }
  }
}

TEST(MhcaModels, TokenMapPeaksAtTheTokensCentre) {
  models::SpectEncoderOptions o;
  auto w = torch::zeros({441});
  w[(3 * 9 + 4) * 7 + 2] = 1;  // token (3, 4, 2)
  auto map = tasks::token_map_to_volume(w, o);
  EXPECT_EQ(map.sizes(), (std::vector<int64_t>{91, 109, 91}));
  const double c = o.token_offset(), s = o.token_stride();
  // The centre lies between voxels (x.5): the two voxels beside it hold the
  // peak, half a voxel down the interpolation's tent on each axis.
  const double peak = std::pow(1 - 0.5 / s, 3);
  EXPECT_NEAR(map.max().item<double>(), peak, 1e-6);
  EXPECT_NEAR(map[static_cast<int64_t>(c + 3 * s)][static_cast<int64_t>(c + 4 * s)][static_cast<int64_t>(c + 2 * s)]
                  .item<double>(),
              peak, 1e-6);
  EXPECT_NEAR(map.sum().item<double>(), s * s * s, 1e-3);  // an interior token's mass: one token cell
}

// A small MHCA learns a rule that needs both modalities' evidence.
TEST(MhcaModels, SmallMhcaLearns) {
  torch::manual_seed(0);
  nlohmann::json options = {{"volume_shape", {12, 12, 12}},
                            {"channels", {4, 4, 4}},
                            {"padding", 1},
                            {"features", 27},
                            {"embedding", 8},
                            {"width", 8},
                            {"heads", 2},
                            {"hidden", 32}};
  auto model = models::find_model("mhca").make(options);
  const int64_t n = 64;
  auto labels = torch::arange(n) % 2;
  auto volumes = torch::rand({n, 1, 12, 12, 12}) * 0.2;
  volumes.slice(2, 3, 7).slice(3, 3, 7).slice(4, 3, 7) += labels.view({n, 1, 1, 1, 1}).to(torch::kFloat) * 0.5;
  auto meth = torch::rand({n, 27});
  meth.select(1, 5) = labels.to(torch::kFloat) * 0.6 + torch::rand({n}) * 0.4;
  data::Batch batch{{{"spect", volumes}, {"methylation", meth}}, labels};
  torch::optim::Adam adam(model->parameters(), 3e-3);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    auto loss = torch::nll_loss(model->forward(batch), labels);
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  model->eval();
  auto accuracy = (model->forward(batch).argmax(1) == labels).to(torch::kDouble).mean().item<double>();
  EXPECT_LT(last, first * 0.5);
  EXPECT_GT(accuracy, 0.9);
}

}  // namespace
}  // namespace qkv::testing
