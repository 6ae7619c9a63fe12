#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/core/errors.h"
#include "qkv/learners/xgboost.h"

using qkv::DataError;
using qkv::UsageError;
using qkv::medical::recursive_feature_elimination;
using qkv::medical::rfe_rounds;
using qkv::medical::RFEParams;
using qkv::medical::RFEResult;
using qkv::medical::XGBoostClassifier;
using qkv::medical::XGBoostParams;

namespace {

constexpr float kMissingValue = std::numeric_limits<float>::quiet_NaN();

// Row-major standard-normal features.
struct Data {
  int64_t rows = 0, cols = 0;
  std::vector<float> x;
  std::vector<int64_t> y;
  float& at(int64_t r, int64_t c) { return x[static_cast<size_t>(r * cols + c)]; }
};

Data noise(int64_t rows, int64_t cols, uint32_t seed) {
  Data d;
  d.rows = rows;
  d.cols = cols;
  d.x.resize(static_cast<size_t>(rows * cols));
  d.y.assign(static_cast<size_t>(rows), 0);
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  for (float& v : d.x) v = normal(gen);
  return d;
}

// An axis-aligned rule on columns 3, 17 and 40 that trees can represent exactly.
Data separable(int64_t rows, uint32_t seed) {
  Data d = noise(rows, 50, seed);
  for (int64_t r = 0; r < rows; ++r)
    d.y[static_cast<size_t>(r)] = (d.at(r, 3) > 0.2f && d.at(r, 17) < 0.5f) || d.at(r, 40) > 1.0f;
  return d;
}

XGBoostParams small_params(int64_t trees = 100) {
  XGBoostParams p;
  p.n_estimators = trees;
  p.threads = 2;
  return p;
}

double accuracy(const std::vector<double>& proba, const std::vector<int64_t>& y) {
  int64_t right = 0;
  for (size_t i = 0; i < y.size(); ++i) right += (proba[i] > 0.5) == (y[i] == 1);
  return static_cast<double>(right) / static_cast<double>(y.size());
}

template <typename E, typename F>
void expect_throw_naming(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception naming " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
  }
}

}  // namespace

TEST(XGBoostParams, DefaultsAreThePapersTableA1) {
  const XGBoostParams p;
  EXPECT_DOUBLE_EQ(p.learning_rate, 0.1);
  EXPECT_EQ(p.n_estimators, 100);
  EXPECT_EQ(p.max_depth, 6);
  EXPECT_DOUBLE_EQ(p.min_child_weight, 2);
  EXPECT_DOUBLE_EQ(p.gamma, 0);
  EXPECT_DOUBLE_EQ(p.subsample, 0.8);
  EXPECT_DOUBLE_EQ(p.colsample_bytree, 0.8);
  EXPECT_DOUBLE_EQ(p.scale_pos_weight, 1);
  EXPECT_EQ(RFEParams{}.n_features_to_select, 441);
  EXPECT_DOUBLE_EQ(RFEParams{}.step, 0.05);
  EXPECT_NO_THROW(p.validate());
}

TEST(XGBoostParams, InvalidValuesNameTheOption) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::function<void(XGBoostParams&)> set;
    std::string option;
  };
  const std::vector<Case> cases = {
      {[](XGBoostParams& p) { p.learning_rate = 0; }, "xgb_learning_rate"},
      {[](XGBoostParams& p) { p.learning_rate = 1.5; }, "xgb_learning_rate"},
      {[&](XGBoostParams& p) { p.learning_rate = nan; }, "xgb_learning_rate"},
      {[](XGBoostParams& p) { p.n_estimators = 0; }, "xgb_estimators"},
      {[](XGBoostParams& p) { p.max_depth = 0; }, "xgb_max_depth"},
      {[](XGBoostParams& p) { p.min_child_weight = -1; }, "xgb_min_child_weight"},
      {[](XGBoostParams& p) { p.gamma = -0.5; }, "xgb_gamma"},
      {[&](XGBoostParams& p) { p.gamma = nan; }, "xgb_gamma"},
      {[](XGBoostParams& p) { p.subsample = 0; }, "xgb_subsample"},
      {[](XGBoostParams& p) { p.colsample_bytree = 1.01; }, "xgb_colsample"},
      {[](XGBoostParams& p) { p.scale_pos_weight = 0; }, "xgb_scale_pos_weight"},
      {[](XGBoostParams& p) { p.tree_method = "gpu_hist"; }, "xgb_tree_method"},
      {[](XGBoostParams& p) { p.max_bin = 1; }, "xgb_max_bin"},
      {[](XGBoostParams& p) { p.threads = -1; }, "threads"},
      {[](XGBoostParams& p) { p.seed = std::numeric_limits<uint64_t>::max(); }, "seed"},
  };
  for (const auto& c : cases) {
    XGBoostParams p;
    c.set(p);
    expect_throw_naming<UsageError>([&] { p.validate(); }, c.option);
    expect_throw_naming<UsageError>([&] { XGBoostClassifier clf(p); }, c.option);
  }
}

