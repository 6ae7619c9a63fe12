#pragma once
// Strict conversion of one JSON value to a setting's C++ type, for model
// options and run settings read from the command line or from a file: empty
// when `j` holds a T exactly (`out` set), else what it holds instead (`out`
// unchanged). JSON numbers convert to integers only when whole and in range
// (8.5 and 1e300 are refused, never truncated or wrapped), to booleans never;
// nlohmann's own get<T>() would truncate, wrap or throw.
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace qkv {

inline std::string json_value_as(const nlohmann::json& j, nlohmann::json& out) {
  out = j;
  return "";
}

inline std::string json_value_as(const nlohmann::json& j, bool& out) {
  if (!j.is_boolean()) return "not true or false";
  out = j.get<bool>();
  return "";
}

inline std::string json_value_as(const nlohmann::json& j, std::string& out) {
  if (!j.is_string()) return "not a string";
  out = j.get<std::string>();
  return "";
}

template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
std::string json_value_as(const nlohmann::json& j, T& out) {
  constexpr auto lo = std::numeric_limits<T>::min();
  constexpr auto hi = std::numeric_limits<T>::max();
  const std::string range = "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (j.is_number_unsigned()) {
    const auto v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(hi)) return "not " + range;
    out = static_cast<T>(v);
  } else if (j.is_number_integer()) {
    const auto v = j.get<int64_t>();
    if (v < static_cast<int64_t>(lo) || (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(hi)))
      return "not " + range;
    out = static_cast<T>(v);
  } else if (j.is_number_float()) {
    const double v = j.get<double>();
    // One past the largest value, 2^digits, is exact as a double (hi is not).
    const double end = std::ldexp(1.0, std::numeric_limits<T>::digits);
    if (!(v == std::floor(v) && v >= static_cast<double>(lo) && v < end)) return "not " + range;
    out = static_cast<T>(v);
  } else {
    return "not a number";
  }
  return "";
}

template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
std::string json_value_as(const nlohmann::json& j, T& out) {
  if (!j.is_number()) return "not a number";
  out = j.get<T>();
  return "";
}

template <typename T>
std::string json_value_as(const nlohmann::json& j, std::vector<T>& out) {
  if (!j.is_array()) return "not a list";
  std::vector<T> values(j.size());
  for (size_t i = 0; i < j.size(); ++i)
    if (std::string why = json_value_as(j[i], values[i]); !why.empty())
      return "item " + std::to_string(i) + " is " + why;
  out = std::move(values);
  return "";
}

}  // namespace qkv
