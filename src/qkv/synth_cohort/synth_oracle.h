#pragma once
// The check that the cross-modal cohort is what it claims: logistic
// regression on the true quantities (what a perfect reader of each modality
// would know), with and without the products that couple the modalities.
// Internal to write_synth_cohort (qkv/synth_cohort/synth_cohort.h is the public
// face and documents the model).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/medical/cohort.h"
#include "qkv/synth_cohort/synth_methylation.h"
#include "qkv/synth_cohort/synth_subjects.h"

namespace qkv::medical::synth {

// Accuracies of logistic regression, 3 x 5-fold stratified CV pooled, on:
struct OracleCheck {
  double imaging = 0;        // the four striatal binding ratios and the cross-modal regions' z
  double additive = 0;       // those and the cross-modal sites' logit(beta)
  double with_products = 0;  // those and each site's logit times its region's z
  int64_t runs = 3, folds = 5, subjects = 0, sites = 0;

  double additive_gain() const { return additive - imaging; }
  double product_gain() const { return with_products - additive; }
  nlohmann::json to_json() const;
  // "oracle check (...): imaging 88.0 %, + sites additively 87.7 % (-0.3), + site x region products 92.6 % (+4.9)"
  std::string describe() const;
};

// The check on the cohort's subjects and methylation table (missing
// beta-values take their column's mean).
OracleCheck cross_modal_oracle(const std::vector<Subject>& subjects, const MethylationPlan& plan,
                               const medical::MethylationTable& table, uint64_t seed);

}  // namespace qkv::medical::synth