TEST(XGBoostParams, JsonRoundTripAndStrictReading) {
  XGBoostParams p;
  p.learning_rate = 0.037;
  p.n_estimators = 17;
  p.max_depth = 3;
  p.subsample = 0.5;
  p.tree_method = "hist";
  p.max_bin = 64;
  p.seed = 12345678901234ULL;
  const XGBoostParams q = XGBoostParams::from_json(p.to_json());
  EXPECT_EQ(q.to_json(), p.to_json());
  EXPECT_DOUBLE_EQ(q.learning_rate, 0.037);
  EXPECT_EQ(q.seed, 12345678901234ULL);
  EXPECT_EQ(q.tree_method, "hist");

  // Absent keys keep the defaults.
  EXPECT_EQ(XGBoostParams::from_json({{"max_depth", 4}}).n_estimators, 100);
  EXPECT_EQ(XGBoostParams::from_json({{"max_depth", 4}}).max_depth, 4);

  expect_throw_naming<DataError>([] { XGBoostParams::from_json({{"max_dept", 4}}); }, "max_dept");
  expect_throw_naming<DataError>([] { XGBoostParams::from_json({{"max_depth", 2.5}}); }, "max_depth");
  expect_throw_naming<DataError>([] { XGBoostParams::from_json({{"gamma", "0"}}); }, "gamma");
  expect_throw_naming<DataError>([] { XGBoostParams::from_json({{"seed", -1}}); }, "seed");
  expect_throw_naming<DataError>([] { XGBoostParams::from_json({{"subsample", 0}}); }, "xgb_subsample");
  expect_throw_naming<DataError>([] { XGBoostParams::from_json(nlohmann::json::array()); }, "object");
}

TEST(XGBoostClassifier, LearnsASeparableRuleAndGeneralises) {
  Data train = separable(200, 1);
  Data test = separable(200, 2);
  XGBoostClassifier clf(small_params());
  EXPECT_FALSE(clf.fitted());
  clf.fit(train.x.data(), train.rows, train.cols, train.y);
  EXPECT_TRUE(clf.fitted());
  EXPECT_EQ(clf.num_features(), 50);
  const auto proba = clf.predict_proba(test.x.data(), test.rows, test.cols);
  ASSERT_EQ(proba.size(), static_cast<size_t>(test.rows));
  for (double p : proba) {
    EXPECT_GE(p, 0.0);
    EXPECT_LE(p, 1.0);
  }
  EXPECT_GT(accuracy(proba, test.y), 0.9);
  // Both classes are really predicted, not one constant answer.
  const auto [lo, hi] = std::minmax_element(proba.begin(), proba.end());
  EXPECT_LT(*lo, 0.2);
  EXPECT_GT(*hi, 0.8);
}

