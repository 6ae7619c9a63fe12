#include "qkv/medical/cohort.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <deque>
#include <filesystem>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/parse_errors.h"
#include "qkv/core/text.h"

namespace qkv::medical {
namespace {

namespace fs = std::filesystem;

using parse::fail;
using parse::fail_at;
using parse::show;

bool ends_with_tsv(const std::string& path) { return ends_with(lower(path), ".tsv"); }

// A subject or CpG id: recorded in JSON (config.json, summaries) and named in
// messages, so UTF-8 text without NUL bytes. Another encoding (a Latin-1 or
// UTF-16 export) is refused here, not recorded as U+FFFD, which made two
// subjects one.
void require_text_id(const std::string& path, int64_t line, const char* what, std::string_view id) {
  if (id.find('\0') != std::string_view::npos || !is_valid_utf8(id))
    fail_at(path, line,
            std::string(what) + " " + show(id) +
                " is not UTF-8 text (another encoding, or UTF-16?); save the file as UTF-8");
}

// What a CpG list file (one id a line, '#' comments, read_cpg_list) can
// hold; a table's header is held to it too, so that every selection can be
// written.
bool fits_a_cpg_list(std::string_view id) {
  return !id.empty() && id.front() != '#' && std::none_of(id.begin(), id.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ';';
  });
}

char detect_delimiter(const char* begin, const char* end) {
  for (const char* p = begin; p < end && *p != '\n' && *p != '\r'; ++p)
    if (*p == '\t') return '\t';
  return ',';
}

// The longest record (a line, or several with quoted line breaks) and the
// most fields one may have. The largest methylation arrays (EPIC v2, ~940k
// CpG sites) need ~10 MB and ~1M fields per line; past these, the fields of
// one line (16 bytes each) and the header's ids would take many times the
// file, so such a file is refused at that line instead.
constexpr int64_t kMaxRecordBytes = int64_t{32} << 20;
constexpr size_t kMaxFields = size_t{1} << 22;

// RFC 4180 records over an in-memory buffer. Fields are views into the buffer
// (or into scratch storage for quoted fields holding doubled quotes), valid
// until the next call, so a 60 MB table is split without a string per cell.
class Records {
 public:
  Records(const char* begin, const char* end, char delimiter, const std::string& path)
      : p_(begin), end_(end), delim_(delimiter), path_(path) {}

  // The next record that is not blank (no characters, or only empty fields);
  // false at the end of the buffer.
  bool next(std::vector<std::string_view>& fields) {
    while (p_ < end_) {
      read_record(fields);
      for (auto f : fields)
        if (!f.empty()) return true;
    }
    return false;
  }

  int64_t line() const { return line_; }  // where the last record began

 private:
  bool is_blank(char c) const { return c == ' ' || (c == '\t' && delim_ != '\t'); }

  void read_record(std::vector<std::string_view>& fields) {
    fields.clear();
    scratch_.clear();
    line_ = next_line_;
    const char* record_start = p_;
    for (;;) {
      while (p_ < end_ && is_blank(*p_)) ++p_;
      if (p_ < end_ && *p_ == '"') {
        fields.push_back(read_quoted());
        while (p_ < end_ && is_blank(*p_)) ++p_;
        if (p_ < end_ && *p_ != delim_ && *p_ != '\n' && *p_ != '\r')
          fail_at(path_, next_line_, "unexpected " + show(std::string_view(p_, 1)) + " after a closing quote");
      } else {
        const char* start = p_;
        while (p_ < end_ && *p_ != delim_ && *p_ != '\n' && *p_ != '\r') ++p_;
        const char* stop = p_;
        while (stop > start && is_blank(stop[-1])) --stop;
        fields.emplace_back(start, static_cast<size_t>(stop - start));
      }
      if (p_ - record_start > kMaxRecordBytes)
        fail_at(path_, line_, "longer than " + std::to_string(kMaxRecordBytes >> 20) + " MiB (not a table row?)");
      if (fields.size() > kMaxFields) fail_at(path_, line_, "more than " + std::to_string(kMaxFields) + " fields");
      if (p_ >= end_) return;
      if (*p_ == delim_) {
        ++p_;
        continue;
      }
      // Old Mac spreadsheets end lines with a lone '\r'.
      if (*p_ == '\r' && p_ + 1 < end_ && p_[1] == '\n') ++p_;
      ++p_;
      ++next_line_;
      return;
    }
  }

