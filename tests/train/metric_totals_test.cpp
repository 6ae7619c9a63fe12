// Distributed evaluation sums each accumulator's totals() over shards: the
// loaded sum must give exactly the result of one pass over the whole set.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/lm/exact_match.h"
#include "qkv/train/metrics.h"
#include "qkv/train/part_iou.h"

namespace qkv::testing {
namespace {

using train::MetricAccumulator;

std::vector<double> sum_padded(std::vector<std::vector<double>> parts) {
  size_t n = 0;
  for (const auto& p : parts) n = std::max(n, p.size());
  std::vector<double> out(n, 0.0);
  for (auto& p : parts) {
    p.resize(n, 0.0);
    for (size_t i = 0; i < n; ++i) out[i] += p[i];
  }
  return out;
}

// Equal JSON, numbers within 1e-12 (sums of per-shard sums round differently).
void expect_same_result(const nlohmann::json& a, const nlohmann::json& b, const std::string& at = "") {
  if (a.is_number() && b.is_number() && (a.is_number_float() || b.is_number_float())) {
    EXPECT_NEAR(a.get<double>(), b.get<double>(), 1e-12) << at;
  } else if (a.is_object() && b.is_object()) {
    EXPECT_EQ(a.size(), b.size()) << at;
    for (const auto& item : a.items()) {
      ASSERT_TRUE(b.contains(item.key())) << at << "/" << item.key();
      expect_same_result(item.value(), b.at(item.key()), at + "/" + item.key());
    }
  } else {
    EXPECT_EQ(a, b) << at;
  }
}

// Feeds `batches` to one accumulator, and to `shards` accumulators (batch i to
// shard i % shards, the last shards possibly empty), then compares results.
void expect_shards_reduce_to_whole(const std::function<std::unique_ptr<MetricAccumulator>()>& make,
                                   const std::vector<std::pair<at::Tensor, at::Tensor>>& batches, size_t shards) {
  auto whole = make();
  std::vector<std::unique_ptr<MetricAccumulator>> parts;
  for (size_t s = 0; s < shards; ++s) parts.push_back(make());
  for (size_t i = 0; i < batches.size(); ++i) {
    whole->add(batches[i].first, batches[i].second);
    parts[i % shards]->add(batches[i].first, batches[i].second);
  }
  std::vector<std::vector<double>> totals;
  for (const auto& p : parts) totals.push_back(p->totals());
  auto reduced = make();
  reduced->load_totals(sum_padded(totals));
  expect_same_result(reduced->result(), whole->result());
}

TEST(MetricTotals, AccuracyWithConfusionReducesExactly) {
  torch::manual_seed(1);
  std::vector<std::pair<at::Tensor, at::Tensor>> batches;
  for (int i = 0; i < 5; ++i) batches.emplace_back(torch::randn({7, 4}), torch::randint(4, {7}, torch::kLong));
  auto plain = [] { return std::make_unique<train::AccuracyMetric>(); };
  auto named = [] {
    return std::make_unique<train::AccuracyMetric>(std::vector<std::string>{"a", "b", "c", "d", "e"});
  };
  expect_shards_reduce_to_whole(plain, batches, 2);
  expect_shards_reduce_to_whole(named, batches, 3);
  expect_shards_reduce_to_whole(named, batches, 8);  // three shards saw nothing
  EXPECT_TRUE(train::AccuracyMetric().totals().empty());
}

// scikit-learn's classification_report on y_true = [0,0,0,0,1,1,1,1,1,1,2],
// y_pred = [0,0,0,1,0,0,1,1,1,1,0] (zero_division=0), worked by hand: class 2
// is never predicted (precision 0), class 3 is neither present nor predicted
// (left out).
TEST(ClassificationReport, EqualsTheHandWorkedScikitLearnNumbers) {
  const std::vector<std::vector<int64_t>> confusion = {{3, 1, 0, 0}, {2, 4, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 0}};
  const auto r = train::classification_report(confusion, {"a", "b", "c", "d"});
  ASSERT_EQ(r.at("per_class").size(), 3u);
  const auto& a = r.at("per_class")[0];
  EXPECT_EQ(a.at("class"), "a");
  EXPECT_DOUBLE_EQ(a.at("precision").get<double>(), 3.0 / 6);
  EXPECT_DOUBLE_EQ(a.at("recall").get<double>(), 3.0 / 4);
  EXPECT_DOUBLE_EQ(a.at("f1").get<double>(), 0.6);
  EXPECT_EQ(a.at("support"), 4);
  const auto& b = r.at("per_class")[1];
  EXPECT_DOUBLE_EQ(b.at("precision").get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(b.at("recall").get<double>(), 4.0 / 6);
  EXPECT_NEAR(b.at("f1").get<double>(), 8.0 / 11, 1e-15);
  const auto& c = r.at("per_class")[2];
  EXPECT_EQ(c.at("precision"), 0.0);
  EXPECT_EQ(c.at("f1"), 0.0);
  EXPECT_EQ(c.at("support"), 1);
  EXPECT_NEAR(r.at("macro_avg").at("precision").get<double>(), (0.5 + 0.8) / 3, 1e-15);
  EXPECT_NEAR(r.at("weighted_avg").at("recall").get<double>(), 7.0 / 11, 1e-15);  // = accuracy
  EXPECT_EQ(r.at("weighted_avg").at("support"), 11);
  const auto text = train::format_classification_report(r, 7.0 / 11);
  EXPECT_NE(text.find("   precision     recall   f1-score    support"), std::string::npos) << text;
  EXPECT_NE(text.find("    accuracy                           0.6364         11"), std::string::npos) << text;
  EXPECT_EQ(text.find(" d "), std::string::npos) << text;
}

TEST(MetricTotals, PartIoUReducesExactly) {
  torch::manual_seed(2);
  const std::vector<std::vector<int64_t>> parts{{0, 1}, {2, 3, 4}};
  auto make = [&] { return std::make_unique<train::PartIoUMetric>(parts, std::vector<std::string>{"A", "B"}); };
  std::vector<std::pair<at::Tensor, at::Tensor>> batches;
  for (int i = 0; i < 4; ++i) {
    auto target = torch::cat({torch::randint(0, 2, {1, 9}, torch::kLong), torch::randint(2, 5, {2, 9}, torch::kLong)});
    batches.emplace_back(torch::randn({3, 9, 5}), target);
  }
  expect_shards_reduce_to_whole(make, batches, 2);
  expect_shards_reduce_to_whole(make, batches, 5);
}

TEST(MetricTotals, ExactMatchReducesExactly) {
  torch::manual_seed(3);
  std::vector<std::pair<at::Tensor, at::Tensor>> batches;
  for (int i = 0; i < 3; ++i) {
    auto target = torch::randint(3, {4, 5}, torch::kLong);
    auto logits = torch::nn::functional::one_hot(target, 3).to(torch::kFloat) + 0.8 * torch::randn({4, 5, 3});
    batches.emplace_back(logits, target);
  }
  expect_shards_reduce_to_whole([] { return std::make_unique<lm::ExactMatchMetric>(); }, batches, 2);
  expect_shards_reduce_to_whole([] { return std::make_unique<lm::ExactMatchMetric>(); }, batches, 4);
}

}  // namespace
}  // namespace qkv::testing
