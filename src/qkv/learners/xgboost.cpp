#include "qkv/learners/xgboost.h"

#include <xgboost/c_api.h>

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

namespace qkv::medical {
namespace {

// XGBoost's last error carries a timestamp, source location and often a stack
// trace over many lines; the project's errors are one line.
std::string xgb_error_text() {
  std::string text = XGBGetLastError();
  const auto trace = text.find("Stack trace");
  if (trace != std::string::npos) text.erase(trace);
  if (text.size() > 1 && text[0] == '[') {  // "[12:34:56] " timestamp
    const auto close = text.find("] ");
    if (close != std::string::npos && close < 16) text.erase(0, close + 2);
  }
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out.push_back(space ? ' ' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "unknown error" : out;
}

void check(int rc, const char* call) {
  if (rc != 0) throw DataError(std::string("XGBoost ") + call + " failed: " + xgb_error_text());
}

struct DMatrixDeleter {
  void operator()(void* h) const { XGDMatrixFree(h); }
};
struct BoosterDeleter {
  void operator()(void* h) const { XGBoosterFree(h); }
};
using DMatrixPtr = std::unique_ptr<void, DMatrixDeleter>;
using BoosterPtr = std::unique_ptr<void, BoosterDeleter>;

// Round-trip precision: std::to_string keeps 6 decimals, too few for small etas.
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void check_shape(const float* features, int64_t rows, int64_t cols, const char* what) {
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

void check_labels(const std::vector<int64_t>& labels, int64_t rows) {
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

DMatrixPtr make_dmatrix(const float* features, int64_t rows, int64_t cols, int64_t threads) {
  DMatrixHandle h = nullptr;
  check(XGDMatrixCreateFromMat_omp(features, static_cast<bst_ulong>(rows), static_cast<bst_ulong>(cols),
                                   std::numeric_limits<float>::quiet_NaN(), &h, static_cast<int>(threads)),
        "XGDMatrixCreateFromMat");
  return DMatrixPtr(h);
}

constexpr const char* kParamsAttr = "qkv_params";

// scikit-learn: int(max(1, step * n_features)) for a fraction, else int(step).
int64_t rfe_removed_per_round(int64_t cols, const RFEParams& rfe) {
  if (rfe.step < 1) return std::max<int64_t>(1, static_cast<int64_t>(rfe.step * static_cast<double>(cols)));
  return rfe.step >= static_cast<double>(cols) ? cols : static_cast<int64_t>(rfe.step);
}

}  // namespace

void XGBoostParams::validate() const {
  auto fail = [](const std::string& key, const std::string& rule, const std::string& got) {
    throw ConfigError(key, "must be " + rule + ", got " + got);
  };
  // Written as !(ok) so that NaN fails too.
  if (!(learning_rate > 0 && learning_rate <= 1)) fail("xgb_learning_rate", "in (0, 1]", num(learning_rate));
  if (!(n_estimators >= 1 && n_estimators <= INT_MAX))
    fail("xgb_estimators", "in [1, " + std::to_string(INT_MAX) + "]", std::to_string(n_estimators));
  if (!(max_depth >= 1 && max_depth <= INT_MAX))
    fail("xgb_max_depth", "in [1, " + std::to_string(INT_MAX) + "]", std::to_string(max_depth));
  if (!(min_child_weight >= 0 && std::isfinite(min_child_weight)))
    fail("xgb_min_child_weight", "finite and >= 0", num(min_child_weight));
  if (!(gamma >= 0 && std::isfinite(gamma))) fail("xgb_gamma", "finite and >= 0", num(gamma));
  if (!(subsample > 0 && subsample <= 1)) fail("xgb_subsample", "in (0, 1]", num(subsample));
  if (!(colsample_bytree > 0 && colsample_bytree <= 1)) fail("xgb_colsample", "in (0, 1]", num(colsample_bytree));
  if (!(scale_pos_weight > 0 && std::isfinite(scale_pos_weight)))
    fail("xgb_scale_pos_weight", "finite and > 0", num(scale_pos_weight));
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

XGBoostClassifier::~XGBoostClassifier() {
  if (booster_ != nullptr) XGBoosterFree(booster_);
}

XGBoostClassifier::XGBoostClassifier(XGBoostClassifier&& other) noexcept
    : params_(other.params_),
      booster_(std::exchange(other.booster_, nullptr)),
      n_features_(std::exchange(other.n_features_, 0)) {}

XGBoostClassifier& XGBoostClassifier::operator=(XGBoostClassifier&& other) noexcept {
  if (this != &other) {
    if (booster_ != nullptr) XGBoosterFree(booster_);
    params_ = other.params_;
    booster_ = std::exchange(other.booster_, nullptr);
    n_features_ = std::exchange(other.n_features_, 0);
  }
  return *this;
}

void XGBoostClassifier::fit(const float* features, int64_t rows, int64_t cols, const std::vector<int64_t>& labels) {
  check_shape(features, rows, cols, "fit");
  check_labels(labels, rows);
  DMatrixPtr dtrain = make_dmatrix(features, rows, cols, params_.threads);
  std::vector<float> y(labels.begin(), labels.end());
  check(XGDMatrixSetFloatInfo(dtrain.get(), "label", y.data(), static_cast<bst_ulong>(rows)),
        "XGDMatrixSetFloatInfo(label)");

  // The booster learns the column count from the DMatrix given here (it refuses
  // to train without one); it keeps only a weak reference, so freeing dtrain at
  // the end of fit frees the training copy.
  BoosterHandle raw = nullptr;
  DMatrixHandle cache[] = {dtrain.get()};
  check(XGBoosterCreate(cache, 1, &raw), "XGBoosterCreate");
  BoosterPtr booster(raw);
  auto set = [&](const char* name, const std::string& value) {
    check(XGBoosterSetParam(booster.get(), name, value.c_str()), "XGBoosterSetParam");
  };
  set("objective", "binary:logistic");
  set("tree_method", params_.tree_method);
  if (params_.tree_method != "exact") set("max_bin", std::to_string(params_.max_bin));
  set("eval_metric", "logloss");
  set("verbosity", "0");
  set("eta", num(params_.learning_rate));
  set("max_depth", std::to_string(params_.max_depth));
  set("min_child_weight", num(params_.min_child_weight));
  set("gamma", num(params_.gamma));
  set("subsample", num(params_.subsample));
  set("colsample_bytree", num(params_.colsample_bytree));
  set("scale_pos_weight", num(params_.scale_pos_weight));
  set("seed", std::to_string(params_.seed));
  if (params_.threads > 0) set("nthread", std::to_string(params_.threads));
  for (int64_t it = 0; it < params_.n_estimators; ++it)
    check(XGBoosterUpdateOneIter(booster.get(), static_cast<int>(it), dtrain.get()), "XGBoosterUpdateOneIter");
  const std::string attr = params_.to_json().dump();
  check(XGBoosterSetAttr(booster.get(), kParamsAttr, attr.c_str()), "XGBoosterSetAttr");

  if (booster_ != nullptr) XGBoosterFree(booster_);
  booster_ = booster.release();
  n_features_ = cols;
}

std::vector<double> XGBoostClassifier::predict_proba(const float* features, int64_t rows, int64_t cols) const {
  if (booster_ == nullptr) throw DataError("XGBoost predict: the classifier is not fitted");
  if (cols != n_features_)
    throw DataError("XGBoost predict: " + std::to_string(cols) + " columns, the model was trained on " +
                    std::to_string(n_features_));
  check_shape(features, rows, cols, "predict");
  DMatrixPtr dmat = make_dmatrix(features, rows, cols, params_.threads);
  const char* config =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* out = nullptr;
  check(XGBoosterPredictFromDMatrix(booster_, dmat.get(), config, &shape, &dim, &out), "XGBoosterPredictFromDMatrix");
  bst_ulong n = 1;
  for (bst_ulong i = 0; i < dim; ++i) n *= shape[i];
  if (n != static_cast<bst_ulong>(rows))
    throw DataError("XGBoost predict: got " + std::to_string(n) + " predictions for " + std::to_string(rows) + " rows");
  return std::vector<double>(out, out + rows);
}

std::vector<double> XGBoostClassifier::gain_importance() const {
  if (booster_ == nullptr) throw DataError("XGBoost importance: the classifier is not fitted");
  bst_ulong n_names = 0;
  const char** names = nullptr;
  bst_ulong dim = 0;
  const bst_ulong* shape = nullptr;
  const float* scores = nullptr;
  check(XGBoosterFeatureScore(booster_, R"({"importance_type": "gain"})", &n_names, &names, &dim, &shape, &scores),
        "XGBoosterFeatureScore");
  // Without feature names XGBoost 1.7 names column i "f<i>" and leaves out the
  // columns no tree splits on.
  std::vector<double> gain(static_cast<size_t>(n_features_), 0.0);
  for (bst_ulong i = 0; i < n_names; ++i) {
    const char* name = names[i];
    if (name[0] == 'f') ++name;
    char* end = nullptr;
    errno = 0;
    const long long idx = std::strtoll(name, &end, 10);
    if (end == name || *end != '\0' || errno != 0 || idx < 0 || idx >= n_features_)
      throw DataError(std::string("XGBoost importance: unexpected feature name \"") + names[i] + "\"");
    gain[static_cast<size_t>(idx)] = scores[i];
  }
  return gain;
}

std::vector<char> XGBoostClassifier::save() const {
  if (booster_ == nullptr) throw DataError("XGBoost save: the classifier is not fitted");
  bst_ulong len = 0;
  const char* data = nullptr;
  check(XGBoosterSaveModelToBuffer(booster_, R"({"format": "json"})", &len, &data), "XGBoosterSaveModelToBuffer");
  return std::vector<char>(data, data + len);
}

XGBoostClassifier XGBoostClassifier::load(const std::vector<char>& bytes) {
  // Only what save() writes: XGBoost's legacy binary parser trusts sizes read
  // from the buffer, so arbitrary bytes are refused before they reach it.
  const auto first =
      std::find_if(bytes.begin(), bytes.end(), [](char c) { return c != ' ' && c != '\n' && c != '\r' && c != '\t'; });
  if (first == bytes.end() || *first != '{')
    throw DataError("XGBoost load: not an XGBoost JSON model (" + std::to_string(bytes.size()) + " bytes)");
  BoosterHandle raw = nullptr;
  check(XGBoosterCreate(nullptr, 0, &raw), "XGBoosterCreate");
  BoosterPtr booster(raw);
  check(XGBoosterLoadModelFromBuffer(booster.get(), bytes.data(), static_cast<bst_ulong>(bytes.size())),
        "XGBoosterLoadModelFromBuffer");
  bst_ulong n_features = 0;
  check(XGBoosterGetNumFeature(booster.get(), &n_features), "XGBoosterGetNumFeature");
  if (n_features < 1 || n_features > static_cast<bst_ulong>(INT64_MAX))
    throw DataError("XGBoost load: the model has " + std::to_string(n_features) + " features");

  XGBoostParams params;
  const char* attr = nullptr;
  int found = 0;
  check(XGBoosterGetAttr(booster.get(), kParamsAttr, &attr, &found), "XGBoosterGetAttr");
  if (found) {
    const auto j = nlohmann::json::parse(attr, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw DataError(std::string("XGBoost load: malformed ") + kParamsAttr + " attribute");
    params = XGBoostParams::from_json(j);
  }
  XGBoostClassifier clf(params);
  clf.booster_ = booster.release();
  clf.n_features_ = static_cast<int64_t>(n_features);
  return clf;
}

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
  if (!(rfe.step > 0)) throw ConfigError("rfe_step", "must be > 0, got " + num(rfe.step));
  if (cols >= 1 && (rfe.n_features_to_select < 1 || rfe.n_features_to_select > cols))
    throw ConfigError("n_features", "must be in [1, " + std::to_string(cols) + "] (the column count), got " +
                                        std::to_string(rfe.n_features_to_select));
  // Checked once here rather than only inside each fit, so that a zero-round
  // selection (n_features_to_select == cols) rejects bad data as well.
  check_shape(features, rows, cols, "RFE");
  check_labels(labels, rows);

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