  std::string_view read_quoted() {
    const int64_t opened_on = next_line_;
    const char* start = ++p_;
    bool doubled = false;
    for (;;) {
      if (p_ >= end_) fail_at(path_, opened_on, "a quoted field is never closed");
      const char c = *p_;
      if (c == '"') {
        if (p_ + 1 < end_ && p_[1] == '"') {
          doubled = true;
          p_ += 2;
          continue;
        }
        break;
      }
      if (c == '\n' || (c == '\r' && (p_ + 1 >= end_ || p_[1] != '\n'))) ++next_line_;
      ++p_;
    }
    std::string_view inside(start, static_cast<size_t>(p_ - start));
    ++p_;  // the closing quote
    if (!doubled) return inside;
    std::string& text = scratch_.emplace_back();
    for (size_t i = 0; i < inside.size(); ++i) {
      text += inside[i];
      if (inside[i] == '"') ++i;
    }
    return text;
  }

  const char* p_;
  const char* end_;
  char delim_;
  const std::string& path_;
  int64_t next_line_ = 1;
  int64_t line_ = 0;
  std::deque<std::string> scratch_;  // a deque keeps earlier strings in place as it grows
};

// A field as the writers put it: quoted when it holds the delimiter, a quote,
// a line break, or leading/trailing blanks the readers would trim.
void append_field(std::string& out, std::string_view field, char delimiter) {
  const bool needs_quotes = field.find_first_of(std::string{delimiter, '"', '\n', '\r'}) != std::string_view::npos ||
                            (!field.empty() && (field.front() == ' ' || field.back() == ' ' || field.front() == '\t' ||
                                                field.back() == '\t'));
  if (!needs_quotes) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string label_text(std::string_view text) {
  return "label " + show(text) + " is not 0/1, control/hc/healthy (0) or pd/parkinson/patient (1)";
}

// -1 for anything that is not a label.
int64_t parse_label(std::string_view text) {
  const std::string word = lower(text);
  if (word == "0" || word == "control" || word == "hc" || word == "healthy") return 0;
  if (word == "1" || word == "pd" || word == "parkinson" || word == "patient") return 1;
  return -1;
}

bool is_missing(std::string_view cell) {
  switch (cell.size()) {
    case 0: return true;
    case 2: return lower(cell) == "na";
    case 3: return lower(cell) == "nan";
    case 4: return lower(cell) == "null";
    default: return false;
  }
}

// A beta-value, NaN for a missing cell; false if the cell is neither.
bool parse_beta(std::string_view cell, float& value) {
  if (is_missing(cell)) {
    value = std::numeric_limits<float>::quiet_NaN();
    return true;
  }
  // Read as a float directly: through a double, a written float could round
  // twice and come back one bit off.
  const char* first = cell.data();
  const char* last = first + cell.size();
  if (*first == '+') ++first;  // from_chars rejects a leading '+', other writers do not
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc::result_out_of_range) return ec == std::errc() && ptr == last;
  // 1e-400 is 0; 1e400 stays outside [0, 1] (clamped, since DBL_MAX fits no float).
  double read = 0;
  if (!parse_decimal(cell, read)) return false;
  value = static_cast<float>(std::clamp(read, -2.0, 2.0));
  return true;
}

std::string file_name_of(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  return name.empty() ? path : name;
}

std::string id_list(const std::vector<std::string>& ids, size_t at_most) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < at_most; ++i) out += (i ? ", " : "") + ids[i];
  if (ids.size() > at_most) out += ", ...";
  return out;
}

