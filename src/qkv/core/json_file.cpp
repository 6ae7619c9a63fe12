#include "qkv/core/json_file.h"

#include <algorithm>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"

namespace qkv {

int64_t json_nesting_depth(std::string_view text) {
  int64_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string bytes = read_text_file(path);
  if (const int64_t depth = json_nesting_depth(bytes); depth > kMaxJsonDepth)
    throw DataError(path + ": JSON nested " + std::to_string(depth) + " levels deep; qkv reads at most " +
                    std::to_string(kMaxJsonDepth));
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 1: ...": the library's tag is noise.
    std::string why = e.what();
    if (why.rfind("[json.exception.", 0) == 0 && why.find("] ") != std::string::npos) why.erase(0, why.find("] ") + 2);
    throw DataError(path + ": not valid JSON (" + why + ")");
  }
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace qkv
