#include "qkv/core/output_policy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/core/runtime.h"
#include "qkv/core/text.h"

namespace qkv {
namespace {

namespace fs = std::filesystem;

// A line that is not a JSON string: the generator finished writing (synthetic data).
const char* const kCompleteLine = "{\"complete\":true}";

struct Root {
  fs::path dir;  // absolute, normalised
  std::set<std::string> files;
};

std::mutex& claims_mutex() {
  static std::mutex m;
  return m;
}
std::vector<Root>& claimed_roots() {
  static std::vector<Root> roots;
  return roots;
}

fs::path normal(const std::string& path) {
  fs::path p = fs::absolute(fs::path(path)).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

// A ledger entry may only name a file below its folder.
bool safe_relative(const fs::path& rel) {
  if (rel.empty() || rel.is_absolute()) return false;
  for (const auto& part : rel)
    if (part == "..") return false;
  return true;
}

// The first of `root`/rel's components (the folders below `root`, then the
// file) that is a symbolic link; empty if none is. qkv writes no links, so
// one inside an output was put there by someone else, and writing or
// deleting through it would touch files outside the output.
fs::path link_below(const fs::path& root, const fs::path& rel) {
  fs::path at = root;
  for (const auto& part : rel) {
    at /= part;
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(at, ec))) return at;
  }
  return {};
}

std::string through_link(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return printable_path(link.string()) + ": is a symbolic link" +
         (ec ? std::string() : " (to " + printable_path(target.string()) + ")") +
         "; qkv neither writes nor deletes through links inside its outputs (nothing was changed through it); "
         "remove the link or choose another output";
}

struct Ledger {
  nlohmann::json header;  // null if there is no ledger
  std::vector<std::string> files;
  bool complete = false;
};

// The ledger of `dir`; header null if there is none. A ledger qkv cannot
// trust is an error naming it, raised before anything is written: a link, an
// unreadable file, one without the header line qkv always writes first
// (empty or damaged), or one listing a name outside the folder (edited).
Ledger read_ledger(const fs::path& dir) {
  Ledger ledger;
  const fs::path file = dir / kLedgerName;
  std::error_code ec;
  const auto status = fs::symlink_status(file, ec);
  if (!fs::exists(status)) return ledger;
  if (fs::is_symlink(status)) throw UsageError(through_link(file));
  if (!fs::is_regular_file(status))
    throw UsageError(printable_path(file.string()) + ": qkv's ledger is not a file; qkv will not use this folder");
  std::ifstream in(file);
  if (!in)
    throw DataError(printable_path(file.string()) + ": cannot read qkv's ledger: " + std::strerror(errno) +
                    " (nothing was changed)");
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;  // a line torn by a crash lists nothing: its file counts as not qkv's
    }
    if (first) {
      ledger.header = j.is_object() ? j : nlohmann::json::object();
      first = false;
    } else if (j.is_string()) {
      if (!safe_relative(fs::path(j.get<std::string>())))
        throw UsageError(printable_path(file.string()) + ": lists " + printable_path(j.get<std::string>()) +
                         ", which is not a file below its folder (the ledger was edited); qkv will not use it "
                         "(nothing was changed)");
      ledger.files.push_back(j.get<std::string>());
    } else if (j.is_object() && j.value("complete", false)) {
      ledger.complete = true;
    }
  }
  if (first)
    throw UsageError(printable_path(file.string()) +
                     ": qkv's ledger is empty or damaged (no header line); qkv will not write into or delete from "
                     "this folder (nothing was changed); move the folder away or choose another");
  return ledger;
}

void append_line(const fs::path& file, const std::string& line) {
  // O_NOFOLLOW: a ledger replaced by a link would append to the link's target.
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw DataError(file.string() + ": cannot write qkv's ledger: " + std::strerror(errno));
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int saved = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw DataError(file.string() + ": cannot write qkv's ledger: " + std::strerror(n < 0 ? saved : ENOSPC));
}

void write_new_ledger(const fs::path& dir, const OutputMarker& marker) {
  const nlohmann::json header = {{"qkv_version", qkv_version()},
                                 {"command", marker.command},
                                 {"settings", marker.settings.is_null() ? nlohmann::json::object() : marker.settings}};
  write_file_atomic((dir / kLedgerName).string(), json_text(header, -1) + "\n");
}

// Registers `dir` (replacing an earlier registration of the same folder).
void register_root(const fs::path& dir, const std::vector<std::string>& files) {
  std::lock_guard<std::mutex> lock(claims_mutex());
  auto& roots = claimed_roots();
  roots.erase(std::remove_if(roots.begin(), roots.end(), [&](const Root& r) { return r.dir == dir; }), roots.end());
  roots.push_back({dir, std::set<std::string>(files.begin(), files.end())});
}

