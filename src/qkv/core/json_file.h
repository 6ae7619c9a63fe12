#pragma once
// A JSON document read from a file (summary.json, config.json, ground truth):
// DataError naming the file when it is missing or not valid JSON.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace qkv {

// Refused when nested deeper than kMaxJsonDepth (see json_nesting_depth).
nlohmann::json read_json_file(const std::string& path);

// How deep arrays and objects nest in JSON text (strings skipped). Parsing is
// iterative, but printing and comparing a document recurse once per level: a
// value nested 60,000 deep overflows the stack, so qkv refuses any document
// deeper than kMaxJsonDepth before it parses it. Its own documents nest
// fewer than 10 levels.
int64_t json_nesting_depth(std::string_view text);
inline constexpr int64_t kMaxJsonDepth = 64;

// `j` as text (2-space indent, or compact with indent -1). Strings that are
// not UTF-8 (a file name in another encoding) have their bad bytes replaced by
// U+FFFD instead of throwing: a record must never fail to be written.
std::string json_text(const nlohmann::json& j, int indent = 2);

}  // namespace qkv
