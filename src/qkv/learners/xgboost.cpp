#include "qkv/learners/xgboost.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <utility>

#include "qkv/core/errors.h"
#include "qkv/learners/xgboost_input.h"

namespace qkv::medical {
namespace {

// scikit-learn: int(max(1, step * n_features)) for a fraction, else int(step).
int64_t rfe_removed_per_round(int64_t cols, const RFEParams& rfe) {
  if (rfe.step < 1) return std::max<int64_t>(1, static_cast<int64_t>(rfe.step * static_cast<double>(cols)));
  return rfe.step >= static_cast<double>(cols) ? cols : static_cast<int64_t>(rfe.step);
}

}  // namespace

std::string xgboost_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void check_xgboost_features(const float* features, int64_t rows, int64_t cols, const char* what) {
  if (rows < 1 || cols < 1)
    throw DataError(std::string("XGBoost ") + what + ": need at least one row and one column, got " +
                    std::to_string(rows) + "x" + std::to_string(cols));
  if (static_cast<uint64_t>(rows) > std::numeric_limits<size_t>::max() / static_cast<uint64_t>(cols))
    throw DataError(std::string("XGBoost ") + what + ": " + std::to_string(rows) + "x" + std::to_string(cols) +
                    " is too large");
  if (features == nullptr) throw DataError(std::string("XGBoost ") + what + ": no feature data");
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  for (size_t i = 0; i < n; ++i) {
    // NaN means missing; only infinities are rejected (XGBoost would reject them
    // too, without saying where they are).
    if (std::isinf(features[i]))
      throw DataError(std::string("XGBoost ") + what + ": infinite feature value at row " + std::to_string(i / cols) +
                      ", column " + std::to_string(i % cols));
  }
}

void check_xgboost_labels(const std::vector<int64_t>& labels, int64_t rows) {
  if (static_cast<int64_t>(labels.size()) != rows)
    throw DataError("XGBoost fit: " + std::to_string(labels.size()) + " labels for " + std::to_string(rows) + " rows");
  bool seen[2] = {false, false};
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1)
      throw DataError("XGBoost fit: label " + std::to_string(labels[i]) + " at row " + std::to_string(i) +
                      " is neither 0 nor 1");
    seen[labels[i]] = true;
  }
  if (!seen[0] || !seen[1])
    throw DataError(std::string("XGBoost fit: labels hold one class only (all ") + (seen[0] ? "0" : "1") +
                    "); a binary classifier needs both");
}

void XGBoostParams::validate() const {
  auto fail = [](const std::string& key, const std::string& rule, const std::string& got) {
    throw ConfigError(key, "must be " + rule + ", got " + got);
  };
  // Written as !(ok) so that NaN fails too.
  if (!(learning_rate > 0 && learning_rate <= 1)) fail("xgb_learning_rate", "in (0, 1]", xgboost_number(learning_rate));
  if (!(n_estimators >= 1 && n_estimators <= INT_MAX))
    fail("xgb_estimators", "in [1, " + std::to_string(INT_MAX) + "]", std::to_string(n_estimators));
  if (!(max_depth >= 1 && max_depth <= INT_MAX))
    fail("xgb_max_depth", "in [1, " + std::to_string(INT_MAX) + "]", std::to_string(max_depth));
  if (!(min_child_weight >= 0 && std::isfinite(min_child_weight)))
    fail("xgb_min_child_weight", "finite and >= 0", xgboost_number(min_child_weight));
  if (!(gamma >= 0 && std::isfinite(gamma))) fail("xgb_gamma", "finite and >= 0", xgboost_number(gamma));
  if (!(subsample > 0 && subsample <= 1)) fail("xgb_subsample", "in (0, 1]", xgboost_number(subsample));
  if (!(colsample_bytree > 0 && colsample_bytree <= 1))
    fail("xgb_colsample", "in (0, 1]", xgboost_number(colsample_bytree));
  if (!(scale_pos_weight > 0 && std::isfinite(scale_pos_weight)))
    fail("xgb_scale_pos_weight", "finite and > 0", xgboost_number(scale_pos_weight));
  if (tree_method != "exact" && tree_method != "approx" && tree_method != "hist")
    fail("xgb_tree_method", "exact, approx or hist", "\"" + tree_method + "\"");
  if (!(max_bin >= 2 && max_bin <= INT_MAX))  // XGBoost's own lower bound
    fail("xgb_max_bin", "in [2, " + std::to_string(INT_MAX) + "]", std::to_string(max_bin));
  if (!(threads >= 0 && threads <= INT_MAX))
    fail("threads", "in [0, " + std::to_string(INT_MAX) + "]", std::to_string(threads));
  if (seed > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("seed", "at most " + std::to_string(std::numeric_limits<int64_t>::max()), std::to_string(seed));
}

nlohmann::json XGBoostParams::to_json() const {
  return {{"learning_rate", learning_rate},
          {"n_estimators", n_estimators},
          {"max_depth", max_depth},
          {"min_child_weight", min_child_weight},
          {"gamma", gamma},
          {"subsample", subsample},
          {"colsample_bytree", colsample_bytree},
          {"scale_pos_weight", scale_pos_weight},
          {"tree_method", tree_method},
          {"max_bin", max_bin},
          {"threads", threads},
          {"seed", seed}};
}

XGBoostParams XGBoostParams::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw DataError("XGBoost params: expected a JSON object, got " + j.dump());
  XGBoostParams p;
  auto real = [](const nlohmann::json& v, const std::string& key) {
    if (!v.is_number()) throw DataError("XGBoost params: \"" + key + "\" must be a number, got " + v.dump());
    return v.get<double>();
  };
  // nlohmann would silently truncate 2.5 to 2.
  auto integer = [](const nlohmann::json& v, const std::string& key) {
    if (!v.is_number_integer()) throw DataError("XGBoost params: \"" + key + "\" must be an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw DataError("XGBoost params: \"" + key + "\" is out of range: " + v.dump());
    return v.get<int64_t>();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "learning_rate")
      p.learning_rate = real(v, key);
    else if (key == "n_estimators")
      p.n_estimators = integer(v, key);
    else if (key == "max_depth")
      p.max_depth = integer(v, key);
    else if (key == "min_child_weight")
      p.min_child_weight = real(v, key);
    else if (key == "gamma")
      p.gamma = real(v, key);
    else if (key == "subsample")
      p.subsample = real(v, key);
    else if (key == "colsample_bytree")
      p.colsample_bytree = real(v, key);
    else if (key == "scale_pos_weight")
      p.scale_pos_weight = real(v, key);
    else if (key == "tree_method") {
      if (!v.is_string()) throw DataError("XGBoost params: \"tree_method\" must be a string, got " + v.dump());
      p.tree_method = v.get<std::string>();
    } else if (key == "max_bin")
      p.max_bin = integer(v, key);
    else if (key == "threads")
      p.threads = integer(v, key);
    else if (key == "seed") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        throw DataError("XGBoost params: \"seed\" must be a non-negative integer, got " + v.dump());
      p.seed = v.get<uint64_t>();
    } else {
      // A typo in a config file should not silently fall back to a default.
      throw DataError("XGBoost params: unknown key \"" + key + "\"");
    }
  }
  try {
    p.validate();
  } catch (const UsageError& e) {
    throw DataError(std::string("XGBoost params: ") + e.what());
  }
  return p;
}

