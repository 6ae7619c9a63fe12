#pragma once
// A model's options are a field list, as task settings are (core/fields.h):
// next to each options struct, `visit_fields(Options& o, V&& visit)` calls
//   visit(Field{"key", "help"}.at_least(1).from("the paper"), o.member)
// once per option. Reading (read_model_options: types, ranges, choices and
// unknown keys refused the same way for every model, a UsageError naming the
// model and the key), writing (fields_to_json) and the help `qkv params`,
// docs/models.md and the Python keyword arguments show (model_option_help)
// all come from that one declaration. What involves several options is
// checked by the struct's from_json after reading.
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/fields.h"
#include "qkv/core/strict_json.h"
#include "qkv/core/text.h"

namespace qkv::models {

namespace detail {

// "" when `value` suits f's range, else what is wrong ("must be at least 1").
template <typename T>
std::string option_value_problem(const Field& f, const T& value) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    return field_range_problem(f, static_cast<double>(value));
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (field_choice_problem(f, value).empty()) return "";
    return "expected " + join_alternatives(field_choices(f));
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
    // A list's range holds for each of its items (widths >= 1).
    for (size_t i = 0; i < value.size(); ++i)
      if (std::string why = field_range_problem(f, static_cast<double>(value[i])); !why.empty())
        return "item " + std::to_string(i) + " " + why;
    return "";
  } else {
    return "";
  }
}

}  // namespace detail

// The options of `model` read from `j` (null or an object) over `options`
// (the defaults, which may depend on the registry name). UsageError naming
// the model and the key for a value of the wrong type, out of its range or
// not among its words, and for a key no field declares: a typo must not
// pass silently.
template <typename Options>
Options read_model_options(const std::string& model, const nlohmann::json& j, Options options = Options{}) {
  if (!j.is_null() && !j.is_object()) throw UsageError(model + " options: expected a JSON object");
  std::set<std::string> known;
  visit_fields(options, [&](const Field& f, auto& member) {
    known.insert(f.key);
    if (j.is_null() || !j.contains(f.key)) return;
    const auto& given = j.at(f.key);
    // A long text is shortened inside its quotes, a long list or object as written.
    const std::string shown =
        given.is_string() ? "\"" + shortened(given.get<std::string>()) + "\"" : shortened(given.dump());
    const std::string said = model + " option '" + f.key + "' = " + shown + ": ";
    if (const std::string why = json_value_as(given, member); !why.empty()) throw UsageError(said + why);
    if (const std::string why = detail::option_value_problem(f, member); !why.empty()) throw UsageError(said + why);
  });
  if (j.is_object())
    for (const auto& item : j.items())
      if (!known.count(item.key())) throw UsageError(model + ": unknown option '" + item.key() + "'");
  return options;
}

// The help of one option: what it does and where its default comes from.
struct OptionHelp {
  std::string key;
  std::string help;    // one line: what the option does
  std::string source;  // where the default comes from when it matters ("the paper", ...); empty otherwise
};
using OptionHelpList = std::vector<OptionHelp>;

// A line per field of Options, in its order.
template <typename Options>
OptionHelpList model_option_help() {
  Options options;
  OptionHelpList help;
  visit_fields(options, [&](const Field& f, auto&) { help.push_back({f.key, f.help, f.source ? f.source : ""}); });
  return help;
}

// `visit` with the sources of some keys replaced: a model that shares a field
// list and says otherwise where a default comes from (the segmenters'
// backbones). Each key must be one the list visits (tests/models checks the
// help of every option).
template <typename V>
auto with_sources(V& visit, std::vector<std::pair<const char*, const char*>> sources) {
  return [&visit, sources = std::move(sources)](const Field& f, auto& member) {
    Field said = f;
    for (const auto& [key, source] : sources)
      if (std::string(key) == f.key) said.source = source;
    visit(said, member);
  };
}

}  // namespace qkv::models
