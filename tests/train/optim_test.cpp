#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"
#include "qkv/train/metrics.h"
#include "qkv/train/optim.h"

using namespace qkv;

TEST(Schedules, CosineStepWarmup) {
  train::OptimConfig c;
  c.lr = 0.1;
  c.schedule = "cosine";
  c.min_lr = 0.0;
  EXPECT_DOUBLE_EQ(train::lr_at(c, 0, 10), 0.1);
  EXPECT_NEAR(train::lr_at(c, 5, 10), 0.05, 1e-12);
  EXPECT_LT(train::lr_at(c, 9, 10), 0.01);
  c.schedule = "step";
  c.step_size = 3;
  c.gamma = 0.5;
  EXPECT_DOUBLE_EQ(train::lr_at(c, 2, 10), 0.1);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 3, 10), 0.05);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 7, 10), 0.025);
  c.warmup_epochs = 2;
  EXPECT_NEAR(train::lr_at(c, 0, 10), 0.1 / 3, 1e-12);
  EXPECT_NEAR(train::lr_at(c, 1, 10), 0.2 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 2, 10), 0.1);
}

TEST(Optimizers, EachOneMinimisesAQuadratic) {
  for (const char* name : {"adam", "adamw", "sgd"}) {
    auto w = torch::full({4}, 3.0, torch::requires_grad());
    train::OptimConfig c;
    c.optimizer = name;
    c.lr = 0.05;
    c.weight_decay = 0;
    auto opt = train::make_optimizer({w}, c);
    for (int i = 0; i < 300; ++i) {
      opt->zero_grad();
      auto loss = (w - 1).pow(2).sum();
      loss.backward();
      opt->step();
    }
    EXPECT_NEAR(w[0].item<double>(), 1.0, 0.05) << name;
  }
}

TEST(Optimizers, SetLrReachesEveryGroup) {
  auto w = torch::zeros({2}, torch::requires_grad());
  train::OptimConfig c;
  auto opt = train::make_optimizer({w}, c);
  train::set_lr(*opt, 0.123);
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 0.123);
}

TEST(Loss, LabelSmoothingAndIgnoreIndex) {
  auto logits = torch::tensor({{2.0, 0.0, 0.0}, {0.0, 5.0, 0.0}}, torch::kDouble);
  auto target = torch::tensor({int64_t{0}, train::kIgnoreIndex}, torch::kLong);
  // Only row 0 counts: -log softmax(2,0,0)[0].
  const double lse = std::log(std::exp(2.0) + 2.0);
  EXPECT_NEAR(train::classification_loss(logits, target, 0.0).item<double>(), lse - 2.0, 1e-12);
  // With smoothing eps the target is (1-eps) one-hot + eps/C uniform.
  const double eps = 0.3;
  const double expected = (1 - eps) * (lse - 2.0) + eps / 3 * ((lse - 2.0) + 2 * lse);
  EXPECT_NEAR(train::classification_loss(logits, target, eps).item<double>(), expected, 1e-12);
}