TEST(XGBoostClassifier, HistAndApproxWorkAndMaxBinReachesXGBoost) {
  Data train = separable(200, 1);
  Data test = separable(200, 2);
  std::vector<std::vector<double>> hist_by_bins;
  for (const std::string method : {"approx", "hist"})
    for (int64_t bins : {2, 256}) {
      XGBoostParams p = small_params(30);
      p.tree_method = method;
      p.max_bin = bins;
      XGBoostClassifier clf(p);
      clf.fit(train.x.data(), train.rows, train.cols, train.y);
      const auto proba = clf.predict_proba(test.x.data(), test.rows, test.cols);
      if (bins == 256) {
        EXPECT_GT(accuracy(proba, test.y), 0.9) << method;
      }
      if (method == "hist") hist_by_bins.push_back(proba);
    }
  // Two bins allow one threshold per column, far from the rule's thresholds.
  ASSERT_EQ(hist_by_bins.size(), 2u);
  EXPECT_NE(hist_by_bins[0], hist_by_bins[1]);
}

TEST(XGBoostClassifier, GainIsZeroForAConstantColumnAndLargestForTheInformativeOne) {
  Data d = noise(200, 12, 3);
  for (int64_t r = 0; r < d.rows; ++r) {
    d.at(r, 4) = 0.25f;  // constant
    d.y[static_cast<size_t>(r)] = d.at(r, 9) > 0;
  }
  XGBoostClassifier clf(small_params(30));
  clf.fit(d.x.data(), d.rows, d.cols, d.y);
  const auto gain = clf.gain_importance();
  ASSERT_EQ(gain.size(), 12u);
  EXPECT_EQ(gain[4], 0.0);
  EXPECT_EQ(std::max_element(gain.begin(), gain.end()) - gain.begin(), 9);
  for (double g : gain) EXPECT_GE(g, 0.0);
  // Noise columns are split on too (overfitting): importances come back for
  // every used column, not only the first one.
  EXPECT_GT(std::count_if(gain.begin(), gain.end(), [](double g) { return g > 0; }), 2);

  // A model with no split at all (no child can reach the weight) has no
  // importances to report: all zero, not an error.
  XGBoostParams stumps = small_params(5);
  stumps.min_child_weight = 1e6;
  XGBoostClassifier leaves(stumps);
  leaves.fit(d.x.data(), d.rows, d.cols, d.y);
  EXPECT_EQ(leaves.gain_importance(), std::vector<double>(12, 0.0));
}

TEST(XGBoostClassifier, SaveLoadGivesIdenticalPredictionsAndParams) {
  Data train = separable(150, 4);
  Data test = separable(80, 5);
  XGBoostParams p = small_params(40);
  p.max_depth = 4;
  p.seed = 99;
  XGBoostClassifier clf(p);
  clf.fit(train.x.data(), train.rows, train.cols, train.y);
  const std::vector<char> bytes = clf.save();
  ASSERT_FALSE(bytes.empty());
  const XGBoostClassifier back = XGBoostClassifier::load(bytes);
  EXPECT_EQ(back.num_features(), 50);
  EXPECT_EQ(back.params().to_json(), p.to_json());
  EXPECT_EQ(back.predict_proba(test.x.data(), test.rows, test.cols),
            clf.predict_proba(test.x.data(), test.rows, test.cols));
  EXPECT_EQ(back.gain_importance(), clf.gain_importance());
  EXPECT_EQ(back.save(), bytes);
}

TEST(XGBoostClassifier, LoadRejectsWhatSaveDidNotWrite) {
  expect_throw_naming<DataError>([] { XGBoostClassifier::load({}); }, "XGBoost");
  const std::string garbage = "\x01\x02garbage";
  expect_throw_naming<DataError>([&] { XGBoostClassifier::load({garbage.begin(), garbage.end()}); }, "XGBoost");
  // Reaches XGBoost's parser: its multi-line error must come back as one line.
  const std::string truncated = R"({"learner": {"attributes": )";
  expect_throw_naming<DataError>(
      [&] {
        XGBoostClassifier::load({truncated.begin(), truncated.end()});
      },
      "XGBoosterLoadModelFromBuffer");
}

TEST(XGBoostClassifier, SameSeedSameModelOtherSeedOtherModel) {
  Data train = separable(150, 6);
  XGBoostParams p = small_params(20);
  p.seed = 1;
  XGBoostClassifier a(p), b(p);
  p.seed = 2;
  XGBoostClassifier c(p);
  for (XGBoostClassifier* clf : {&a, &b, &c}) clf->fit(train.x.data(), train.rows, train.cols, train.y);
  const auto pa = a.predict_proba(train.x.data(), train.rows, train.cols);
  EXPECT_EQ(pa, b.predict_proba(train.x.data(), train.rows, train.cols));
  // subsample and colsample_bytree 0.8 draw from the seed.
  EXPECT_NE(pa, c.predict_proba(train.x.data(), train.rows, train.cols));
}