// A UsageError naming the first link on the way to a file the ledger lists
// (read_ledger has refused names outside the folder).
void refuse_links(const fs::path& dir, const Ledger& ledger) {
  for (const auto& name : ledger.files)
    if (const fs::path link = link_below(dir, fs::path(name)); !link.empty()) throw UsageError(through_link(link));
}

// Removes the files a ledger lists, then the folders that leaves empty
// (never `dir` itself) and the ledger. A listed name reached through a link
// is refused before anything is removed.
void remove_ledger_files(const fs::path& dir, const Ledger& ledger) {
  refuse_links(dir, ledger);
  std::set<fs::path, std::greater<>> parents;  // deepest first
  for (const auto& name : ledger.files) {
    const fs::path rel(name);
    const fs::path p = dir / rel;
    std::error_code ec;
    const auto status = fs::symlink_status(p, ec);
    if (ec || !(fs::is_regular_file(status) || fs::is_symlink(status))) continue;
    if (!fs::remove(p, ec) && ec) throw DataError(p.string() + ": cannot remove (written by qkv): " + ec.message());
    for (fs::path up = rel.parent_path(); !up.empty(); up = up.parent_path()) parents.insert(dir / up);
  }
  for (const auto& folder : parents) {
    std::error_code ec;
    if (fs::is_directory(folder, ec) && fs::is_empty(folder, ec)) fs::remove(folder, ec);
  }
  std::error_code ec;
  fs::remove(dir / kLedgerName, ec);
}

// Empty, or holding only a ledger that lists nothing (a command that failed
// after claiming the folder and before writing): nothing there to lose.
bool is_empty_folder(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec) return true;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename() != kLedgerName) return false;
  return !ec && read_ledger(dir).files.empty();
}

std::string quoted(const std::string& option, const std::string& path) {
  return option.empty() ? printable_path(path) : option + " " + printable_path(path);
}

// The ledger and the run records are JSON, which holds UTF-8 only: a folder
// whose name is not would be recorded under another name.
void require_utf8_name(const std::string& path, const std::string& option) {
  if (!is_valid_utf8(path))
    throw UsageError(quoted(option, path) + ": the name is not valid UTF-8 (qkv records its outputs in JSON); "
                     "choose a UTF-8 name");
}

}  // namespace

void check_output_dir(const std::string& dir, const std::string& option, bool overwrite) {
  if (dir.empty()) throw UsageError(option + ": must name a folder");
  require_utf8_name(dir, option);
  const fs::path root = normal(dir);
  std::error_code ec;
  const auto status = fs::status(root, ec);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) throw UsageError(quoted(option, dir) + ": exists and is not a folder");
  if (is_empty_folder(root)) return;
  if (!overwrite)
    throw UsageError(quoted(option, dir) +
                     ": exists and is not empty; add --overwrite to replace what qkv wrote there (other files are "
                     "kept), or choose another folder");
  if (read_ledger(root).header.is_null())
    throw UsageError(quoted(option, dir) + ": not empty and holds nothing qkv wrote (no " + kLedgerName +
                     "); qkv will not write into it, even with --overwrite; choose another folder");
}

ClaimResult claim_output_dir(const std::string& dir, const std::string& option, bool overwrite,
                             const OutputMarker& marker) {
  check_output_dir(dir, option, overwrite);
  const fs::path root = normal(dir);
  ClaimResult result = ClaimResult::Fresh;
  std::error_code ec;
  if (!fs::exists(root, ec)) {
    make_directories(root.string());
  } else if (!is_empty_folder(root)) {
    remove_ledger_files(root, read_ledger(root));
    result = ClaimResult::Replaced;
  }
  write_new_ledger(root, marker);
  register_root(root, {});
  return result;
}

void check_output_file(const std::string& path, const std::string& option, bool overwrite) {
  if (path.empty()) throw UsageError(option + ": must name a file");
  require_utf8_name(path, option);
  const fs::path file = normal(path);
  const fs::path dir = file.parent_path();
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (fs::is_directory(status)) throw UsageError(quoted(option, path) + ": is a folder; name a file");
  if (fs::exists(status)) {
    if (!overwrite)
      throw UsageError(quoted(option, path) + ": exists; add --overwrite to replace it, or choose another name");
    const auto listed = read_ledger(dir).files;
    if (std::find(listed.begin(), listed.end(), file.filename().string()) == listed.end())
      throw UsageError(quoted(option, path) +
                       ": exists and was not written by qkv; qkv will not replace it, even with --overwrite");
  }
  const auto dir_status = fs::status(dir, ec);
  if (fs::exists(dir_status) && !fs::is_directory(dir_status))
    throw UsageError(quoted(option, path) + ": " + dir.string() + " is not a folder");
}