std::string plural(size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

// ---------------------------------------------------------------- manifest

namespace {

Manifest read_manifest_unguarded(const std::string& path, bool labels_optional) {
  regular_file_size(path);
  const std::string bytes = read_text_file(path);
  const char* begin = without_byte_order_mark(bytes).data();
  const char* end = bytes.data() + bytes.size();
  Records records(begin, end, detect_delimiter(begin, end), path);
  std::vector<std::string_view> fields;
  if (!records.next(fields)) fail(path, "empty file; expected a header row naming subject_id, label and spect");

  const int64_t header_line = records.line();
  std::vector<std::string> names(fields.begin(), fields.end());
  int64_t id_col = -1, label_col = -1, spect_col = -1;
  std::unordered_map<std::string, int64_t> seen_names;
  for (size_t c = 0; c < names.size(); ++c) {
    const std::string key = lower(names[c]);
    if (key.empty()) fail_at(path, header_line, "column " + std::to_string(c + 1) + " has no name");
    const auto [it, fresh] = seen_names.emplace(key, static_cast<int64_t>(c));
    if (!fresh)
      fail_at(path, header_line,
              "column " + show(names[c]) + " appears twice (columns " + std::to_string(it->second + 1) + " and " +
                  std::to_string(c + 1) + ")");
    if (key == "subject_id") id_col = static_cast<int64_t>(c);
    if (key == "label") label_col = static_cast<int64_t>(c);
    if (key == "spect") spect_col = static_cast<int64_t>(c);
  }
  for (const auto& [col, name] : {std::pair{id_col, "subject_id"}, {label_col, "label"}, {spect_col, "spect"}})
    if (col < 0 && !(labels_optional && std::string_view(name) == "label")) {
      std::string header;
      for (const auto& n : names) header += (header.empty() ? "" : ", ") + n;
      fail_at(path, header_line, std::string("no '") + name + "' column (the header has: " + header + ")");
    }

  const fs::path folder = fs::path(path).parent_path();
  Manifest manifest;
  manifest.path = path;
  std::unordered_map<std::string, int64_t> line_of_id;
  while (records.next(fields)) {
    const int64_t line = records.line();
    if (fields.size() != names.size())
      fail_at(path, line,
              "has " + std::to_string(fields.size()) + " fields, the header has " + std::to_string(names.size()));
    CohortSubject subject;
    subject.id = std::string(fields[id_col]);
    if (subject.id.empty()) fail_at(path, line, "empty subject_id");
    require_text_id(path, line, "subject_id", subject.id);
    const auto [it, fresh] = line_of_id.emplace(subject.id, line);
    if (!fresh)
      fail_at(path, line, "subject " + show(subject.id) + " is already listed on line " + std::to_string(it->second));
    if (label_col < 0 || (labels_optional && is_missing(fields[label_col]))) {
      subject.label = kUnlabelled;
    } else {
      subject.label = parse_label(fields[label_col]);
      if (subject.label < 0) fail_at(path, line, label_text(fields[label_col]));
    }
    const std::string spect(fields[spect_col]);
    if (spect.empty()) fail_at(path, line, "empty spect path for subject " + show(subject.id));
    const fs::path spect_path(spect);
    subject.spect_path =
        spect_path.is_absolute() || folder.empty() ? spect : (folder / spect_path).lexically_normal().string();
    for (size_t c = 0; c < names.size(); ++c) {
      if (static_cast<int64_t>(c) == id_col || static_cast<int64_t>(c) == label_col ||
          static_cast<int64_t>(c) == spect_col || fields[c].empty())
        continue;
      subject.covariates.emplace(names[c], std::string(fields[c]));
    }
    manifest.subjects.push_back(std::move(subject));
  }
  if (manifest.subjects.empty()) fail(path, "no subjects: the file holds only a header row");
  return manifest;
}

}  // namespace

Manifest read_manifest(const std::string& path, bool labels_optional) {
  return guard_memory(path, "a manifest", [&] { return read_manifest_unguarded(path, labels_optional); });
}

void write_manifest(const std::string& path, const Manifest& manifest) {
  const char delim = ends_with_tsv(path) ? '\t' : ',';
  std::vector<std::string> covariates;
  {
    std::map<std::string, bool> names;
    for (const auto& s : manifest.subjects)
      for (const auto& [name, value] : s.covariates) names[name] = true;
    std::unordered_set<std::string> lowered;
    for (const auto& [name, unused] : names) {
      const std::string key = lower(name);
      if (key.empty() || key == "subject_id" || key == "label" || key == "spect")
        fail(path, "cannot write a covariate named " + show(name));
      if (!lowered.insert(key).second)
        fail(path, "cannot write covariates " + show(name) + " and another differing only in case");
      covariates.push_back(name);
    }
  }
  std::string out = std::string("subject_id") + delim + "label" + delim + "spect";
  for (const auto& name : covariates) {
    out += delim;
    append_field(out, name, delim);
  }
  out += '\n';
  std::unordered_set<std::string> ids;
  for (const auto& s : manifest.subjects) {
    if (s.id.empty()) fail(path, "cannot write a subject with an empty id");
    if (!ids.insert(s.id).second) fail(path, "cannot write subject " + show(s.id) + " twice");
    if (s.label != 0 && s.label != 1)
      fail(path,
           "cannot write subject " + show(s.id) + " with label " + std::to_string(s.label) + "; labels are 0 or 1");
    if (s.spect_path.empty()) fail(path, "cannot write subject " + show(s.id) + " without a spect path");
    append_field(out, s.id, delim);
    out += delim;
    out += s.label == 1 ? '1' : '0';
    out += delim;
    append_field(out, s.spect_path, delim);
    for (const auto& name : covariates) {
      out += delim;
      const auto it = s.covariates.find(name);
      if (it != s.covariates.end()) append_field(out, it->second, delim);
    }
    out += '\n';
  }
  write_file_atomic(path, out);
}

// ---------------------------------------------------------------- methylation

int64_t MethylationTable::missing_count() const {
  return std::count_if(values.begin(), values.end(), [](float v) { return std::isnan(v); });
}

namespace {

MethylationTable read_methylation_table_unguarded(const std::string& path) {
  regular_file_size(path);
  const std::string bytes = read_text_file(path);
  const char* begin = without_byte_order_mark(bytes).data();
  const char* end = bytes.data() + bytes.size();
  const char delim = detect_delimiter(begin, end);
  Records records(begin, end, delim, path);
  std::vector<std::string_view> fields;
  if (!records.next(fields))
    fail(path, "empty file; expected a header row: the subject id column, then one column per CpG id");

  const int64_t header_line = records.line();
  MethylationTable table;
  table.path = path;
  if (fields.size() < 2) fail_at(path, header_line, "the header names no CpG column after the subject id column");
  table.cpg_ids.assign(fields.begin() + 1, fields.end());
  {
    std::unordered_map<std::string_view, size_t> column_of;
    for (size_t c = 0; c < table.cpg_ids.size(); ++c) {
      const std::string& id = table.cpg_ids[c];
      if (id.empty()) fail_at(path, header_line, "column " + std::to_string(c + 2) + " has no CpG id");
      require_text_id(path, header_line, "CpG id", id);
      if (!fits_a_cpg_list(id))
        fail_at(path, header_line,
                "CpG id " + show(id) + " (column " + std::to_string(c + 2) +
                    ") holds a blank, ',' or ';', or starts with '#': a CpG list could not name it");
      const auto [it, fresh] = column_of.emplace(id, c);
      if (!fresh)
        fail_at(path, header_line,
                "CpG id " + show(id) + " appears twice (columns " + std::to_string(it->second + 2) + " and " +
                    std::to_string(c + 2) + ")");
    }
  }

  const size_t cols = table.cpg_ids.size();
  const size_t expected_fields = cols + 1;
  // One allocation up front: lines bound the rows from above, and every
  // value takes at least its delimiter's byte.
  {
    const int64_t lines = std::count(begin, end, '\n') + 1;
    int64_t cells = 0;
    if (!checked_mul(lines, static_cast<int64_t>(cols), cells) || cells > end - begin) cells = end - begin;
    table.values.reserve(static_cast<size_t>(cells));
  }
  std::unordered_map<std::string, int64_t> line_of_id;
  fields.reserve(expected_fields);
  while (records.next(fields)) {
    const int64_t line = records.line();
    if (fields.size() != expected_fields) {
      std::string hint;
      if (table.subject_ids.empty() && fields.size() == expected_fields + 1)
        hint = " (a header without the subject id column, as R's write.table writes, needs one added)";
      fail_at(
          path, line,
          "has " + std::to_string(fields.size()) + " fields, the header has " + std::to_string(expected_fields) + hint);
    }
    std::string id(fields[0]);
    if (id.empty()) fail_at(path, line, "empty subject id");
    require_text_id(path, line, "subject id", id);
    const auto [it, fresh] = line_of_id.emplace(id, line);
    if (!fresh) fail_at(path, line, "subject " + show(id) + " is already listed on line " + std::to_string(it->second));
    for (size_t c = 0; c < cols; ++c) {
      const std::string_view cell = fields[c + 1];
      float v;
      const bool parsed = parse_beta(cell, v);
      if (!parsed || v < 0.0f || v > 1.0f)
        throw DataError(path + ": line " + std::to_string(line) + ", column " + std::to_string(c + 2) + " (" +
                        table.cpg_ids[c] + ", subject " + id + "): " +
                        (parsed ? "beta-value " + show(cell) + " is outside [0, 1]"
                                : show(cell) + " is not a number or a missing value (empty, NA, NaN, null)"));
      table.values.push_back(v);
    }
    table.subject_ids.push_back(std::move(id));
  }
  if (table.subject_ids.empty()) fail(path, "no subjects: the file holds only a header row");
  table.values.shrink_to_fit();
  return table;
}

}  // namespace

MethylationTable read_methylation_table(const std::string& path) {
  return guard_memory(path, "a methylation table", [&] { return read_methylation_table_unguarded(path); });
}

void write_methylation_table(const std::string& path, const MethylationTable& table) {
  const size_t rows = table.subject_ids.size(), cols = table.cpg_ids.size();
  if (table.values.size() != rows * cols)
    throw UsageError(path + ": methylation table holds " + std::to_string(table.values.size()) + " values for " +
                     std::to_string(rows) + " subjects x " + std::to_string(cols) + " CpG sites");
  if (cols == 0) fail(path, "cannot write a methylation table without CpG columns");
  if (rows == 0) fail(path, "cannot write a methylation table without subjects");
  const bool tsv = ends_with_tsv(path);
  const char delim = tsv ? '\t' : ',';
  std::string out;
  out.reserve(rows * cols * 11 + cols * 12 + 64);
  out += "subject_id";
  std::unordered_set<std::string_view> seen;
  for (const auto& id : table.cpg_ids) {
    if (id.empty()) fail(path, "cannot write an empty CpG id");
    if (!seen.insert(id).second) fail(path, "cannot write CpG id " + show(id) + " twice");
    out += delim;
    append_field(out, id, delim);
  }
  out += '\n';
  seen.clear();
  char number[32];
  for (size_t r = 0; r < rows; ++r) {
    const std::string& id = table.subject_ids[r];
    if (id.empty()) fail(path, "cannot write an empty subject id");
    if (!seen.insert(id).second) fail(path, "cannot write subject " + show(id) + " twice");
    append_field(out, id, delim);
    const float* row = table.values.data() + r * cols;
    for (size_t c = 0; c < cols; ++c) {
      out += delim;
      const float v = row[c];
      if (std::isnan(v)) {
        if (tsv) out += "NA";
        continue;
      }
      if (!(v >= 0.0f && v <= 1.0f))
        fail(path, "cannot write subject " + show(id) + ", " + table.cpg_ids[c] + ": beta-value " + std::to_string(v) +
                       " is outside [0, 1]");
      // Shortest digits that read back as the same float: round trips are bit-exact.
      const auto result = std::to_chars(number, number + sizeof number, v);
      out.append(number, result.ptr);
    }
    out += '\n';
  }
  write_file_atomic(path, out);
}

MethylationTable select_cpgs(const MethylationTable& table, const std::vector<std::string>& cpg_ids) {
  const std::string name = table.path.empty() ? "methylation table" : table.path;
  std::unordered_map<std::string_view, size_t> column_of;
  column_of.reserve(table.cpg_ids.size());
  for (size_t c = 0; c < table.cpg_ids.size(); ++c) column_of.emplace(table.cpg_ids[c], c);
  std::vector<size_t> picked;
  picked.reserve(cpg_ids.size());
  std::vector<std::string> missing;
  std::unordered_set<std::string_view> requested;
  for (const auto& id : cpg_ids) {
    if (!requested.insert(id).second) fail(name, "CpG id " + show(id) + " is requested twice");
    const auto it = column_of.find(id);
    if (it == column_of.end())
      missing.push_back(id);
    else
      picked.push_back(it->second);
  }
  if (!missing.empty())
    fail(name, "has no column for " + std::to_string(missing.size()) + " of the " + std::to_string(cpg_ids.size()) +
                   " requested CpG ids: " + id_list(missing, 5));

  MethylationTable out;
  out.path = table.path;
  out.subject_ids = table.subject_ids;
  out.cpg_ids = cpg_ids;
  const size_t cols = table.cpg_ids.size();
  out.values.resize(table.subject_ids.size() * picked.size());
  for (size_t r = 0; r < table.subject_ids.size(); ++r) {
    const float* from = table.values.data() + r * cols;
    float* to = out.values.data() + r * picked.size();
    for (size_t c = 0; c < picked.size(); ++c) to[c] = from[picked[c]];
  }
  return out;
}

// ---------------------------------------------------------------- CpG lists

std::vector<std::string> read_cpg_list(const std::string& path) {
  regular_file_size(path);
  const std::string bytes = read_text_file(path);
  const std::string_view text = without_byte_order_mark(bytes);
  std::vector<std::string> ids;
  std::unordered_map<std::string, int64_t> line_of_id;
  int64_t line = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    ++line;
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view entry = text.substr(pos, eol - pos);
    pos = eol + 1;
    entry = trim(entry);
    if (entry.empty() || entry.front() == '#') continue;
    if (entry.find_first_of(" \t,;\r") != std::string_view::npos)
      fail_at(path, line, show(entry) + " is not one CpG id (one id per line, nothing else)");
    const auto [it, fresh] = line_of_id.emplace(std::string(entry), line);
    if (!fresh)
      fail_at(path, line, "CpG id " + show(entry) + " is already listed on line " + std::to_string(it->second));
    ids.emplace_back(entry);
  }
  if (ids.empty()) fail(path, "no CpG ids (only blank or # lines)");
  return ids;
}