XGBoostClassifier::XGBoostClassifier(XGBoostParams params) : params_(params) { params_.validate(); }
int64_t rfe_rounds(int64_t cols, const RFEParams& rfe) {
  const int64_t to_remove = std::max<int64_t>(0, cols - rfe.n_features_to_select);
  const int64_t per_round = std::max<int64_t>(1, rfe_removed_per_round(cols, rfe));
  return (to_remove + per_round - 1) / per_round;
}

RFEResult recursive_feature_elimination(const float* features, int64_t rows, int64_t cols,
                                        const std::vector<int64_t>& labels, const XGBoostParams& params,
                                        const RFEParams& rfe,
                                        const std::function<void(int64_t round, int64_t remaining)>& progress) {
  params.validate();
  if (!(rfe.step > 0)) throw ConfigError("rfe_step", "must be > 0, got " + xgboost_number(rfe.step));
  if (cols >= 1 && (rfe.n_features_to_select < 1 || rfe.n_features_to_select > cols))
    throw ConfigError("n_features", "must be in [1, " + std::to_string(cols) + "] (the column count), got " +
                                        std::to_string(rfe.n_features_to_select));
  // Checked once here rather than only inside each fit, so that a zero-round
  // selection (n_features_to_select == cols) rejects bad data as well.
  check_xgboost_features(features, rows, cols, "RFE");
  check_xgboost_labels(labels, rows);

  const int64_t per_round = rfe_removed_per_round(cols, rfe);
  std::vector<int64_t> remaining(static_cast<size_t>(cols));
  std::iota(remaining.begin(), remaining.end(), int64_t{0});
  std::vector<int64_t> removed_in(static_cast<size_t>(cols), 0);  // round that removed it; 0 = kept
  std::vector<float> compact;
  int64_t round = 0;
  while (static_cast<int64_t>(remaining.size()) > rfe.n_features_to_select) {
    ++round;
    const int64_t n = static_cast<int64_t>(remaining.size());
    compact.resize(static_cast<size_t>(rows) * static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = features + r * cols;
      float* dst = compact.data() + r * n;
      for (int64_t k = 0; k < n; ++k) dst[k] = src[remaining[static_cast<size_t>(k)]];
    }
    XGBoostClassifier clf(params);
    clf.fit(compact.data(), rows, n, labels);
    const std::vector<double> gain = clf.gain_importance();

    // remaining is ascending, so a stable sort by gain puts lower column indices
    // first among equal gains: those go first.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return gain[static_cast<size_t>(a)] < gain[static_cast<size_t>(b)]; });
    const int64_t drop = std::min(per_round, n - rfe.n_features_to_select);
    for (int64_t k = 0; k < drop; ++k)
      removed_in[static_cast<size_t>(remaining[static_cast<size_t>(order[k])])] = round;
    std::vector<int64_t> kept;
    kept.reserve(static_cast<size_t>(n - drop));
    for (int64_t c : remaining)
      if (removed_in[static_cast<size_t>(c)] == 0) kept.push_back(c);
    remaining.swap(kept);
    if (progress) progress(round, static_cast<int64_t>(remaining.size()));
  }

  RFEResult result;
  result.rounds = round;
  result.selected = remaining;
  result.ranking.resize(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t r = removed_in[static_cast<size_t>(c)];
    result.ranking[static_cast<size_t>(c)] = r == 0 ? 1 : round - r + 2;
  }
  return result;
}

}  // namespace qkv::medical
