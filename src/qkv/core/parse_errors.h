#pragma once
// The one-line DataErrors every text reader throws: the file, the line where
// there is one, and the offending text quoted and shortened so that a binary
// file or a huge cell cannot flood the message.
#include <cctype>
#include <string>
#include <string_view>

#include "qkv/core/errors.h"

namespace qkv::parse {

[[noreturn]] inline void fail(const std::string& path, const std::string& what) { throw DataError(path + ": " + what); }

[[noreturn]] inline void fail_at(const std::string& path, int64_t line, const std::string& what) {
  throw DataError(path + ": line " + std::to_string(line) + ": " + what);
}

inline std::string show(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  std::string out;
  for (char c : text.substr(0, kMaxShown)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (text.size() > kMaxShown) out += "...";
  return "'" + out + "'";
}

}  // namespace qkv::parse
