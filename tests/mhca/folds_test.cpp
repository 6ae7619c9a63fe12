#include "qkv/data/folds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "qkv/core/errors.h"
#include "support/test_files.h"

namespace {

using qkv::data::repeated_stratified_folds;
using qkv::data::stratified_kfold;
using qkv::data::stratified_split;

// `sizes[c]` samples of class c, classes interleaved so that index order says
// nothing about the class.
std::vector<int64_t> make_labels(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> labels;
  std::vector<int64_t> left = sizes;
  bool any = true;
  while (any) {
    any = false;
    for (size_t c = 0; c < left.size(); ++c)
      if (left[c] > 0) labels.push_back(static_cast<int64_t>(c)), --left[c], any = true;
  }
  return labels;
}

std::map<int64_t, int64_t> class_counts(const std::vector<int64_t>& idx, const std::vector<int64_t>& labels) {
  std::map<int64_t, int64_t> counts;
  for (int64_t i : idx) ++counts[labels[static_cast<size_t>(i)]];
  return counts;
}

TEST(StratifiedFolds, EachFoldKeepsTheClassRatioAndAllIndicesAppearOnce) {
  const std::vector<int64_t> sizes = {23, 12, 7};  // 42 samples, k = 5
  const auto labels = make_labels(sizes);
  const auto folds = stratified_kfold(labels, 5, 11);
  ASSERT_EQ(folds.size(), 5u);
  std::vector<int> seen(labels.size(), 0);
  for (const auto& fold : folds) {
    // 42 / 5 = 8.4: every fold holds 8 or 9.
    EXPECT_TRUE(fold.size() == 8 || fold.size() == 9) << fold.size();
    EXPECT_TRUE(std::is_sorted(fold.begin(), fold.end()));
    auto counts = class_counts(fold, labels);
    // 23/5 = 4.6 -> 4 or 5; 12/5 = 2.4 -> 2 or 3; 7/5 = 1.4 -> 1 or 2.
    EXPECT_TRUE(counts[0] == 4 || counts[0] == 5) << counts[0];
    EXPECT_TRUE(counts[1] == 2 || counts[1] == 3) << counts[1];
    EXPECT_TRUE(counts[2] == 1 || counts[2] == 2) << counts[2];
    for (int64_t i : fold) {
      ASSERT_GE(i, 0);
      ASSERT_LT(i, static_cast<int64_t>(labels.size()));
      ++seen[static_cast<size_t>(i)];
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

TEST(StratifiedFolds, SameSeedSameFoldsOtherSeedOtherFolds) {
  const auto labels = make_labels({30, 20});
  const auto a = stratified_kfold(labels, 5, 3);
  EXPECT_EQ(stratified_kfold(labels, 5, 3), a);
  EXPECT_NE(stratified_kfold(labels, 5, 4), a);
}

TEST(StratifiedFolds, TooSmallClassNamesTheClass) {
  const auto labels = make_labels({10, 3});
  qkv::testing::expect_data_error([&] { stratified_kfold(labels, 5, 0); }, "class 1",
                                  "class 1 has 3 subjects, fewer than --folds 5");
  EXPECT_NO_THROW(stratified_kfold(labels, 3, 0));
}

TEST(StratifiedFolds, FewerThanTwoFoldsIsAUsageError) {
  const auto labels = make_labels({10, 10});
  try {
    stratified_kfold(labels, 1, 0);
    FAIL() << "expected UsageError";
  } catch (const qkv::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("folds"), std::string::npos) << e.what();
  }
  EXPECT_THROW(repeated_stratified_folds(labels, 2, 0, 0.1, 0), qkv::UsageError);
  EXPECT_THROW(repeated_stratified_folds(labels, 0, 5, 0.1, 0), qkv::UsageError);
}

TEST(StratifiedSplit, TakesTheFractionOfEachClassAndAtLeastOne) {
  // Class 0: indices with label 0 among 0..13; class 1 has 2 members; class 2 one.
  const std::vector<int64_t> labels = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 0};
  std::vector<int64_t> indices = {13, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  {
    // 11 of class 0: round(0.1 * 11) = 1; class 1: round(0.2) = 0, raised to
    // 1; class 2 has a single member and stays in first.
    auto [first, second] = stratified_split(indices, labels, 0.1, 5);
    auto c2 = class_counts(second, labels);
    EXPECT_EQ(c2[0], 1);
    EXPECT_EQ(c2[1], 1);
    EXPECT_EQ(c2[2], 0);
    EXPECT_EQ(first.size() + second.size(), indices.size());
    std::vector<int64_t> both = first;
    both.insert(both.end(), second.begin(), second.end());
    std::sort(both.begin(), both.end());
    std::sort(indices.begin(), indices.end());
    EXPECT_EQ(both, indices);
  }
  {
    // round(0.3 * 11) = 3 (3.3); round(0.3 * 2) = 1 (0.6).
    auto [first, second] = stratified_split(indices, labels, 0.3, 5);
    auto c2 = class_counts(second, labels);
    EXPECT_EQ(c2[0], 3);
    EXPECT_EQ(c2[1], 1);
    EXPECT_EQ(class_counts(first, labels)[1], 1);
  }
  {
    auto [first, second] = stratified_split(indices, labels, 0.0, 5);
    EXPECT_TRUE(second.empty());
    EXPECT_EQ(first.size(), indices.size());
  }
  EXPECT_THROW(stratified_split(indices, labels, 1.0, 5), qkv::UsageError);
  qkv::testing::expect_data_error([&] { stratified_split({0, 99}, labels, 0.2, 5); }, "index 99", "outside");
  qkv::testing::expect_data_error([&] { stratified_split({0, 3, 3}, labels, 0.2, 5); }, "index 3", "twice");
}

TEST(RepeatedFolds, DisjointCompleteAndDifferentPerRun) {
  const std::vector<int64_t> sizes = {20, 8};
  const auto labels = make_labels(sizes);
  const int64_t runs = 3, k = 4;
  const auto folds = repeated_stratified_folds(labels, runs, k, 0.2, 42);
  ASSERT_EQ(folds.size(), static_cast<size_t>(runs * k));
  std::vector<std::set<std::vector<int64_t>>> tests_of_run(runs);
  for (size_t j = 0; j < folds.size(); ++j) {
    const auto& f = folds[j];
    EXPECT_EQ(f.run, static_cast<int64_t>(j) / k);
    EXPECT_EQ(f.fold, static_cast<int64_t>(j) % k);
    std::vector<int> seen(labels.size(), 0);
    for (const auto* part : {&f.train, &f.val, &f.test})
      for (int64_t i : *part) ++seen[static_cast<size_t>(i)];
    for (size_t i = 0; i < seen.size(); ++i)
      EXPECT_EQ(seen[i], 1) << "run " << f.run << " fold " << f.fold << " index " << i;
    // Test: 5 of class 0 and 2 of class 1. The rest holds 15 and 6, of which
    // val takes round(3.0) = 3 and round(1.2) = 1.
    auto tc = class_counts(f.test, labels), vc = class_counts(f.val, labels);
    EXPECT_EQ(tc[0], 5);
    EXPECT_EQ(tc[1], 2);
    EXPECT_EQ(vc[0], 3);
    EXPECT_EQ(vc[1], 1);
    EXPECT_EQ(f.train.size(), 28u - 7u - 4u);
    tests_of_run[static_cast<size_t>(f.run)].insert(f.test);
  }
  // Run r is stratified_kfold with seed + r; the runs shuffle differently.
  for (int64_t r = 0; r < runs; ++r) {
    const auto expected = stratified_kfold(labels, k, 42 + static_cast<uint64_t>(r));
    EXPECT_EQ(tests_of_run[static_cast<size_t>(r)], std::set<std::vector<int64_t>>(expected.begin(), expected.end()));
  }
  EXPECT_NE(tests_of_run[0], tests_of_run[1]);
  EXPECT_NE(tests_of_run[1], tests_of_run[2]);
  // Within a run, val sets differ from fold to fold as well.
  EXPECT_NE(folds[0].val, folds[1].val);

  EXPECT_EQ(repeated_stratified_folds(labels, runs, k, 0.2, 42)[5].val, folds[5].val);
  for (const auto& f : repeated_stratified_folds(labels, 1, k, 0.0, 42)) {
    EXPECT_TRUE(f.val.empty());
    EXPECT_EQ(f.train.size() + f.test.size(), labels.size());
  }
}

}  // namespace
