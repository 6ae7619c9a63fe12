#pragma once
// A JSON document read from a file (summary.json, config.json, ground truth):
// DataError naming the file when it is missing or not valid JSON.
#include <nlohmann/json.hpp>
#include <string>

namespace qkv {

nlohmann::json read_json_file(const std::string& path);

// `j` as text (2-space indent, or compact with indent -1). Strings that are
// not UTF-8 (a file name in another encoding) have their bad bytes replaced by
// U+FFFD instead of throwing: a record must never fail to be written.
std::string json_text(const nlohmann::json& j, int indent = 2);

}  // namespace qkv
