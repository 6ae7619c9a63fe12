#pragma once
// Writing CSV that the readers (and spreadsheets, Python's csv, pandas) read
// back as written: ids come from the user's files and may hold anything the
// cohort and shape readers accept, quoted fields included.
#include <string>

namespace qkv {

// A CSV field as RFC 4180 writes one: quoted when it holds a comma, a quote
// or a line break, its quotes doubled.
inline std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace qkv
