#pragma once
// Cross-validation splits by sample index, stratified by class (MHCA's
// repeated k-fold protocol on small cohorts, where an unstratified split can
// leave a fold without a single patient of one class).
//
// Shuffles use std::mt19937_64 and a Fisher-Yates written here, not
// std::shuffle, whose algorithm differs between standard libraries: the same
// seed gives the same folds with any compiler.
#include <cstdint>
#include <utility>
#include <vector>

namespace qkv::data {

// Test folds of a stratified k-fold split. Each class's indices (classes in
// ascending label order) are shuffled with one std::mt19937_64(seed) and dealt
// round-robin into the k folds, each class continuing where the previous one
// stopped. So every fold's count of each class is within one of
// class_size / k, fold sizes are within one of n / k, and every index is in
// exactly one fold. Each fold is sorted ascending. Deterministic for a seed.
// UsageError if k < 2; DataError "class 0 has 3 subjects, fewer than --folds 5"
// if some class has fewer than k members, or when labels is empty.
std::vector<std::vector<int64_t>> stratified_kfold(const std::vector<int64_t>& labels, int64_t k, uint64_t seed);

// Splits `indices` (positions into `labels`, the whole set's labels) into
// (first, second): of each class, round(fraction * size) members go to
// second, at least 1 when fraction > 0 and the class has >= 2 members, and at
// most size - 1 so that first keeps every class it was given. Members are
// chosen by a shuffle with the seed; both parts are sorted ascending.
// ConfigError "val_fraction" unless 0 <= fraction < 1; DataError for an index
// outside labels or a repeated index.
std::pair<std::vector<int64_t>, std::vector<int64_t>> stratified_split(const std::vector<int64_t>& indices,
                                                                       const std::vector<int64_t>& labels,
                                                                       double fraction, uint64_t seed);

// One fold of one run: train, val and test are disjoint, sorted, and together
// hold every index once.
struct CVFold {
  int64_t run = 0, fold = 0;
  std::vector<int64_t> train, val, test;
};

// runs x k folds, run-major. Run r's test folds are stratified_kfold(labels, k,
// seed + r); val is carved from the rest with stratified_split(val_fraction),
// seeded from (seed + r, fold) so that every fold draws a different val set.
// val_fraction = 0 leaves val empty. ConfigError "runs" if runs < 1.
std::vector<CVFold> repeated_stratified_folds(const std::vector<int64_t>& labels, int64_t runs, int64_t k,
                                              double val_fraction, uint64_t seed);

}  // namespace qkv::data