void claim_output_file(const std::string& path, const std::string& option, bool overwrite,
                       const OutputMarker& marker) {
  check_output_file(path, option, overwrite);
  const fs::path dir = normal(path).parent_path();
  make_directories(dir.string());
  const Ledger ledger = read_ledger(dir);
  if (ledger.header.is_null()) write_new_ledger(dir, marker);
  register_root(dir, ledger.files);
}

void adopt_output_dir(const std::string& dir, const std::string& option) {
  const fs::path root = normal(dir);
  const Ledger ledger = read_ledger(root);
  if (ledger.header.is_null())
    throw UsageError(quoted(option, dir) + ": has no " + kLedgerName +
                     " (not a folder this version of qkv wrote); qkv will not write into it");
  refuse_links(root, ledger);
  register_root(root, ledger.files);
}

void refuse_links_in_output(const std::string& dir) {
  const fs::path root = normal(dir);
  refuse_links(root, read_ledger(root));
}

bool claim_synthetic_dir(const std::string& dir, const std::string& option, bool overwrite,
                         const OutputMarker& marker, bool check_only) {
  if (dir.empty()) throw UsageError(option + ": must name a folder");
  require_utf8_name(dir, option);
  const fs::path root = normal(dir);
  std::error_code ec;
  const auto status = fs::status(root, ec);
  if (!fs::exists(status) || (fs::is_directory(status) && is_empty_folder(root))) {
    if (!check_only) claim_output_dir(dir, option, false, marker);
    return true;
  }
  if (!fs::is_directory(status)) throw UsageError(quoted(option, dir) + ": exists and is not a folder");
  const Ledger ledger = read_ledger(root);
  if (ledger.header.is_null())
    throw UsageError(quoted(option, dir) + ": not empty and not written by qkv; choose another folder");
  // Anything qkv did not write would be read as data (a notes file, an extra
  // class folder): refuse rather than load or delete it.
  std::set<fs::path> listed, listed_dirs;
  for (const auto& name : ledger.files) {
    listed.insert(fs::path(name));
    for (fs::path up = fs::path(name).parent_path(); !up.empty(); up = up.parent_path()) listed_dirs.insert(up);
  }
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(root);
    if (rel == kLedgerName) continue;
    const bool known = it->is_directory() ? listed_dirs.count(rel) > 0 : listed.count(rel) > 0;
    if (!known)
      throw UsageError(quoted(option, dir) + ": holds " + rel.string() +
                       ", which qkv did not write; move it away or choose another folder (nothing was deleted)");
  }
  const auto settings = marker.settings.is_null() ? nlohmann::json::object() : marker.settings;
  const bool same = ledger.header.value("command", "") == marker.command &&
                    ledger.header.value("settings", nlohmann::json::object()) == settings;
  if (same && ledger.complete) {
    if (!check_only) register_root(root, ledger.files);
    return false;
  }
  if (!same && !overwrite)
    throw UsageError(quoted(option, dir) +
                     ": holds synthetic data made with other settings; add --overwrite to regenerate it, or choose "
                     "another folder");
  // Same settings but unfinished (interrupted), or --overwrite: regenerate.
  if (!check_only) claim_output_dir(dir, option, true, marker);
  return true;
}

void mark_output_complete(const std::string& dir) { append_line(normal(dir) / kLedgerName, kCompleteLine); }

nlohmann::json read_output_marker(const std::string& dir) { return read_ledger(normal(dir)).header; }

std::vector<std::string> ledger_files(const std::string& dir) { return read_ledger(normal(dir)).files; }

void check_and_record_write(const std::string& path) {
  std::lock_guard<std::mutex> lock(claims_mutex());
  auto& roots = claimed_roots();
  if (roots.empty()) return;
  const fs::path file = normal(path);
  if (file.filename() == kLedgerName) return;
  Root* best = nullptr;
  for (auto& r : roots) {
    const auto rel = file.lexically_relative(r.dir);
    if (rel.empty() || !safe_relative(rel)) continue;
    if (!best || r.dir.string().size() > best->dir.string().size()) best = &r;
  }
  if (!best) return;
  const fs::path relative = file.lexically_relative(best->dir);
  if (const fs::path link = link_below(best->dir, relative); !link.empty()) throw DataError(through_link(link));
  const std::string rel = relative.generic_string();
  if (best->files.count(rel)) return;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(file, ec)))
    throw DataError(file.string() + ": exists and was not written by qkv; not replacing it");
  append_line(best->dir / kLedgerName, json_text(nlohmann::json(rel), -1));
  best->files.insert(rel);
}

void reset_output_claims() {
  std::lock_guard<std::mutex> lock(claims_mutex());
  claimed_roots().clear();
}

}  // namespace qkv
