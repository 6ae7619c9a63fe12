#pragma once
// Text helpers the readers share: case folding, suffixes, trimming, and a
// whole file read into a string with errors naming the file.
#include <string>
#include <string_view>

namespace qkv {

// ASCII lower case, byte by byte (std::tolower in the "C" locale): for file
// extensions, keywords and region names.
std::string lower(std::string_view text);

bool ends_with(std::string_view text, std::string_view suffix);

// text without leading and trailing whitespace (std::isspace).
std::string_view trim(std::string_view text);

// The whole file (a pipe too). DataError "PATH: no such file", "PATH: is a
// folder, not a file", "PATH: cannot open: REASON" or "PATH: read failed".
std::string read_text_file(const std::string& path);

}  // namespace qkv
