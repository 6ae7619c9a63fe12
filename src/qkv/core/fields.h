#pragma once
// One description of each settings struct, from which its JSON (config.json),
// its reading back and its command-line options are all derived: a free
// function `visit_fields(S& s, V&& visit)` next to the struct calls
//   visit(Field{"key", "help"}, s.member)
// once per field, in the order config.json lists them. Nothing else spells a
// field's name.
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/strict_json.h"
#include "qkv/core/text.h"

namespace qkv {

// The largest seed an option or field takes. Seeds are 64-bit and never
// negative (CLI11 would read "-1" into an unsigned as 2^64 - 1).
inline constexpr double kMaxSeed = 9.2e18;

struct Field {
  const char* key;
  const char* help;
  // The command-line name where it is not the key's ("arms" for "classes"):
  // nullptr = the key with '_' as '-'; "" = not an option (recorded in
  // config.json only, e.g. a value the data decide). The CLI adds the dashes.
  const char* option = nullptr;
  // The values a numeric field accepts (inclusive); NaN and infinities are
  // never accepted. The CLI checks them on the option's text and shows them
  // in --help; reading config.json back checks them too.
  double min = -std::numeric_limits<double>::max();
  double max = std::numeric_limits<double>::max();
  // A bound the value must not reach ("> 0" for a learning rate, "< 1" for a
  // momentum) rather than may equal.
  bool min_open = false, max_open = false;
  // The words a text field accepts, '|'-separated ("absolute|row"); nullptr
  // = any text. Checked like the ranges (the CLI on the text, --help lists
  // them, check_field_ranges and config.json's reading).
  const char* choices = nullptr;
  // An earlier command-line name (without dashes) still accepted, hidden,
  // for one release; nullptr = none.
  const char* old_option = nullptr;

  // A front end must give it (the CLI makes the option required).
  bool required = false;
  // A text field naming a file that must exist (the CLI checks it when the
  // option is parsed; readers say so again, naming the file).
  bool existing = false;
  // Where the default comes from when it matters ("the paper", "the
  // reference code", "our choice"); nullptr = not said. `qkv params` and
  // docs/models.md show it for model options.
  const char* source = nullptr;
  // A one-letter command-line name besides the long one ("n" for launch's
  // -n,--procs); nullptr = none.
  const char* letter = nullptr;
  Field range(double lo, double hi) const {
    Field f = *this;
    f.min = lo;
    f.max = hi;
    return f;
  }
  Field at_least(double lo) const { return range(lo, max); }
  Field above(double lo) const {
    Field f = range(lo, max);
    f.min_open = true;
    return f;
  }
  Field below(double hi) const {
    Field f = range(min, hi);
    f.max_open = true;
    return f;
  }
  Field was(const char* old_name) const {
    Field f = *this;
    f.old_option = old_name;
    return f;
  }
  Field needed() const {
    Field f = *this;
    f.required = true;
    return f;
  }
  Field existing_file() const {
    Field f = *this;
    f.existing = true;
    return f;
  }
  Field one_of(const char* words) const {
    Field f = *this;
    f.choices = words;
    return f;
  }
  Field from(const char* where) const {
    Field f = *this;
    f.source = where;
    return f;
  }
  Field short_name(const char* one_letter) const {
    Field f = *this;
    f.letter = one_letter;
    return f;
  }
  bool has_range() const {
    return min != -std::numeric_limits<double>::max() || max != std::numeric_limits<double>::max();
  }
};

// "" when `value` is acceptable for `f`, else what is wrong ("must be at
// least 1", "must be finite"), for a message that names the key or flag.
// A bound as people write it: "1", "0.5", "1e-12", "9.2e+18".
inline std::string range_number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

// A field's range as --help and messages write it: "[0, 1)", ">= 1",
// "> 0"; "" without one.
inline std::string field_range_text(const Field& f) {
  const auto number = range_number_text;
  const bool has_min = f.min != -std::numeric_limits<double>::max();
  const bool has_max = f.max != std::numeric_limits<double>::max();
  if (has_min && has_max)
    return (f.min_open ? "(" : "[") + number(f.min) + ", " + number(f.max) + (f.max_open ? ")" : "]");
  if (has_min) return (f.min_open ? "> " : ">= ") + number(f.min);
  if (has_max) return (f.max_open ? "< " : "<= ") + number(f.max);
  return "";
}

inline std::string field_range_problem(const Field& f, double value) {
  if (!std::isfinite(value)) return "must be a finite number";
  const bool has_min = f.min != -std::numeric_limits<double>::max();
  const bool has_max = f.max != std::numeric_limits<double>::max();
  const bool low = has_min && (value < f.min || (f.min_open && value == f.min));
  const bool high = has_max && (value > f.max || (f.max_open && value == f.max));
  if (!low && !high) return "";
  if (has_min && has_max) return "must be in " + field_range_text(f);
  const std::string bound = range_number_text(has_min ? f.min : f.max);
  if (has_min) return (f.min_open ? "must be greater than " : "must be at least ") + bound;
  return (f.max_open ? "must be less than " : "must be at most ") + bound;
}

// The words of f.choices ({} without them).
inline std::vector<std::string> field_choices(const Field& f) {
  std::vector<std::string> words;
  if (!f.choices) return words;
  std::string word;
  for (const char* c = f.choices;; ++c) {
    if (*c == '|' || *c == '\0') {
      words.push_back(word);
      word.clear();
      if (*c == '\0') break;
    } else {
      word += *c;
    }
  }
  return words;
}

// "" when `value` is one of f's choices (or f has none), else what is wrong.
inline std::string field_choice_problem(const Field& f, const std::string& value) {
  const auto words = field_choices(f);
  if (words.empty()) return "";
  for (const auto& w : words)
    if (w == value) return "";
  return "must be one of " + join(words) + ", got '" + value + "'";
}

// The command-line name of a field ("points-per-shape", "arms"), without the
// dashes the CLI puts before it; messages of the library name the key.
inline std::string option_name(const Field& f) {
  if (f.option) return f.option;
  std::string name = f.key;
  for (auto& c : name)
    if (c == '_') c = '-';
  return name;
}

// The visitor check_field_ranges applies to each field: ConfigError naming
// the field's key for a number outside its range or a text not among its
// words. For a field list visited by a function of its own name
// (visit_cv_fields), pass it to that function; for one setting that is not
// in a list (compare's shapes), call it on its field and value.
inline auto field_range_checker() {
  return [](const Field& f, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const std::string problem = field_range_problem(f, static_cast<double>(value));
      if (!problem.empty())
        throw ConfigError(f.key, problem + ", got " + range_number_text(static_cast<double>(value)));
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (const std::string problem = field_choice_problem(f, value); !problem.empty())
        throw ConfigError(f.key, problem);
    }
  };
}

