// A build without XGBoost (not found, or QKV_WITHOUT names it): the classifier
// exists, so that everything else links and runs, and refuses to fit or load
// with the line runtime/build_parts.h words. Never fitted, it holds no booster.
#include <utility>

#include "qkv/learners/xgboost.h"
#include "qkv/runtime/build_parts.h"

namespace qkv::medical {

XGBoostClassifier::~XGBoostClassifier() = default;

XGBoostClassifier::XGBoostClassifier(XGBoostClassifier&& other) noexcept
    : params_(other.params_), n_features_(std::exchange(other.n_features_, 0)) {}

XGBoostClassifier& XGBoostClassifier::operator=(XGBoostClassifier&& other) noexcept {
  params_ = other.params_;
  n_features_ = std::exchange(other.n_features_, 0);
  return *this;
}

void XGBoostClassifier::fit(const float*, int64_t, int64_t, const std::vector<int64_t>&) {
  refuse_without(Part::XGBoost, "XGBoost fit");
}

std::vector<double> XGBoostClassifier::predict_proba(const float*, int64_t, int64_t) const {
  refuse_without(Part::XGBoost, "XGBoost predict");
}

std::vector<double> XGBoostClassifier::gain_importance() const { refuse_without(Part::XGBoost, "XGBoost importance"); }

std::vector<char> XGBoostClassifier::save() const { refuse_without(Part::XGBoost, "XGBoost save"); }

XGBoostClassifier XGBoostClassifier::load(const std::vector<char>&) { refuse_without(Part::XGBoost, "XGBoost load"); }

}  // namespace qkv::medical
