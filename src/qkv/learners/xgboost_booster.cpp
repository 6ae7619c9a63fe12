// XGBoostClassifier through XGBoost's C API (libxgboost); a build without
// XGBoost compiles xgboost_booster_absent.cpp instead (runtime/build_parts.h).
#include "qkv/learners/xgboost.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/learners/xgboost_input.h"

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

DMatrixPtr make_dmatrix(const float* features, int64_t rows, int64_t cols, int64_t threads) {
  DMatrixHandle h = nullptr;
  check(XGDMatrixCreateFromMat_omp(features, static_cast<bst_ulong>(rows), static_cast<bst_ulong>(cols),
                                   std::numeric_limits<float>::quiet_NaN(), &h, static_cast<int>(threads)),
        "XGDMatrixCreateFromMat");
  return DMatrixPtr(h);
}

constexpr const char* kParamsAttr = "qkv_params";
}  // namespace

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
  check_xgboost_features(features, rows, cols, "fit");
  check_xgboost_labels(labels, rows);
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
  set("eta", xgboost_number(params_.learning_rate));
  set("max_depth", std::to_string(params_.max_depth));
  set("min_child_weight", xgboost_number(params_.min_child_weight));
  set("gamma", xgboost_number(params_.gamma));
  set("subsample", xgboost_number(params_.subsample));
  set("colsample_bytree", xgboost_number(params_.colsample_bytree));
  set("scale_pos_weight", xgboost_number(params_.scale_pos_weight));
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
  check_xgboost_features(features, rows, cols, "predict");
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
}  // namespace qkv::medical
