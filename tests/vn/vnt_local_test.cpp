// vnt-local (our design): VNT-Net with VNAttention restricted to each point's
// kNN graph. The local attention kernel against a dense masked attention and
// central differences; the model invariant under rotations (and the check
// able to fail: a stretch moves the logits); with every point as a neighbour
// it is VNT-Net (vnt's weights loaded); it learns; a 20,000-point cloud runs
// in bounded memory.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "qkv/core/errors.h"
#include "qkv/models/model.h"
#include "qkv/models/vnt_local.h"
#include "qkv/vn/local_attention.h"
#include "qkv/vn/vn_ops.h"
#include "support/bounded_child.h"
#include "support/gradcheck.h"
#include "support/haar_rotation.h"
#include "support/tolerance.h"

namespace vnt_local_test {

using namespace qkv;

// softmax(sum_c Q_(c) K_(c)^T / sqrt(C)) V over all keys, with -inf outside
// each query's neighbours: the paper's VNAttention, masked. q [B, H, Nq, C, 3],
// k [B, H, Nk, C, 3], v [B, H, Nk, Cv, 3], idx [B, Nq, kn] (distinct per row).
std::pair<at::Tensor, at::Tensor> dense_masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                         const at::Tensor& idx) {
  const int64_t c = q.size(3);
  const auto scores = torch::einsum("bhicx,bhjcx->bhij", {q, k}) / std::sqrt(static_cast<double>(c));
  auto allowed = torch::zeros({idx.size(0), idx.size(1), k.size(2)}, torch::kBool);
  allowed.scatter_(2, idx, true);
  const auto masked = scores.masked_fill(allowed.unsqueeze(1).logical_not(), -std::numeric_limits<double>::infinity());
  const auto weights = torch::softmax(masked, -1);
  return {torch::einsum("bhij,bhjcx->bhicx", {weights, v}), weights};
}

at::Tensor randn(std::vector<int64_t> shape, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, gen, torch::kDouble);
}

// Distinct random indices per query row: [B, Nq, kn] in [0, Nk).
at::Tensor random_neighbours(int64_t b, int64_t nq, int64_t nk, int64_t kn, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::rand({b, nq, nk}, gen, torch::kDouble).argsort(int64_t{-1}).narrow(2, 0, kn).contiguous();
}

data::Batch local_cloud(int64_t b, int64_t n, torch::Dtype dtype, int64_t seed) {
  data::Batch batch;
  batch.inputs["points"] = randn({b, 3, n}, seed).to(dtype);
  batch.target = torch::zeros({b}, torch::kLong);
  return batch;
}

data::Batch transformed(const data::Batch& batch, const at::Tensor& m) {
  data::Batch out = batch;
  out.inputs["points"] = torch::matmul(m, batch.inputs.at("points"));
  return out;
}

models::ModelPtr make_model(const std::string& name, const nlohmann::json& options) {
  torch::manual_seed(11);
  return models::find_model(name).make(options);
}

const nlohmann::json kSmallLocal = {{"classes", 5},  {"linear_dim", 8}, {"heads", 3},
                                    {"head_dim", 4}, {"k", 8},          {"neighbours", 6}};

double logit_scale(const at::Tensor& logits) { return std::max(1.0, logits.abs().max().item<double>()); }

}  // namespace vnt_local_test

using namespace vnt_local_test;

