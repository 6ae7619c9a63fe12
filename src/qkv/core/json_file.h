#pragma once
// A JSON document read from a file (summary.json, config.json, ground truth):
// DataError naming the file when it is missing or not valid JSON.
#include <nlohmann/json.hpp>
#include <string>

namespace qkv {

nlohmann::json read_json_file(const std::string& path);

}  // namespace qkv
