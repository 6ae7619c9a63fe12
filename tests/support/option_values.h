#pragma once
// Test values for a model option derived from its default, so that tests
// that go over every declared option (the registry's) need no hand list.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>

namespace qkv::testing {

// The JSON value next to `v` that the option's reader should still accept in
// most cases: a bool flipped, a number changed, another pooling, an array's
// first number changed.
inline nlohmann::json changed(const nlohmann::json& v) {
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() + 1;
  if (v.is_number_float()) return v.get<double>() == 0 ? 0.25 : v.get<double>() / 2;
  if (v.is_string()) return v == "max" ? "mean" : "max";
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
    auto a = v;
    a[0] = v[0].get<int64_t>() + 1;
    return a;
  }
  if (v.is_array()) return nlohmann::json::array({8});
  ADD_FAILURE() << "no change for " << v.dump();
  return v;
}

}  // namespace qkv::testing