void write_cpg_list(const std::string& path, const std::vector<std::string>& ids, const std::string& comment_header) {
  std::string out;
  if (!comment_header.empty()) {
    size_t pos = 0;
    while (pos <= comment_header.size()) {
      size_t eol = comment_header.find('\n', pos);
      if (eol == std::string::npos) eol = comment_header.size();
      out += "# ";
      out.append(comment_header, pos, eol - pos);
      out += '\n';
      pos = eol + 1;
    }
  }
  std::unordered_set<std::string_view> seen;
  for (const auto& id : ids) {
    if (!fits_a_cpg_list(id)) fail(path, "cannot write " + show(id) + " as a CpG id");
    if (!seen.insert(id).second) fail(path, "cannot write CpG id " + show(id) + " twice");
    out += id;
    out += '\n';
  }
  write_file_atomic(path, out);
}

// ---------------------------------------------------------------- matching

std::string CohortMatch::describe() const {
  std::string out = plural(manifest_rows.size(), "subject", "subjects") + " in both";
  if (!only_in_manifest.empty())
    out +=
        "; " + std::to_string(only_in_manifest.size()) + " only in the manifest (" + id_list(only_in_manifest, 5) + ")";
  if (!only_in_methylation.empty())
    out += "; " + std::to_string(only_in_methylation.size()) + " only in " +
           (methylation_name.empty() ? "the methylation table" : methylation_name) + " (" +
           id_list(only_in_methylation, 5) + ")";
  return out;
}