TEST(XGBoostClassifier, MissingValuesAreAcceptedAndUsable) {
  // Column 0 is missing exactly for class 1: only a model that treats NaN as
  // missing (and learns where to send it) separates the classes.
  Data train = noise(200, 8, 7);
  Data test = noise(100, 8, 8);
  for (Data* d : {&train, &test})
    for (int64_t r = 0; r < d->rows; ++r) {
      d->y[static_cast<size_t>(r)] = r % 2;
      if (r % 2) d->at(r, 0) = kMissingValue;
      if (r % 5 == 0) d->at(r, 3) = kMissingValue;  // scattered missing values elsewhere
    }
  XGBoostClassifier clf(small_params(20));
  clf.fit(train.x.data(), train.rows, train.cols, train.y);
  const auto proba = clf.predict_proba(test.x.data(), test.rows, test.cols);
  for (double p : proba) EXPECT_TRUE(p >= 0 && p <= 1) << p;
  EXPECT_GT(accuracy(proba, test.y), 0.95);
  const std::vector<float> all_missing(8, kMissingValue);
  const double p = clf.predict_proba(all_missing.data(), 1, 8)[0];
  EXPECT_GT(p, 0.5);  // missing column 0 means class 1
}

TEST(XGBoostClassifier, BadDataIsADataError) {
  Data d = separable(60, 9);
  XGBoostClassifier clf(small_params(5));
  std::vector<int64_t> ones(60, 1);
  expect_throw_naming<DataError>([&] { clf.fit(d.x.data(), d.rows, d.cols, ones); }, "one class");
  std::vector<int64_t> three = d.y;
  three[7] = 2;
  expect_throw_naming<DataError>([&] { clf.fit(d.x.data(), d.rows, d.cols, three); }, "row 7");
  std::vector<int64_t> short_labels(d.y.begin(), d.y.begin() + 59);
  expect_throw_naming<DataError>([&] { clf.fit(d.x.data(), d.rows, d.cols, short_labels); }, "59 labels");
  Data inf = d;
  inf.at(5, 11) = std::numeric_limits<float>::infinity();
  expect_throw_naming<DataError>([&] { clf.fit(inf.x.data(), inf.rows, inf.cols, inf.y); }, "row 5, column 11");
  expect_throw_naming<DataError>([&] { clf.predict_proba(d.x.data(), d.rows, d.cols); }, "not fitted");
  EXPECT_FALSE(clf.fitted());

  clf.fit(d.x.data(), d.rows, d.cols, d.y);
  expect_throw_naming<DataError>([&] { clf.predict_proba(d.x.data(), 1, 49); }, "49 columns");
}

TEST(XGBoostClassifier, MoveTransfersTheModel) {
  Data d = separable(100, 10);
  XGBoostClassifier a(small_params(10));
  a.fit(d.x.data(), d.rows, d.cols, d.y);
  const auto before = a.predict_proba(d.x.data(), d.rows, d.cols);
  XGBoostClassifier b(std::move(a));
  EXPECT_FALSE(a.fitted());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.predict_proba(d.x.data(), d.rows, d.cols), before);
  XGBoostClassifier c;
  c = std::move(b);
  EXPECT_EQ(c.predict_proba(d.x.data(), d.rows, d.cols), before);
}

