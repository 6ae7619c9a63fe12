#pragma once
// What learners/xgboost.cpp (parameters, RFE) and the booster behind the C API
// (xgboost_booster.cpp) both check and write; internal to learners/.
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::medical {

// Round-trip precision: std::to_string keeps 6 decimals, too few for small etas.
std::string xgboost_number(double v);

// DataError "XGBoost <what>: ..." for an empty or oversized shape, no data, or
// an infinite value (NaN is XGBoost's "missing").
void check_xgboost_features(const float* features, int64_t rows, int64_t cols, const char* what);

// DataError unless there is one label per row, each 0 or 1, both present.
void check_xgboost_labels(const std::vector<int64_t>& labels, int64_t rows);

}  // namespace qkv::medical