CohortMatch match_cohort(const Manifest& manifest, const MethylationTable& table) {
  CohortMatch match;
  match.methylation_name = table.path.empty() ? "" : file_name_of(table.path);
  std::unordered_map<std::string_view, int64_t> row_of;
  row_of.reserve(table.subject_ids.size());
  for (size_t r = 0; r < table.subject_ids.size(); ++r) row_of.emplace(table.subject_ids[r], static_cast<int64_t>(r));
  std::vector<bool> used(table.subject_ids.size(), false);
  for (size_t i = 0; i < manifest.subjects.size(); ++i) {
    const auto it = row_of.find(manifest.subjects[i].id);
    if (it == row_of.end()) {
      match.only_in_manifest.push_back(manifest.subjects[i].id);
      continue;
    }
    match.manifest_rows.push_back(static_cast<int64_t>(i));
    match.methylation_rows.push_back(it->second);
    used[static_cast<size_t>(it->second)] = true;
  }
  for (size_t r = 0; r < table.subject_ids.size(); ++r)
    if (!used[r]) match.only_in_methylation.push_back(table.subject_ids[r]);

  if (match.manifest_rows.empty()) {
    const std::string manifest_name = manifest.path.empty() ? "manifest" : manifest.path;
    const std::string table_name = table.path.empty() ? "methylation table" : table.path;
    std::vector<std::string> manifest_ids;
    for (size_t i = 0; i < manifest.subjects.size() && i < 4; ++i) manifest_ids.push_back(manifest.subjects[i].id);
    std::string message = manifest_name + " and " + table_name + ": no subject is in both (manifest ids " +
                          id_list(manifest_ids, 3) + "; methylation ids " + id_list(table.subject_ids, 3) + ")";
    // A table straight from GEO has CpG sites as rows; one that was not
    // transposed parses fine and only shows up here.
    const auto looks_like_cpg = [](const std::string& id) {
      return id.size() > 2 && id[0] == 'c' && id[1] == 'g' && std::isdigit(static_cast<unsigned char>(id[2]));
    };
    if (!table.subject_ids.empty() && std::all_of(table.subject_ids.begin(), table.subject_ids.end(), looks_like_cpg))
      message += "; the table's rows look like CpG ids: it needs one row per subject (transpose it)";
    throw DataError(message);
  }
  return match;
}