// ConfigError naming the key of the first field of `settings` outside its
// range or words, so a struct filled in code (Python, tests) is held to the
// ranges the CLI checks on the typed text. validate() calls it, then checks
// what involves several fields.
template <typename S>
void check_field_ranges(const S& settings) {
  S copy = settings;
  visit_fields(copy, field_range_checker());
}

template <typename S>
nlohmann::json fields_to_json(const S& settings) {
  S copy = settings;
  nlohmann::json j = nlohmann::json::object();
  visit_fields(copy, [&](const Field& f, auto& value) { j[f.key] = value; });
  return j;
}

// Field `f`'s `member` read from JSON value `j`, checked as the field says;
// DataError naming `what` and the key.
template <typename T>
void read_field(const Field& f, T& member, const nlohmann::json& j, const std::string& what) {
  if (const std::string why = json_value_as(j, member); !why.empty())
    throw DataError(what + ": '" + f.key + "' = " + shortened(j.dump()) + ": " + why);
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    const std::string problem = field_range_problem(f, static_cast<double>(member));
    if (!problem.empty()) throw DataError(what + ": '" + f.key + "' " + problem + " (" + j.dump() + ")");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (const std::string problem = field_choice_problem(f, member); !problem.empty())
      throw DataError(what + ": '" + f.key + "' " + problem);
  }
}

// Keys missing from `j` keep their defaults (older runs); a key of the wrong
// type is a DataError naming `what` and the key.
template <typename S>
S fields_from_json(const nlohmann::json& j, const std::string& what, S settings = S{}) {
  if (!j.is_object()) throw DataError(what + ": expected a JSON object");
  visit_fields(settings, [&](const Field& f, auto& value) {
    if (j.contains(f.key)) read_field(f, value, j.at(f.key), what);
  });
  return settings;
}

// A visitor that sets the field `key` from its text as a user would type it
// (numbers, true/false, a word, a comma-separated list), checked by
// read_field, and counts it in `found`: for any field list,
// visit_fields(s, field_text_setter(...)) or a list of another name.
inline auto field_text_setter(const std::string& key, const std::string& text, const std::string& what, bool& found) {
  return [&key, &text, &what, &found](const Field& f, auto& member) {
    using T = std::decay_t<decltype(member)>;
    if (key != f.key) return;
    nlohmann::json value;
    if constexpr (std::is_same_v<T, std::string>) {
      value = text;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      value = nlohmann::json::array();
      size_t start = 0;
      for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
        value.push_back(text.substr(start, comma - start));
      value.push_back(text.substr(start));
    } else {
      value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (value.is_discarded()) throw DataError(what + ": '" + key + "' = '" + text + "' is not a value");
    }
    read_field(f, member, value, what);
    found = true;
  };
}

// set the field `key` of `settings` from its text (field_text_setter); false
// when `settings` has no field `key`.
template <typename S>
bool set_field_from_text(S& settings, const std::string& key, const std::string& text, const std::string& what) {
  bool found = false;
  visit_fields(settings, field_text_setter(key, text, what, found));
  return found;
}

}  // namespace qkv