TEST(VNLocalAttention, EqualsTheDenseMaskedAttentionInFloat64) {
  const int64_t b = 2, h = 3, n = 20, c = 4, cv = 5, kn = 6;
  const auto q = randn({b, h, n, c, 3}, 1), k = randn({b, h, n, c, 3}, 2), v = randn({b, h, n, cv, 3}, 3);
  const auto idx = vn::knn_indices(randn({b, 3, n}, 4), kn);
  const auto [expected, dense_weights] = dense_masked_attention(q, k, v, idx);
  vn::LocalAttentionOptions options;
  options.need_weights = true;
  const auto r = vn::vn_local_attention(q, k, v, idx, options);
  ASSERT_EQ(r.output.sizes(), (std::vector<int64_t>{b, h, n, cv, 3}));
  ASSERT_EQ(r.weights.sizes(), (std::vector<int64_t>{b, h, n, kn}));
  EXPECT_LE(qkv::testing::max_abs_difference(r.output, expected), 1e-12);
  // Column j of the weights is neighbour idx[.., j]'s entry of the dense row.
  const auto gathered = dense_weights.gather(3, idx.unsqueeze(1).expand({b, h, n, kn}));
  EXPECT_LE(qkv::testing::max_abs_difference(r.weights, gathered), 1e-12);
  EXPECT_LE(qkv::testing::max_abs_difference(r.weights.sum(-1), torch::ones({b, h, n}, torch::kDouble)), 1e-12);
  // One query a block (the smallest chunk) gives the same.
  options.chunk_elements = 1;
  EXPECT_LE(qkv::testing::max_abs_difference(vn::vn_local_attention(q, k, v, idx, options).output, expected), 1e-12);
  // With every key a neighbour it is the global vn_attention.
  const auto all = torch::arange(n, torch::kLong).expand({b, n, n}).contiguous();
  EXPECT_LE(
      qkv::testing::max_abs_difference(vn::vn_local_attention(q, k, v, all).output, vn::vn_attention(q, k, v).output),
      1e-12);
}

TEST(VNLocalAttention, QueriesOtherThanTheKeysAndAnExplicitScale) {
  // 7 queries on 13 keys, random distinct neighbours (not a kNN graph).
  const int64_t b = 2, h = 2, nq = 7, nk = 13, c = 3, kn = 5;
  const auto q = randn({b, h, nq, c, 3}, 5), k = randn({b, h, nk, c, 3}, 6), v = randn({b, h, nk, 2, 3}, 7);
  const auto idx = random_neighbours(b, nq, nk, kn, 8);
  vn::LocalAttentionOptions options;
  options.scale = 0.25;
  const auto expected = dense_masked_attention(q * (0.25 * std::sqrt(3.0)), k, v, idx).first;
  EXPECT_LE(qkv::testing::max_abs_difference(vn::vn_local_attention(q, k, v, idx, options).output, expected), 1e-12);
}