// ---------------------------------------------------------------- imputation

std::vector<float> column_means(const MethylationTable& table, const std::vector<int64_t>& rows) {
  const size_t cols = table.cpg_ids.size();
  if (table.values.size() != table.subject_ids.size() * cols)
    throw UsageError("column_means: methylation table holds " + std::to_string(table.values.size()) + " values for " +
                     std::to_string(table.subject_ids.size()) + " x " + std::to_string(cols));
  // Double sums: hundreds of floats near 0.5 would otherwise lose low digits.
  std::vector<double> sum(cols, 0.0);
  std::vector<int64_t> count(cols, 0);
  for (const int64_t r : rows) {
    if (r < 0 || r >= table.rows())
      throw UsageError("column_means: row " + std::to_string(r) + " is outside the table's " +
                       std::to_string(table.rows()) + " rows");
    const float* row = table.values.data() + static_cast<size_t>(r) * cols;
    for (size_t c = 0; c < cols; ++c)
      if (!std::isnan(row[c])) {
        sum[c] += row[c];
        ++count[c];
      }
  }
  std::vector<float> means(cols);
  for (size_t c = 0; c < cols; ++c)
    means[c] = count[c] > 0 ? static_cast<float>(sum[c] / static_cast<double>(count[c])) : 0.5f;
  return means;
}

void impute_missing(MethylationTable& table, const std::vector<float>& means) {
  const size_t cols = table.cpg_ids.size();
  if (means.size() != cols)
    throw UsageError("impute_missing: " + std::to_string(means.size()) + " means for " + std::to_string(cols) +
                     " CpG columns");
  for (size_t i = 0; i < table.values.size(); ++i)
    if (std::isnan(table.values[i])) table.values[i] = means[i % cols];
}

}  // namespace qkv::medical