TEST(Metrics, AccuracyAndBalancedAccuracy) {
  train::AccuracyMetric m;
  // class 0: 3 samples, 2 right; class 1: 1 sample, 1 right.
  auto logits = torch::tensor({{1.0, 0.0}, {1.0, 0.0}, {0.0, 1.0}, {0.0, 1.0}});
  auto target = torch::tensor({0, 0, 0, 1}, torch::kLong);
  m.add(logits, target);
  auto r = m.result();
  EXPECT_DOUBLE_EQ(r.at("accuracy").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(r.at("balanced_accuracy").get<double>(), (2.0 / 3 + 1.0) / 2);
}

TEST(Metrics, ConfusionMatrixCountsTrueByPredicted) {
  train::AccuracyMetric m({"a", "b", "c"});
  // Two batches; rows are the true class, columns the prediction.
  m.add(torch::tensor({{1.0, 0.0, 0.0}, {0.0, 0.0, 1.0}}), torch::tensor({0, 0}, torch::kLong));
  m.add(torch::tensor({{0.0, 1.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}}), torch::tensor({1, 2, 2}, torch::kLong));
  const auto r = m.result();
  EXPECT_EQ(r.at("confusion"), nlohmann::json({{1, 0, 1}, {0, 1, 0}, {0, 1, 1}}));
  EXPECT_EQ(r.at("classes"), nlohmann::json({"a", "b", "c"}));
  EXPECT_DOUBLE_EQ(r.at("accuracy").get<double>(), 3.0 / 5);
  EXPECT_FALSE(train::AccuracyMetric().result().contains("confusion"));
}

TEST(Metrics, ManyClassesKeepTheirMostFrequentConfusionsNotTheMatrix) {
  // Above kDenseConfusionClasses the n x n matrix is not kept; the report is
  // the one the matrix gives, and the most frequent confusions are listed.
  const int64_t n = static_cast<int64_t>(train::kDenseConfusionClasses) + 10;
  std::vector<std::string> names;
  for (int64_t c = 0; c < n; ++c) names.push_back("c" + std::to_string(c));
  train::AccuracyMetric sparse(names);
  std::vector<std::vector<int64_t>> dense(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
  torch::manual_seed(4);
  for (int batch = 0; batch < 6; ++batch) {
    // Predictions near the truth, so that some pairs repeat.
    const auto target = torch::randint(n, {50}, torch::kLong);
    const auto shifted = (target + torch::randint(0, 3, {50}, torch::kLong)) % n;
    const auto logits = torch::nn::functional::one_hot(shifted, n).to(torch::kFloat);
    sparse.add(logits, target);
    for (int64_t i = 0; i < 50; ++i)
      ++dense[static_cast<size_t>(target[i].item<int64_t>())][static_cast<size_t>(shifted[i].item<int64_t>())];
  }
  const auto r = sparse.result();
  EXPECT_FALSE(r.contains("confusion"));
  const auto expected = train::classification_report(dense, names);
  EXPECT_EQ(r.at("per_class"), expected.at("per_class"));
  EXPECT_EQ(r.at("macro_avg"), expected.at("macro_avg"));
  EXPECT_EQ(r.at("weighted_avg"), expected.at("weighted_avg"));
  int64_t most = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (i != j) most = std::max(most, dense[static_cast<size_t>(i)][static_cast<size_t>(j)]);
  const auto& top = r.at("top_confusions");
  ASSERT_EQ(top.size(), train::kTopConfusions);
  EXPECT_EQ(top[0].at("count").get<int64_t>(), most);
  for (size_t k = 1; k < top.size(); ++k) EXPECT_LE(top[k].at("count"), top[k - 1].at("count"));
  for (const auto& pair : top) {
    const int64_t i = std::stoll(pair.at("true").get<std::string>().substr(1));
    const int64_t j = std::stoll(pair.at("predicted").get<std::string>().substr(1));
    EXPECT_NE(i, j);
    EXPECT_EQ(pair.at("count").get<int64_t>(), dense[static_cast<size_t>(i)][static_cast<size_t>(j)]);
  }
  // Summed over ranks: the same report; the pairs stay with each rank.
  train::AccuracyMetric reduced(names);
  reduced.load_totals(sparse.totals());
  auto without_pairs = r;
  without_pairs.erase("top_confusions");
  EXPECT_EQ(reduced.result(), without_pairs);
}

TEST(Optimizers, BadNamesAreUsageErrors) {
  train::OptimConfig c;
  c.schedule = "linear";
  EXPECT_THROW(c.validate(), UsageError);
  c = {};
  c.lr = -1;
  EXPECT_THROW(c.validate(), UsageError);
}

TEST(Schedules, StepOffsetDecaysAnEpochEarlyAndMinLrIsAFloor) {
  train::OptimConfig c;
  c.lr = 1.0;
  c.schedule = "step";
  c.step_size = 20;
  c.gamma = 0.5;
  c.step_offset = 1;  // a StepLR stepped at the start of each epoch
  EXPECT_DOUBLE_EQ(train::lr_at(c, 18, 100), 1.0);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 19, 100), 0.5);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 39, 100), 0.25);
  c.step_offset = 0;
  c.min_lr = 0.2;
  EXPECT_DOUBLE_EQ(train::lr_at(c, 39, 100), 0.5);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 40, 100), 0.25);
  EXPECT_DOUBLE_EQ(train::lr_at(c, 60, 100), 0.2);  // 0.125, floored
  c.step_offset = -1;
  EXPECT_THROW(c.validate(), ConfigError);
}

TEST(Loss, SmoothingOverTheOtherClassesIsDgcnnsLoss) {
  torch::manual_seed(2);
  const auto logits = torch::randn({7, 5}, torch::kDouble);
  const auto target = torch::tensor({0, 1, 2, 3, 4, 0, 2}, torch::kLong);
  const double eps = 0.2;
  // DGCNN / Vector Neurons: 1 - eps on the target, eps / (C - 1) on every other class.
  const auto one_hot = torch::zeros_like(logits).scatter(1, target.view({-1, 1}), 1.0);
  const auto smoothed = one_hot * (1 - eps) + (1 - one_hot) * eps / 4;
  const double reference = -(smoothed * torch::log_softmax(logits, 1)).sum(1).mean().item<double>();
  EXPECT_NEAR(train::classification_loss(logits, target, eps, true).item<double>(), reference, 1e-12);
  // PyTorch's spreads eps over all classes: a different number.
  EXPECT_GT(std::abs(train::classification_loss(logits, target, eps, false).item<double>() - reference), 1e-4);
}