TEST(VNLocalAttention, GradientsEqualTheDenseReferenceAndCentralDifferences) {
  const int64_t b = 1, h = 2, n = 9, c = 2, kn = 4;
  const auto idx = vn::knn_indices(randn({b, 3, n}, 9), kn);
  const std::vector<at::Tensor> inputs = {randn({b, h, n, c, 3}, 10), randn({b, h, n, c, 3}, 11),
                                          randn({b, h, n, c, 3}, 12)};
  const auto up = randn({b, h, n, c, 3}, 13);
  std::vector<at::Tensor> grads[2];
  for (int dense = 0; dense < 2; ++dense) {
    std::vector<at::Tensor> leaves;
    for (const auto& t : inputs) leaves.push_back(t.clone().requires_grad_());
    const auto out = dense ? dense_masked_attention(leaves[0], leaves[1], leaves[2], idx).first
                           : vn::vn_local_attention(leaves[0], leaves[1], leaves[2], idx).output;
    (out * up).sum().backward();
    for (const auto& l : leaves) grads[dense].push_back(l.grad());
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_LE(qkv::testing::max_abs_difference(grads[0][i], grads[1][i]), 1e-12) << i;
  const double error = qkv::testing::max_gradient_error(
      [&](const std::vector<at::Tensor>& in) { return vn::vn_local_attention(in[0], in[1], in[2], idx).output; },
      inputs);
  EXPECT_LE(error, 1e-6);
}

TEST(VNLocalAttention, BadInputsAreUsageErrors) {
  const auto q = randn({1, 2, 6, 3, 3}, 1);
  const auto idx = vn::knn_indices(randn({1, 3, 6}, 2), 3);
  EXPECT_NO_THROW(vn::vn_local_attention(q, q, q, idx));
  EXPECT_THROW(vn::vn_local_attention(q, q, q, idx + 3), UsageError);              // out of range
  EXPECT_THROW(vn::vn_local_attention(q, q, q, idx - 1), UsageError);              // negative
  EXPECT_THROW(vn::vn_local_attention(q, q, q, idx.to(torch::kInt)), UsageError);  // not int64
  EXPECT_THROW(vn::vn_local_attention(q, q, q, idx.narrow(1, 0, 5)), UsageError);  // a query short
  EXPECT_THROW(vn::vn_local_attention(q, q.narrow(3, 0, 2), q, idx), UsageError);  // q, k channels differ
  EXPECT_THROW(vn::vn_local_attention(q, q, q.narrow(2, 0, 5), idx), UsageError);  // k, v points differ
  EXPECT_THROW(vn::vn_local_attention(q.flatten(3), q, q, idx), UsageError);       // not VN layout
  vn::LocalAttentionOptions bad_scale;
  bad_scale.scale = 0.0;
  EXPECT_THROW(vn::vn_local_attention(q, q, q, idx, bad_scale), UsageError);
}

TEST(VNTLocal, IsRotationInvariantInFloat64AndTheCheckCanFail) {
  auto model = make_model("vnt-local", kSmallLocal);
  model->to(torch::kDouble);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto batch = local_cloud(2, 48, torch::kDouble, 3);
  const auto logits = model->forward(batch);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 5}));
  const double scale = logit_scale(logits);
  EXPECT_GT(logits.abs().max().item<double>(), 1e-3);
  for (int64_t s = 1; s <= 3; ++s) {
    const auto turned = model->forward(transformed(batch, qkv::testing::haar_rotation(s)));
    EXPECT_LE(qkv::testing::max_abs_difference(turned, logits), 1e-9 * scale) << "rotation " << s;
  }
  // The control: a stretch along one axis is no rotation, and the logits move.
  const auto stretch = torch::diag(torch::tensor({1.6, 1.0, 0.7}, torch::kDouble));
  EXPECT_GT(qkv::testing::max_abs_difference(model->forward(transformed(batch, stretch)), logits), 1e-4 * scale);
  // And float32 to its rounding.
  model->to(torch::kFloat);
  const auto batch32 = local_cloud(2, 48, torch::kFloat, 3);
  const auto logits32 = model->forward(batch32);
  EXPECT_LE(qkv::testing::scaled_difference(
                model->forward(transformed(batch32, qkv::testing::haar_rotation(1, torch::kFloat))), logits32),
            1e-4);
}

TEST(VNTLocal, WithEveryPointANeighbourItIsVNTNet) {
  // vnt's weights loaded into vnt-local (the same names and shapes): with
  // neighbours = N the local attention is the global one, so the logits are
  // vnt's; with fewer neighbours they are not.
  const int64_t n = 24;
  nlohmann::json global = kSmallLocal;
  global.erase("neighbours");
  for (const bool layer_norm : {false, true}) {
    SCOPED_TRACE(layer_norm ? "layer norm" : "no layer norm");
    global["layer_norm"] = layer_norm;
    auto vnt = make_model("vnt", global);
    vnt->to(torch::kDouble);
    vnt->eval();
    auto every = global, few = global;
    every["neighbours"] = n;
    few["neighbours"] = 6;
    for (const auto& [options, same] : {std::pair{every, true}, std::pair{few, false}}) {
      auto local = make_model("vnt-local", options);
      local->to(torch::kDouble);
      {
        torch::NoGradGuard no_grad;
        const auto from = vnt->named_parameters(), from_buffers = vnt->named_buffers();
        ASSERT_EQ(local->named_parameters().size(), from.size());
        for (auto& p : local->named_parameters()) p.value().copy_(from[p.key()]);
        for (auto& p : local->named_buffers()) p.value().copy_(from_buffers[p.key()]);
      }
      local->eval();
      torch::NoGradGuard no_grad;
      const auto batch = local_cloud(2, n, torch::kDouble, 5);
      const auto expected = vnt->forward(batch);
      const double difference = qkv::testing::max_abs_difference(local->forward(batch), expected);
      if (same) {
        EXPECT_LE(difference, 1e-10 * logit_scale(expected));
      } else {
        EXPECT_GT(difference, 1e-6 * logit_scale(expected));
      }
    }
  }
}