namespace {

// Checks the bookkeeping every RFE result must satisfy and returns how many
// columns carry each rank.
std::vector<int64_t> check_rfe_result(const RFEResult& res, int64_t cols, int64_t n_select) {
  EXPECT_EQ(static_cast<int64_t>(res.selected.size()), n_select);
  EXPECT_TRUE(std::is_sorted(res.selected.begin(), res.selected.end()));
  EXPECT_EQ(std::adjacent_find(res.selected.begin(), res.selected.end()), res.selected.end());
  EXPECT_EQ(static_cast<int64_t>(res.ranking.size()), cols);
  std::vector<int64_t> per_rank(static_cast<size_t>(res.rounds + 2), 0);
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t r = res.ranking[static_cast<size_t>(c)];
    const bool selected = std::binary_search(res.selected.begin(), res.selected.end(), c);
    EXPECT_EQ(r == 1, selected) << "column " << c << " rank " << r;
    EXPECT_GE(r, 1);
    EXPECT_LE(r, res.rounds + 1);
    if (r >= 1 && r <= res.rounds + 1) ++per_rank[static_cast<size_t>(r)];
  }
  return per_rank;
}

}  // namespace

TEST(RecursiveFeatureElimination, FractionalStepIsAFractionOfTheOriginalCount) {
  Data d = separable(120, 11);
  Data wide = noise(120, 60, 12);
  for (int64_t r = 0; r < 120; ++r)
    for (int64_t c = 0; c < 50; ++c) wide.at(r, c) = d.at(r, c);
  wide.y = d.y;
  std::vector<std::pair<int64_t, int64_t>> calls;
  const RFEResult res =
      recursive_feature_elimination(wide.x.data(), wide.rows, wide.cols, wide.y, small_params(15), RFEParams{5, 0.1},
                                    [&](int64_t round, int64_t remaining) { calls.emplace_back(round, remaining); });
  // int(0.1 * 60) = 6 per round: 60 -> 54 -> ... -> 6 takes 9 rounds, the 10th removes one.
  EXPECT_EQ(res.rounds, 10);
  const auto per_rank = check_rfe_result(res, 60, 5);
  ASSERT_EQ(per_rank.size(), 12u);
  EXPECT_EQ(per_rank[1], 5);
  EXPECT_EQ(per_rank[2], 1);  // the last round removes only down to 5
  for (int64_t r = 3; r <= 11; ++r) EXPECT_EQ(per_rank[static_cast<size_t>(r)], 6) << "rank " << r;
  ASSERT_EQ(calls.size(), 10u);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(calls[static_cast<size_t>(i)].first, i + 1);
    EXPECT_EQ(calls[static_cast<size_t>(i)].second, std::max<int64_t>(5, 60 - 6 * (i + 1)));
  }
}

TEST(RecursiveFeatureElimination, IntegerStepRemovesThatManyPerRound) {
  Data d = noise(100, 60, 13);
  for (int64_t r = 0; r < d.rows; ++r) d.y[static_cast<size_t>(r)] = d.at(r, 30) + d.at(r, 31) > 0;
  const RFEResult res =
      recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, small_params(15), RFEParams{5, 7});
  EXPECT_EQ(res.rounds, 8);  // 55 to remove: 7 rounds of 7, then 6
  const auto per_rank = check_rfe_result(res, 60, 5);
  EXPECT_EQ(per_rank[2], 6);
  for (int64_t r = 3; r <= 9; ++r) EXPECT_EQ(per_rank[static_cast<size_t>(r)], 7) << "rank " << r;
}

TEST(RecursiveFeatureElimination, KeepsAllPlantedInformativeColumns) {
  const std::vector<int64_t> planted = {7, 52, 101, 148, 203};
  Data d = noise(300, 205, 14);
  for (int64_t r = 0; r < d.rows; ++r) {
    float s = 0;
    for (int64_t c : planted) s += d.at(r, c);
    d.y[static_cast<size_t>(r)] = s > 0;
  }
  const RFEResult res =
      recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, small_params(40), RFEParams{10, 0.1});
  check_rfe_result(res, 205, 10);
  for (int64_t c : planted)
    EXPECT_TRUE(std::binary_search(res.selected.begin(), res.selected.end(), c)) << "planted column " << c;
}

