#pragma once
// XGBoost (Debian's libxgboost, C API) for the MHCA paper's DNA-methylation
// side (Appendix A): recursive feature elimination down to 441 CpG features,
// and the unimodal XGBoost baseline on the selected ones. No LibTorch here. In
// a build without XGBoost the classifier refuses to fit or load
// (runtime/build_parts.h); parameters and RFE's arithmetic stay.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/core/fields.h"

namespace qkv::medical {

// The paper's Table A.1 as defaults (its nthreads 15 excepted: 0 lets XGBoost
// pick, one thread per core).
// tree_method defaults to "exact": the paper used scikit-learn's XGBClassifier
// of 2019, whose tree_method "auto" meant exact greedy on one machine below 4M
// rows, and at the paper's shape (a few hundred rows, tens of thousands of
// columns) exact is also the cheaper one: hist's split search scans every bin
// of every column at every node. Measured at 326x20000: hist took ~1.4x the
// CPU time and ~14x the memory (2 GB) of exact. "hist" (with max_bin) and
// "approx" remain available.
struct XGBoostParams {
  double learning_rate = 0.1;
  int64_t n_estimators = 100;
  int64_t max_depth = 6;
  double min_child_weight = 2;
  double gamma = 0;
  double subsample = 0.8;
  double colsample_bytree = 0.8;
  double scale_pos_weight = 1;
  std::string tree_method = "exact";  // exact | approx | hist
  int64_t max_bin = 256;              // hist and approx only
  int64_t threads = 0;                // 0 = XGBoost's default
  uint64_t seed = 0;                  // at most INT64_MAX: XGBoost's seed is signed

  // ConfigError naming the key, e.g. "xgb_learning_rate must be in (0, 1], got 0".
  void validate() const;
  nlohmann::json to_json() const;
  // Missing keys keep their defaults; unknown keys, wrong types or invalid
  // values throw DataError (the JSON comes from a file, not the command line).
  static XGBoostParams from_json(const nlohmann::json& j);
};

// XGBoost's settings as options and config.json keys (core/fields.h).
template <typename V>
void visit_fields(XGBoostParams& p, V&& visit) {
  visit(Field{"xgb_learning_rate", "XGBoost learning rate (paper Table A.1)"}.range(1e-9, 1), p.learning_rate);
  visit(Field{"xgb_estimators", "XGBoost boosting rounds"}.range(1, 100000), p.n_estimators);
  visit(Field{"xgb_max_depth", "XGBoost tree depth"}.range(1, 30), p.max_depth);
  visit(Field{"xgb_min_child_weight", "XGBoost min_child_weight"}.at_least(0), p.min_child_weight);
  visit(Field{"xgb_gamma", "XGBoost gamma (min split loss)"}.at_least(0), p.gamma);
  visit(Field{"xgb_subsample", "XGBoost row subsample per tree"}.range(1e-6, 1), p.subsample);
  visit(Field{"xgb_colsample", "XGBoost column subsample per tree"}.range(1e-6, 1), p.colsample_bytree);
}

// A binary classifier: objective binary:logistic, eval_metric logloss. Features
// are row-major float, NaN for missing; +-inf is a DataError. Training is
// deterministic for a given seed and thread count. Not safe to use one object
// from several threads at once, const methods included (XGBoost's prediction
// cache lives in the booster).
class XGBoostClassifier {
 public:
  // Throws UsageError if params are invalid.
  explicit XGBoostClassifier(XGBoostParams params = {});
  ~XGBoostClassifier();
  XGBoostClassifier(const XGBoostClassifier&) = delete;
  XGBoostClassifier& operator=(const XGBoostClassifier&) = delete;
  XGBoostClassifier(XGBoostClassifier&& other) noexcept;
  XGBoostClassifier& operator=(XGBoostClassifier&& other) noexcept;

  // Trains a fresh model (any previous one is discarded). labels: rows values,
  // each 0 or 1, both classes present, else DataError.
  void fit(const float* features, int64_t rows, int64_t cols, const std::vector<int64_t>& labels);

  bool fitted() const { return booster_ != nullptr; }
  int64_t num_features() const { return n_features_; }
  const XGBoostParams& params() const { return params_; }

  // P(label 1) per row. cols must equal the training column count.
  std::vector<double> predict_proba(const float* features, int64_t rows, int64_t cols) const;

  // Average gain per split of each training column (XGBoost's "gain", i.e.
  // scikit-learn's XGBClassifier.feature_importances_ before normalisation);
  // 0 for columns never split on. Size num_features().
  std::vector<double> gain_importance() const;

  // The model as XGBoost JSON, with the params stored as an attribute, for
  // checkpoints; load() gives back a classifier with identical predictions.
  std::vector<char> save() const;
  static XGBoostClassifier load(const std::vector<char>& bytes);

 private:
  XGBoostParams params_;
  void* booster_ = nullptr;  // BoosterHandle; void* keeps c_api.h out of this header
  int64_t n_features_ = 0;
};

// scikit-learn RFE semantics. step in (0, 1): that fraction of the ORIGINAL
// column count is removed per round (max(1, int(step * cols))); step >= 1: int(step)
// per round. The last round removes only down to n_features_to_select.
struct RFEParams {
  int64_t n_features_to_select = 441;
  double step = 0.05;
};

// Rounds (model fits) RFE takes from cols columns; 0 when nothing is removed.
// Assumes valid params (recursive_feature_elimination checks them).
int64_t rfe_rounds(int64_t cols, const RFEParams& rfe);

struct RFEResult {
  std::vector<int64_t> selected;  // column indices, ascending
  std::vector<int64_t> ranking;   // per column: 1 = selected, 2 = removed in the last round, ...
  int64_t rounds = 0;             // model fits done (0 when n_features_to_select == cols)
};

// Fits one classifier per round on the remaining columns of the given rows
// (pass training-fold rows only, or the selection leaks the test labels) and
// removes the columns of lowest gain importance. Ties (typically the many
// columns no tree split on) are broken by column index, lower index removed
// first: what scikit-learn does with a stable argsort. Deterministic for a
// given seed and thread count.
// UsageError for invalid params, n_features_to_select outside [1, cols] or
// step <= 0; DataError if labels hold one class only or data are malformed.
// progress(round, remaining) is called after each round (round counts from 1,
// remaining is the column count after that round); it may throw to abort.
RFEResult recursive_feature_elimination(const float* features, int64_t rows, int64_t cols,
                                        const std::vector<int64_t>& labels, const XGBoostParams& params,
                                        const RFEParams& rfe,
                                        const std::function<void(int64_t round, int64_t remaining)>& progress = {});

}  // namespace qkv::medical
