#pragma once
// One description of each settings struct, from which its JSON (config.json),
// its reading back and its command-line options are all derived: a free
// function `visit_fields(S& s, V&& visit)` next to the struct calls
//   visit(Field{"key", "help"}, s.member)
// once per field, in the order config.json lists them. Nothing else spells a
// field's name.
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/core/errors.h"

namespace qkv {

struct Field {
  const char* key;
  const char* help;
  // The command-line option: nullptr = "--" + key with '_' as '-'; "" = not
  // an option (recorded in config.json only, e.g. a value the data decide).
  const char* flag = nullptr;
};

// "train.batch_size" style messages name the key; the CLI maps keys to flags.
inline std::string option_flag(const Field& f) {
  if (f.flag) return f.flag;
  std::string flag = std::string("--") + f.key;
  for (auto& c : flag)
    if (c == '_') c = '-';
  return flag;
}

template <typename S>
nlohmann::json fields_to_json(const S& settings) {
  S copy = settings;
  nlohmann::json j = nlohmann::json::object();
  visit_fields(copy, [&](const Field& f, auto& value) { j[f.key] = value; });
  return j;
}

// Keys missing from `j` keep their defaults (older runs); a key of the wrong
// type is a DataError naming `what` and the key.
template <typename S>
S fields_from_json(const nlohmann::json& j, const std::string& what, S settings = S{}) {
  if (!j.is_object()) throw DataError(what + ": expected a JSON object");
  visit_fields(settings, [&](const Field& f, auto& value) {
    if (!j.contains(f.key)) return;
    try {
      value = j.at(f.key).template get<std::decay_t<decltype(value)>>();
    } catch (const nlohmann::json::exception&) {
      throw DataError(what + ": '" + f.key + "' has the wrong type (" + j.at(f.key).dump() + ")");
    }
  });
  return settings;
}

}  // namespace qkv