TEST(RecursiveFeatureElimination, TiesGoLowestColumnFirst) {
  // Only column 12 varies: every other column has gain 0, so the documented
  // tie-break alone decides which of them survive.
  Data d = noise(80, 20, 15);
  for (int64_t r = 0; r < d.rows; ++r) {
    for (int64_t c = 0; c < d.cols; ++c)
      if (c != 12) d.at(r, c) = 1.0f;
    d.y[static_cast<size_t>(r)] = d.at(r, 12) > 0;
  }
  const RFEResult res =
      recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, small_params(5), RFEParams{4, 3});
  EXPECT_EQ(res.selected, (std::vector<int64_t>{12, 17, 18, 19}));
  check_rfe_result(res, 20, 4);
  // 16 to remove, 3 per round: columns 0-2 go in round 1 and get the worst rank.
  EXPECT_EQ(res.rounds, 6);
  EXPECT_EQ(res.ranking[0], 7);
  EXPECT_EQ(res.ranking[2], 7);
  EXPECT_EQ(res.ranking[16], 2);
}

// What a progress bar is told before the first round: the count the runs above made.
TEST(RecursiveFeatureElimination, RoundsAreKnownBeforehand) {
  EXPECT_EQ(rfe_rounds(60, RFEParams{5, 0.1}), 10);
  EXPECT_EQ(rfe_rounds(60, RFEParams{5, 7}), 8);
  EXPECT_EQ(rfe_rounds(20, RFEParams{4, 3}), 6);
  EXPECT_EQ(rfe_rounds(50, RFEParams{50, 0.05}), 0);
  EXPECT_EQ(rfe_rounds(300, RFEParams{27, 0.05}), 19);  // 273 to remove, 15 per round
  EXPECT_EQ(rfe_rounds(10, RFEParams{1, 100}), 1);      // a step beyond the column count: all at once
}

TEST(RecursiveFeatureElimination, NothingToRemoveFitsNothing) {
  Data d = separable(50, 16);
  bool called = false;
  const RFEResult res = recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, small_params(),
                                                      RFEParams{50, 0.05}, [&](int64_t, int64_t) { called = true; });
  EXPECT_EQ(res.rounds, 0);
  EXPECT_FALSE(called);
  check_rfe_result(res, 50, 50);
}

TEST(RecursiveFeatureElimination, BadArgumentsAndData) {
  Data d = separable(60, 17);
  const auto run = [&](const RFEParams& rfe, const XGBoostParams& p = small_params(5)) {
    return recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, p, rfe);
  };
  expect_throw_naming<UsageError>([&] { run({0, 0.1}); }, "n_features");
  expect_throw_naming<UsageError>([&] { run({51, 0.1}); }, "n_features");
  expect_throw_naming<UsageError>([&] { run({5, 0}); }, "rfe_step");
  expect_throw_naming<UsageError>([&] { run({5, -2}); }, "rfe_step");
  expect_throw_naming<UsageError>([&] { run({5, std::numeric_limits<double>::quiet_NaN()}); }, "rfe_step");
  XGBoostParams bad = small_params(5);
  bad.max_depth = -3;
  expect_throw_naming<UsageError>([&] { run({5, 0.1}, bad); }, "xgb_max_depth");

  std::vector<int64_t> zeros(60, 0);
  expect_throw_naming<DataError>(
      [&] {
        recursive_feature_elimination(d.x.data(), d.rows, d.cols, zeros, small_params(5), {5, 0.1});
      },
      "one class");
  // Even when no round would run.
  expect_throw_naming<DataError>(
      [&] {
        recursive_feature_elimination(d.x.data(), d.rows, d.cols, zeros, small_params(5), {50, 0.1});
      },
      "one class");
}

TEST(RecursiveFeatureElimination, AcceptsMissingValuesAndCanBeAbortedFromProgress) {
  Data d = separable(100, 18);
  for (int64_t r = 0; r < d.rows; r += 3) d.at(r, (r * 7) % 50) = kMissingValue;
  const RFEResult res =
      recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, small_params(10), RFEParams{10, 10});
  check_rfe_result(res, 50, 10);

  struct Stop {};
  int rounds_seen = 0;
  EXPECT_THROW(recursive_feature_elimination(d.x.data(), d.rows, d.cols, d.y, small_params(10), RFEParams{10, 10},
                                             [&](int64_t, int64_t) {
                                               ++rounds_seen;
                                               throw Stop{};
                                             }),
               Stop);
  EXPECT_EQ(rounds_seen, 1);
}
