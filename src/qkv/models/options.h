#pragma once
// Reads a model's JSON options with range checks, so that every model rejects
// unknown keys and bad values the same way (UsageError naming model and key).
#include <nlohmann/json.hpp>
#include <limits>
#include <set>
#include <type_traits>
#include <string>

#include "qkv/core/errors.h"

namespace qkv::models {

class OptionReader {
 public:
  OptionReader(std::string model, const nlohmann::json& j) : model_(std::move(model)), j_(j) {
    if (!j_.is_null() && !j_.is_object()) throw UsageError(model_ + " options: expected a JSON object");
  }

  template <typename T>
  void get(const std::string& key, T& value) {
    seen_.insert(key);
    if (j_.is_null() || !j_.contains(key)) return;
    try {
      value = j_.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      throw UsageError(model_ + " option '" + key + "': wrong type (" + j_.at(key).dump() + ")");
    }
  }

  template <typename T>
  void get(const std::string& key, T& value, std::common_type_t<T> lo,
           std::common_type_t<T> hi = std::numeric_limits<T>::max()) {
    get(key, value);
    if (!(value >= lo && value <= hi))
      throw UsageError(model_ + " option '" + key + "' = " + nlohmann::json(value).dump() + " is out of range [" +
                       nlohmann::json(lo).dump() + ", " + nlohmann::json(hi).dump() + "]");
  }

  const std::string& model() const { return model_; }

  // Throws on keys that no get() asked for: a typo must not pass silently.
  void finish() const {
    if (j_.is_null()) return;
    for (const auto& item : j_.items())
      if (!seen_.count(item.key())) throw UsageError(model_ + ": unknown option '" + item.key() + "'");
  }

 private:
  std::string model_;
  const nlohmann::json& j_;
  std::set<std::string> seen_;
};

}  // namespace qkv::models