TEST(VNTLocal, ParametersAreVNTNetsAndItsSizeSaysSo) {
  const auto& local = models::find_model("vnt-local");
  nlohmann::json global = kSmallLocal;
  global.erase("neighbours");
  EXPECT_EQ(models::count_parameters(*make_model("vnt-local", kSmallLocal)),
            models::count_parameters(*make_model("vnt", global)));
  // The paper's settings: vnt's 542,560.
  EXPECT_EQ(local.size(nlohmann::json::object(), 1024).parameters, 542560);
  EXPECT_EQ(local.resolve(nlohmann::json::object()).at("neighbours"), 16);
  // Linear in the points, where vnt's estimate is quadratic.
  const auto& vnt = models::find_model("vnt");
  const auto at = [&](const models::ModelEntry& e, int64_t points) {
    return static_cast<double>(e.size(nlohmann::json::object(), points).activation_floats);
  };
  EXPECT_NEAR(at(local, 100000) / at(local, 10000), 10.0, 0.01);
  EXPECT_GT(at(vnt, 100000) / at(vnt, 10000), 50.0);
  EXPECT_LT(at(local, 8192), at(vnt, 8192) / 4);
  EXPECT_THROW(local.resolve({{"neighbours", 0}}), UsageError);
  EXPECT_THROW(local.resolve({{"no_such_option", 1}}), UsageError);
}

TEST(VNTLocal, BadInputsAreClearErrors) {
  auto model = make_model("vnt-local", kSmallLocal);
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_THROW(model->forward(local_cloud(1, 5, torch::kFloat, 1)), DataError);  // fewer points than k = 8
  auto more = kSmallLocal;
  more["neighbours"] = 12;  // more than the 10 points
  auto wide = make_model("vnt-local", more);
  wide->eval();
  EXPECT_THROW(wide->forward(local_cloud(1, 10, torch::kFloat, 1)), DataError);
  EXPECT_NO_THROW(wide->forward(local_cloud(1, 12, torch::kFloat, 1)));
  auto batch = local_cloud(1, 20, torch::kFloat, 1);
  batch.inputs["points"] = batch.inputs["points"].transpose(1, 2).contiguous();  // [B, N, 3]
  EXPECT_THROW(model->forward(batch), UsageError);
}

TEST(VNTLocal, LearnsATinyProblem) {
  // Eight fixed clouds of 32 points, two classes (elongated or round), a few
  // Adam steps: the training loss falls.
  auto model = make_model("vnt-local", {{"classes", 2},
                                        {"linear_dim", 8},
                                        {"heads", 2},
                                        {"head_dim", 4},
                                        {"k", 6},
                                        {"neighbours", 8},
                                        {"head_hidden", {16}},
                                        {"dropout", 0.0}});
  model->train();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  auto points = torch::randn({8, 3, 32}, gen);
  const auto labels = torch::tensor({0, 1, 0, 1, 0, 1, 0, 1}, torch::kLong);
  points.index({torch::indexing::Slice(1, torch::indexing::None, 2), 0}) *= 3.0;  // class 1: stretched along x
  data::Batch batch;
  batch.inputs["points"] = points;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  std::vector<double> losses;
  for (int step = 0; step < 12; ++step) {
    optimizer.zero_grad();
    const auto loss = torch::cross_entropy_loss(model->forward(batch), labels);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
    ASSERT_TRUE(std::isfinite(losses.back()));
  }
  EXPECT_LT(losses.back(), 0.6 * losses.front()) << "first " << losses.front() << ", last " << losses.back();
}

TEST(VNTLocal, TwentyThousandPointsFitInBoundedMemory) {
  // The paper's widths (C 16, 24 heads of 16): global attention would hold
  // 24 x 20,000^2 floats (38 GB) of weights; the local one gathers 16
  // neighbours a query, in blocks. Eval, no gradient, one cloud.
  auto model = make_model("vnt-local", nlohmann::json::object());
  model->eval();
  torch::NoGradGuard no_grad;
  const int64_t before = qkv::testing::proc_status_bytes("VmHWM:");
  const auto logits = model->forward(local_cloud(1, 20000, torch::kFloat, 2));
  const int64_t peak = qkv::testing::proc_status_bytes("VmHWM:");
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{1, 40}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  EXPECT_LT(peak - before, int64_t{2} << 30) << "peak resident set grew by " << (peak - before) / (1 << 20) << " MiB";
}
