#include "qkv/core/text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"

namespace qkv {

bool parse_decimal(std::string_view token, double& value) {
  if (!token.empty() && token[0] == '+') token.remove_prefix(1);  // from_chars rejects it, other writers do not
  if (token.empty()) return false;
  const char* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves the value as it was. Small when the exponent is
    // negative or, without one, when no digit before the point is.
    const size_t e = token.find_first_of("eE");
    const std::string_view integral = token.substr(0, std::min(token.find('.'), e));
    const bool small = e != std::string_view::npos ? e + 1 < token.size() && token[e + 1] == '-'
                                                   : integral.find_first_of("123456789") == std::string_view::npos;
    value = small ? 0.0 : std::numeric_limits<double>::max() * (token[0] == '-' ? -1 : 1);
  } else if (ec != std::errc()) {
    return false;
  }
  return ptr == end;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string_view trim(std::string_view text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return text.substr(b, e - b);
}

std::string_view without_byte_order_mark(std::string_view text) {
  return starts_with(text, "\xEF\xBB\xBF") ? text.substr(3) : text;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

std::string join_alternatives(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

std::string read_text_file(const std::string& path) {
  std::string bytes = read_regular_file(path);
  // A compressed file would be parsed as text and refused for bytes that
  // mean nothing to the user (a CpG id of binary noise): named as what it
  // is, by signatures no text begins with (bzip2's "BZh" is text, so its
  // block-size digit and first block's or end's magic are required too).
  const std::string_view xz(
      "\xfd"
      "7zXZ\0",
      6);
  const char* kind = starts_with(bytes, "\x1f\x8b")           ? "gzip"
                     : starts_with(bytes, "PK\x03\x04")       ? "zip"
                     : starts_with(bytes, xz)                 ? "xz"
                     : starts_with(bytes, "\x28\xb5\x2f\xfd") ? "zstd"
                                                              : nullptr;
  if (!kind && bytes.size() >= 10 && starts_with(bytes, "BZh") && bytes[3] >= '1' && bytes[3] <= '9' &&
      (bytes.compare(4, 6, "1AY&SY") == 0 || bytes.compare(4, 6, "\x17\x72\x45\x38\x50\x90") == 0))
    kind = "bzip2";
  if (kind) {
    const std::string k = kind;
    const std::string undo = k == "gzip" ? "gunzip" : k == "bzip2" ? "bunzip2" : "un" + k;  // unzip, unxz, unzstd
    throw DataError(path + ": a " + kind + "-compressed file; qkv reads it as text: " + undo + " it first");
  }
  return bytes;
}

namespace {
// The length of the well-formed UTF-8 sequence at text[i], or 0.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF)
    n = 2;
  else if (b0 == 0xE0)
    n = 3, lo = 0xA0;
  else if (b0 >= 0xE1 && b0 <= 0xEC)
    n = 3;
  else if (b0 == 0xED)
    n = 3, hi = 0x9F;
  else if (b0 >= 0xEE && b0 <= 0xEF)
    n = 3;
  else if (b0 == 0xF0)
    n = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3)
    n = 4;
  else if (b0 == 0xF4)
    n = 4, hi = 0x8F;
  else
    return 0;
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}
}  // namespace

size_t first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string printable_path(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      static const char* hex = "0123456789abcdef";
      const auto b = static_cast<unsigned char>(text[i++]);
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
    }
  }
  return out;
}

std::string counted(int64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

std::string binary_size(int64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return counted(bytes, "byte");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", value, units[unit]);
  return buf;
}

std::string first_line(std::string_view text) { return std::string(text.substr(0, text.find('\n'))); }

std::string out_of_memory_line(std::string_view message, const std::string& where, const std::string& advice) {
  const std::string_view line = message.substr(0, message.find('\n'));
  const std::string at_where = where.empty() ? "" : " " + where;
  const std::string and_advice = advice.empty() ? "" : "; " + advice;
  if (const auto at = line.find("you tried to allocate "); at != std::string_view::npos)
    return "out of memory" + at_where + " (LibTorch could not allocate " + std::string(line.substr(at + 22)) +
           and_advice + ")";
  if (const auto at = line.find("CUDA out of memory"); at != std::string_view::npos) {
    std::string what = "GPU memory";
    if (const auto tried = line.find("Tried to allocate ", at); tried != std::string_view::npos) {
      const auto amount = line.substr(tried + 18);  // "2.00 GiB. GPU 0 has ..."
      what = std::string(amount.substr(0, amount.find(". ")));
      if (const auto gpu = amount.find(". GPU "); gpu != std::string_view::npos) {
        const auto rest = amount.substr(gpu + 6);  // "0 has ..."
        what += " on cuda:" + std::string(rest.substr(0, rest.find(' ')));
      }
    }
    return "out of GPU memory" + at_where + " (LibTorch could not allocate " + what + and_advice + ")";
  }
  return "";
}

std::string shortened(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

namespace {
// Edits (insert, delete, replace, swap two neighbours) from a to b.
size_t typo_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t distance = typo_distance(word, c);
    if (distance < best_distance) best = c, best_distance = distance;
  }
  return best;
}

std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  const size_t columns = header.size();
  std::vector<size_t> width(columns);
  std::vector<bool> numeric(columns, !rows.empty());
  auto is_number = [](const std::string& cell) {
    if (cell == "-") return true;
    char* end = nullptr;
    std::strtod(cell.c_str(), &end);
    return !cell.empty() && end == cell.c_str() + cell.size();
  };
  for (size_t c = 0; c < columns; ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (size_t c = 0; c < columns && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
      if (!is_number(row[c])) numeric[c] = false;
    }
  std::string text;
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      line += numeric[c] ? pad + cell : cell + (c + 1 < columns ? pad : "");
    }
    text += line + "\n";
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
  return text;
}

}  // namespace qkv
