#pragma once
// Reads a model's JSON options with range checks, so that every model rejects
// unknown keys and bad values the same way (UsageError naming model and key),
// and holds the one-line help of each option (OptionHelp).
#include <nlohmann/json.hpp>
#include <limits>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/strict_json.h"
#include "qkv/core/text.h"

namespace qkv::models {


class OptionReader {
 public:
  OptionReader(std::string model, const nlohmann::json& j) : model_(std::move(model)), j_(j) {
    if (!j_.is_null() && !j_.is_object()) throw UsageError(model_ + " options: expected a JSON object");
  }

  // Leaves `value` as it is when the key is absent; UsageError showing the
  // value as given (shortened) when it is not a T.
  template <typename T>
  void get(const std::string& key, T& value) {
    seen_.insert(key);
    if (j_.is_null() || !j_.contains(key)) return;
    const auto& given = j_.at(key);
    if (const std::string why = json_value_as(given, value); !why.empty())
      throw UsageError(model_ + " option '" + key + "' = " + shortened(given.dump()) + ": " + why);
  }

  template <typename T>
  void get(const std::string& key, T& value, std::common_type_t<T> lo,
           std::common_type_t<T> hi = std::numeric_limits<T>::max()) {
    get(key, value);
    if (!(value >= lo && value <= hi))
      throw UsageError(model_ + " option '" + key + "' = " + nlohmann::json(value).dump() +
                       (hi == std::numeric_limits<T>::max()
                            ? " is below its least value, " + nlohmann::json(lo).dump()
                            : " is out of range [" + nlohmann::json(lo).dump() + ", " + nlohmann::json(hi).dump() + "]"));
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

// The help of one option, kept in a table next to the options' from_json
// (Options::option_help()); the registry joins it with the defaults.
struct OptionHelp {
  OptionHelp(std::string key, std::string help, std::string source = "")
      : key(std::move(key)), help(std::move(help)), source(std::move(source)) {}
  std::string key;
  std::string help;    // one line: what the option does
  std::string source;  // where the default comes from when it matters ("the paper", ...); empty otherwise
};
using OptionHelpList = std::vector<OptionHelp>;

// a's rows, then b's.
inline OptionHelpList concat_options(OptionHelpList a, const OptionHelpList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The rows of `list` whose keys are not in `keys`.
inline OptionHelpList without_options(OptionHelpList list, const std::set<std::string>& keys) {
  OptionHelpList out;
  for (auto& h : list)
    if (!keys.count(h.key)) out.push_back(std::move(h));
  return out;
}

// Sets the source of `key`'s default (for a struct that changes a default it
// shares with another, e.g. the segmenters' backbones).
inline void set_option_source(OptionHelpList& list, const std::string& key, const std::string& source) {
  for (auto& h : list)
    if (h.key == key) {
      h.source = source;
      return;
    }
  throw std::logic_error("set_option_source: no option '" + key + "'");
}

}  // namespace qkv::models
