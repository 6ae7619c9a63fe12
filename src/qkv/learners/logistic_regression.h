#pragma once
// L2-regularised logistic regression fitted by Newton's method, for small
// dense problems (hundreds of rows, tens of columns): the synthetic cohort's
// oracle check. Plain double arithmetic, deterministic, no LibTorch.
#include <cstdint>
#include <vector>

namespace qkv::medical {

struct LogisticModel {
  std::vector<double> mean, scale;  // per column, fitted on the training rows (columns are standardised)
  std::vector<double> weights;      // per column, on the standardised values
  double bias = 0;
  // P(label 1) of one row of the same columns.
  double probability(const double* row) const;
};

// x row-major [rows, cols], labels 0/1. `ridge` is the L2 penalty on the
// standardised weights (not on the bias). UsageError on empty or mismatched
// input.
LogisticModel fit_logistic(const std::vector<double>& x, int64_t rows, int64_t cols, const std::vector<int64_t>& labels,
                           double ridge = 1.0);

// Accuracy at 0.5 of logistic regression over repeated stratified k-fold
// cross validation (runs x folds, seeds seed .. seed + runs - 1): the share
// of predictions that are right, pooled over every run and fold.
double cross_validated_logistic_accuracy(const std::vector<double>& x, int64_t rows, int64_t cols,
                                         const std::vector<int64_t>& labels, int64_t folds, int64_t runs, uint64_t seed,
                                         double ridge = 1.0);

}  // namespace qkv::medical
