#include "qkv/core/json_file.h"

#include "qkv/core/errors.h"
#include "qkv/core/text.h"

namespace qkv {

nlohmann::json read_json_file(const std::string& path) {
  const std::string bytes = read_text_file(path);
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": not valid JSON (" + e.what() + ")");
  }
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qkv
