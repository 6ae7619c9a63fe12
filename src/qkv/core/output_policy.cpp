#include "qkv/core/output_policy.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "qkv/core/atomic_file.h"
#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"
#include "qkv/core/version.h"

namespace qkv {

// What qkv wrote under one name: its length and CRC-32. Outside the unnamed
// namespace because ClaimedRoot, declared in the header, holds them.
struct LedgerFingerprint {
  uint64_t bytes = 0;
  uint32_t crc = 0;
  bool operator==(const LedgerFingerprint& o) const { return bytes == o.bytes && crc == o.crc; }
};
using LedgerFingerprints = std::map<std::string, std::vector<LedgerFingerprint>>;

namespace {

namespace fs = std::filesystem;

// A line that is not a JSON string: the generator finished writing (synthetic data).
const char* const kCompleteLine = "{\"complete\":true}";

std::mutex& claims_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

// A claimed root as this process knows it, shared by the claims that hold it.
struct ClaimedRoot {
  std::filesystem::path dir;     // absolute, normalised
  std::set<std::string> listed;  // in the ledger
  LedgerFingerprints written;    // what the ledger records of each listed file
  std::set<std::string> known;   // written by this process, or checked against the ledger
  int lock_fd = -1;              // the folder, opened for its flock (closing it drops the lock)
  // Set by claim_output_dir with --overwrite of a folder holding qkv's files:
  // removes them and writes the fresh ledger, run at the first change below
  // the root (replace_earlier_output_below), so that a command refused
  // before it writes (data that cannot be read) leaves that output as it was.
  std::function<void()> replace_earlier;
  bool exclusive = false;  // the flock is exclusive (a folder claimed whole)
  // The command writing now, and the one whose ledger heads the folder: a
  // file written by another than the folder's maker is recorded with "by".
  std::string writer, maker;

  ClaimedRoot() = default;
  ClaimedRoot(const ClaimedRoot&) = delete;
  ClaimedRoot& operator=(const ClaimedRoot&) = delete;
  ~ClaimedRoot() {
    if (lock_fd >= 0) ::close(lock_fd);
  }

  // The root `dir` as this process holds it, found among the held roots or
  // new, with its folder's flock taken (exclusive, or shared) before anything
  // there is removed or written; UsageError naming `option` and the holder's
  // process id when another process holds it. Not yet a claim: hold() makes one.
  static std::shared_ptr<ClaimedRoot> lock(const std::filesystem::path& dir, const std::string& option, bool exclusive);
  // A claim of `root`, whose ledger lists `files` with the records `written`.
  static OutputClaim hold(const std::shared_ptr<ClaimedRoot>& root, const std::vector<std::string>& files,
                          const LedgerFingerprints& written, bool replaced, const std::string& writer,
                          const std::string& maker);
};

namespace {

// The roots some claim holds: a claim's end leaves an expired entry, which
// the next look drops. The caller holds claims_mutex.
std::vector<std::weak_ptr<ClaimedRoot>>& root_list_locked() {
  static std::vector<std::weak_ptr<ClaimedRoot>> roots;
  roots.erase(std::remove_if(roots.begin(), roots.end(), [](const auto& r) { return r.expired(); }), roots.end());
  return roots;
}

// The root `dir` if a claim of this process holds it, else null. The caller
// holds claims_mutex.
std::shared_ptr<ClaimedRoot> held_root_locked(const fs::path& dir) {
  for (const auto& r : root_list_locked())
    if (auto held = r.lock(); held && held->dir == dir) return held;
  return nullptr;
}

fs::path normal(const std::string& path) {
  fs::path p = fs::absolute(fs::path(path)).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

// Whether `inner` is `outer` or lies below it, by their names alone (both
// normal, or both resolved).
bool at_or_below(const fs::path& inner, const fs::path& outer) {
  const fs::path rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != "..";
}

// A ledger entry may only name a file below its folder.
bool safe_relative(const fs::path& rel) {
  if (rel.empty() || rel.is_absolute()) return false;
  for (const auto& part : rel)
    if (part == "..") return false;
  return true;
}

std::string through_link(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return printable_path(link.string()) + ": is a symbolic link" +
         (ec ? std::string() : " (to " + printable_path(target.string()) + ")") +
         "; qkv neither writes nor deletes through links inside its outputs (nothing was changed through it); "
         "remove the link or choose another output";
}

// What lies at root/rel, walked one component at a time without following a
// link. qkv writes plain files and folders only, on the output's own file
// system, each with one name; anything else on the way (a symbolic link, a
// mount point, a device, a second hard link) was put there by someone else,
// and writing or deleting through it would reach files outside the output.
struct Found {
  enum Kind { Absent, File, Refused } kind = Absent;
  std::string why;  // Refused: one line naming the component
  struct stat st {};
};

// `folder`: rel names a folder qkv writes files into, not a file.
Found inspect(const fs::path& root, const fs::path& rel, bool folder = false) {
  Found found;
  struct stat root_st {};
  if (::stat(root.c_str(), &root_st) != 0) return found;
  const auto refuse = [&](const fs::path& at, const std::string& what) {
    found.kind = Found::Refused;
    found.why = printable_path(at.string()) + ": " + what +
                "; qkv writes and deletes only plain files it wrote inside its outputs (nothing was changed)";
    return found;
  };
  fs::path at = root;
  size_t left = static_cast<size_t>(std::distance(rel.begin(), rel.end()));
  for (const auto& part : rel) {
    at /= part;
    --left;
    if (::lstat(at.c_str(), &found.st) != 0) return found;  // Absent: nothing below it either
    if (S_ISLNK(found.st.st_mode)) {
      found.kind = Found::Refused;
      found.why = through_link(at);
      return found;
    }
    if (found.st.st_dev != root_st.st_dev) return refuse(at, "is a mount point (another file system)");
    if (left > 0 || folder) {
      if (!S_ISDIR(found.st.st_mode)) return refuse(at, "is not a folder");
      continue;
    }
    if (S_ISDIR(found.st.st_mode)) return refuse(at, "is a folder where qkv wrote a file");
    if (!S_ISREG(found.st.st_mode)) return refuse(at, "is a device, pipe or socket, not a file qkv wrote");
    if (found.st.st_nlink != 1)
      return refuse(at, "has " + std::to_string(found.st.st_nlink) + " hard links (qkv's files have one)");
    found.kind = Found::File;
  }
  return found;
}

// Whether the regular file `path` of `size` bytes holds what one of
// `written` records; read only when a length matches.
bool holds_one_of(const fs::path& path, uint64_t size, const std::vector<LedgerFingerprint>& written) {
  if (std::none_of(written.begin(), written.end(), [&](const LedgerFingerprint& f) { return f.bytes == size; }))
    return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  std::vector<char> buffer(1 << 20);
  uint32_t crc = 0;
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      if (n < 0) return false;
      break;
    }
    crc = crc32(buffer.data(), static_cast<size_t>(n), crc);
    total += static_cast<uint64_t>(n);
  }
  const LedgerFingerprint now{total, crc};
  return std::find(written.begin(), written.end(), now) != written.end();
}

std::string not_as_written(const fs::path& path, bool recorded) {
  return printable_path(path.string()) +
         (recorded ? ": changed since qkv wrote it" : ": listed in qkv's ledger without a record of what qkv wrote") +
         "; qkv will not replace or delete it (nothing was changed); move it away or choose another output";
}

// Refused, or a file that is not what the ledger records of `rel`: the one
// line saying so; empty for a file qkv wrote or nothing at all.
std::string unowned(const fs::path& root, const std::string& rel, const LedgerFingerprints& written) {
  const Found found = inspect(root, fs::path(rel));
  if (found.kind == Found::Refused) return found.why;
  if (found.kind == Found::Absent) return "";
  const auto it = written.find(rel);
  const bool recorded = it != written.end() && !it->second.empty();
  if (recorded && holds_one_of(root / rel, static_cast<uint64_t>(found.st.st_size), it->second)) return "";
  return not_as_written(root / rel, recorded);
}

// The ledger's lines: the header object first; then, per write, an object
// {"file": relative path, "bytes": length, "crc32": 8 hex digits} appended
// before the file is renamed into place (so a crash leaves either the old
// file, recorded earlier, or the new one); {"complete": true} when a
// synthetic-data generator finished. A plain string names a file without a
// record of it (older ledgers): such a file is never replaced or deleted.
struct Ledger {
  nlohmann::json header;           // null if there is no ledger
  std::vector<std::string> files;  // each listed name once, in first-listed order
  LedgerFingerprints written;
  std::map<std::string, std::string> written_by;  // a file another command than the maker wrote: that command
  bool complete = false;
  int64_t unreadable_line = 0;  // the first line that is not JSON (torn by a crash, or edited); 0 if none

  std::string maker() const { return header.is_object() ? header.value("command", "") : std::string(); }
  // The command that last wrote `name`: its entry's "by", else the maker;
  // "" (unknown) for a name the ledger does not list (the user's file beside
  // qkv's) and in a ledger from before writers were recorded, whose entries
  // never say "by".
  std::string writer_of(const std::string& name) const {
    const auto it = written_by.find(name);
    if (it != written_by.end()) return it->second;
    if (std::find(files.begin(), files.end(), name) == files.end()) return "";
    return header.is_object() && header.value("writers", false) ? maker() : std::string();
  }
};

// A command as people type it: "vnt train" -> "qkv vnt train" (some
// markers say "qkv ..." already).
std::string typed_command(const std::string& command) {
  if (command.empty()) return "qkv ?";
  return command.rfind("qkv ", 0) == 0 ? command : "qkv " + command;
}

std::string entry_line(const std::string& rel, const LedgerFingerprint& f, const std::string& by) {
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", f.crc);
  nlohmann::json entry{{"file", rel}, {"bytes", f.bytes}, {"crc32", crc}};
  if (!by.empty()) entry["by"] = by;
  return json_text(entry, -1);
}

// The fingerprint an entry line records; false if it records none.
bool fingerprint_of(const nlohmann::json& j, LedgerFingerprint& f) {
  const auto bytes = j.find("bytes");
  const auto crc = j.find("crc32");
  if (bytes == j.end() || !bytes->is_number_unsigned() || crc == j.end() || !crc->is_string()) return false;
  const std::string hex = crc->get<std::string>();
  if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  f.bytes = bytes->get<uint64_t>();
  f.crc = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
  return true;
}

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
  std::set<std::string> listed;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      // A line torn by a crash lists nothing: its file counts as not qkv's.
      if (ledger.unreadable_line == 0) ledger.unreadable_line = number;
      continue;
    }
    if (first) {
      // Every ledger qkv wrote begins so: a file of the user's own by this
      // name would be appended to and taken for a record of qkv's files.
      if (!j.is_object() || !j.contains("qkv_version") || !j.contains("command") || !j.at("command").is_string())
        throw UsageError(printable_path(file.string()) +
                         ": is not a ledger qkv wrote (its first line is not qkv's header); qkv will not use this "
                         "folder (nothing was changed)");
      ledger.header = j;
      first = false;
    } else if (j.is_string() || (j.is_object() && j.contains("file") && j.at("file").is_string())) {
      const std::string name = j.is_string() ? j.get<std::string>() : j.at("file").get<std::string>();
      if (!safe_relative(fs::path(name)))
        throw UsageError(printable_path(file.string()) + ": lists " + printable_path(name) +
                         ", which is not a file below its folder (the ledger was edited); qkv will not use it "
                         "(nothing was changed)");
      if (!listed.count(name)) {
        listed.insert(name);
        ledger.files.push_back(name);
      }
      LedgerFingerprint f;
      if (j.is_object() && fingerprint_of(j, f)) ledger.written[name].push_back(f);
      if (j.is_object() && j.contains("by") && j.at("by").is_string())
        ledger.written_by[name] = j.at("by").get<std::string>();
      else
        ledger.written_by.erase(name);  // written again by the folder's maker
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

// A refusal about the output a setting names (`key`, e.g. "out"; the CLI
// says --out); without a key, about the path alone.
[[noreturn]] void refuse(const std::string& key, const std::string& problem) {
  if (key.empty()) throw UsageError(name_keys(problem, [](const std::string& k) { return k; }));
  throw ConfigError(key, problem);
}

void append_line(const fs::path& file, const std::string& line) {
  // O_NOFOLLOW: a ledger replaced by a link would append to the link's target.
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw DataError(file.string() + ": cannot write qkv's ledger: " + std::strerror(errno));
  const std::string text = line + "\n";
  struct stat before {};
  const bool sized = ::fstat(fd, &before) == 0;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int saved = errno;
  // A short write (a full disk) would leave a torn line, which makes the
  // ledger untrusted for good and glues the next entry onto it: cut it off.
  if (n != static_cast<ssize_t>(text.size()) && n > 0 && sized) (void)!::ftruncate(fd, before.st_size);
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw DataError(file.string() + ": cannot write qkv's ledger: " + std::strerror(n < 0 ? saved : ENOSPC));
}

void write_new_ledger(const fs::path& dir, const OutputMarker& marker) {
  const nlohmann::json header = {{"qkv_version", qkv_version()},
                                 {"command", marker.command},
                                 {"settings", marker.settings.is_null() ? nlohmann::json::object() : marker.settings},
                                 {"writers", true}};  // entries another command writes say "by"
  write_file_atomic((dir / kLedgerName).string(), json_text(header, -1) + "\n");
}

}  // namespace

std::string absolute_normal_path(const std::string& path) { return normal(path).string(); }

bool path_at_or_below(const std::string& path, const std::string& folder) {
  return at_or_below(normal(path), normal(folder));
}

namespace {

// The process holding the flock on the folder `dir` and its command line
// (shortened), from /proc/locks: "process 1234: qkv vnt train --out runs/x";
// "" where it cannot be told (no /proc, another PID namespace). Read, not
// recorded in the folder: a refused command changes nothing there.
std::string lock_holder(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "";
  std::istringstream locks(read_proc_file("/proc/locks"));
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF"
    std::istringstream in(line);
    std::string id, kind, advisory, mode, where;
    long long pid = 0;
    if (!(in >> id >> kind >> advisory >> mode >> pid >> where) || kind != "FLOCK" || pid <= 0) continue;
    unsigned major = 0, minor = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &major, &minor, &inode) != 3) continue;
    if (inode != st.st_ino || major != ::major(st.st_dev) || minor != ::minor(st.st_dev)) continue;
    std::string args = read_proc_file("/proc/" + std::to_string(pid) + "/cmdline");  // "": it has just ended
    for (auto& c : args)
      if (c == '\0') c = ' ';
    while (!args.empty() && args.back() == ' ') args.pop_back();
    const size_t slash = args.substr(0, args.find(' ')).rfind('/');
    if (slash != std::string::npos) args = args.substr(slash + 1);  // the program's name, not its path
    if (args.size() > 80) args = args.substr(0, 77) + "...";
    return "process " + std::to_string(pid) + (args.empty() ? "" : ": " + printable_path(args));
  }
  return "";
}

// The refusal of a folder another process holds, naming it.
[[noreturn]] void refuse_held(const fs::path& dir, const std::string& option) {
  const std::string who = lock_holder(dir);
  refuse(option, printable_path(dir.string()) + ": another qkv command is writing there" +
                     (who.empty() ? std::string() : " (" + who + ")") +
                     "; wait for it to end or choose another folder (nothing was changed)");
}

}  // namespace

std::shared_ptr<ClaimedRoot> ClaimedRoot::lock(const std::filesystem::path& dir, const std::string& option,
                                               bool exclusive) {
  std::lock_guard<std::mutex> guard(claims_mutex());
  std::shared_ptr<ClaimedRoot> root = held_root_locked(dir);
  if (root && (root->exclusive || !exclusive)) return root;  // this process holds it already
  int fd = root ? root->lock_fd : ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw DataError(printable_path(dir.string()) + ": cannot open the folder: " + std::strerror(errno));
  if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    const int err = errno;
    if (!root)
      ::close(fd);
    else
      ::flock(fd, LOCK_SH | LOCK_NB);  // a failed upgrade may have dropped this process's shared lock
    if (err != EWOULDBLOCK)
      throw DataError(printable_path(dir.string()) + ": cannot lock the folder: " + std::strerror(err));
    refuse_held(dir, option);
  }
  if (!root) {
    root = std::make_shared<ClaimedRoot>();
    root->dir = dir;
    root->lock_fd = fd;
    root_list_locked().push_back(root);
  }
  root->exclusive = exclusive;
  return root;
}

namespace {

// For the checks a command makes before it claims: a UsageError naming the
// holder when another process holds `dir` (exclusively, or at all for an
// `exclusive` claim to come), so that a folder another command is writing
// is refused as such, not by what its half-written files look like. The
// lock is tried and dropped at once; the claim takes it for good (and refuses
// then, should another command have taken it in between).
void refuse_if_held_elsewhere(const fs::path& dir, const std::string& option, bool exclusive) {
  {
    std::lock_guard<std::mutex> guard(claims_mutex());
    if (held_root_locked(dir)) return;  // this process's own
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // missing or unreadable: the checks that follow say so
  const bool free = ::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0;
  ::close(fd);  // drops the lock if it was taken
  if (!free) refuse_held(dir, option);
}

}  // namespace

OutputClaim ClaimedRoot::hold(const std::shared_ptr<ClaimedRoot>& root, const std::vector<std::string>& files,
                              const LedgerFingerprints& written, bool replaced, const std::string& writer,
                              const std::string& maker) {
  std::lock_guard<std::mutex> lock(claims_mutex());
  root->writer = writer;
  root->maker = maker;
  // A folder claimed again starts from its ledger as it is now (--overwrite emptied it).
  root->listed = std::set<std::string>(files.begin(), files.end());
  root->written = written;
  root->known.clear();
  return OutputClaim(root, replaced);
}

namespace {

// A UsageError for the first file the ledger lists that qkv may not touch:
// one reached through a link or mount point, one that is not a plain file
// with one name, or one that no longer holds what qkv wrote there.
void require_owned(const fs::path& dir, const Ledger& ledger) {
  for (const auto& name : ledger.files)
    if (const std::string why = unowned(dir, name, ledger.written); !why.empty()) throw UsageError(why);
}

// The files a ledger lists that are there (relative to dir), after checking
// that each is what qkv wrote and that its folder lets it be removed.
std::vector<fs::path> removable_ledger_files(const fs::path& dir, const Ledger& ledger) {
  require_owned(dir, ledger);
  std::vector<fs::path> present;  // relative to dir
  std::set<fs::path> checked;     // folders that let a file be removed
  for (const auto& name : ledger.files) {
    const fs::path rel(name);
    if (inspect(dir, rel).kind != Found::File) continue;
    const fs::path folder = (dir / rel).parent_path();
    if (checked.insert(folder).second && ::access(folder.c_str(), W_OK | X_OK) != 0)
      throw DataError(printable_path((dir / rel).string()) +
                      ": cannot remove (written by qkv): " + std::strerror(errno) + "; nothing was removed");
    present.push_back(rel);
  }
  return present;
}

// Removes the files a ledger lists, then the folders that leaves empty
// (never `dir` itself). The ledger stays until the caller's new one is
// renamed over it: a kill between the two leaves a folder qkv still knows
// as its own, never one without a ledger. Every listed file is checked to be
// what qkv wrote, and its folder to let it be removed (not read-only, not
// immutable, not another user's), before any is removed: a command fails
// with all of its earlier files or with none of them gone.
void remove_ledger_files(const fs::path& dir, const Ledger& ledger) {
  const std::vector<fs::path> present = removable_ledger_files(dir, ledger);
  std::set<fs::path, std::greater<>> parents;  // deepest first
  for (const auto& rel : present) {
    const fs::path p = dir / rel;
    std::error_code ec;
    if (!fs::remove(p, ec) && ec) throw DataError(p.string() + ": cannot remove (written by qkv): " + ec.message());
    for (fs::path up = rel.parent_path(); !up.empty(); up = up.parent_path()) parents.insert(dir / up);
  }
  for (const auto& folder : parents) {
    std::error_code ec;
    if (fs::is_directory(folder, ec) && fs::is_empty(folder, ec)) fs::remove(folder, ec);
  }
}

// The ledger, or the temporary of a ledger write that a kill interrupted (a
// regular file ".qkv-written.tmp.XXXXXX" whose rename never came): qkv's
// bookkeeping, nothing of the user's.
bool is_ledger_or_its_temp(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  std::error_code ec;
  return name == kLedgerName ||
         (atomic_temp_target(name) == kLedgerName && fs::is_regular_file(entry.symlink_status(ec)));
}

// A folder holding folders at most, at any depth (no file, link or other
// entry): what a generation leaves when stopped before a class's files.
bool holds_no_files(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (!fs::is_directory(it->symlink_status())) return false;
  return !ec;
}

// The folders below `root` that hold no file at any depth, deepest first
// (nothing in them to lose); links are not followed.
void remove_folders_without_files(const fs::path& root) {
  std::error_code ec;
  std::set<fs::path, std::greater<>> folders;  // deepest first
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (fs::is_directory(it->symlink_status())) folders.insert(it->path());
  for (const auto& folder : folders) {
    std::error_code gone;
    if (fs::is_empty(folder, gone)) fs::remove(folder, gone);
  }
}

// Empty, or holding only a ledger that lists nothing (a command that failed
// after claiming the folder and before writing) and a killed ledger write's
// temporary: nothing there to lose.
bool is_empty_folder(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec) return true;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (!is_ledger_or_its_temp(*it)) return false;
  return !ec && read_ledger(dir).files.empty();
}

// The ledger and the run records are JSON, which holds UTF-8 only: a folder
// whose name is not would be recorded under another name.
void require_utf8_name(const std::string& path, const std::string& option) {
  if (!is_valid_utf8(path))
    refuse(option, printable_path(path) +
                       ": the name is not valid UTF-8 (qkv records its outputs in JSON); "
                       "choose a UTF-8 name");
}

// A UsageError naming `option` when `path` lies in a finished folder of
// synthetic data (`from` is the first folder looked at, going up): its
// loader reads every file there as data and refuses what qkv did not write
// in it, so an output placed there made the data folder useless.
void refuse_inside_data_folder(const std::string& path, const fs::path& from, const std::string& option) {
  for (fs::path up = from; !up.empty(); up = up.parent_path()) {
    std::error_code ec;
    Ledger ledger;
    try {
      if (fs::exists(up / kLedgerName, ec)) ledger = read_ledger(up);
    } catch (const std::exception&) {
      // Not a ledger qkv can read: not data it made.
    }
    if (ledger.complete)
      refuse(option, printable_path(path) + ": inside " + printable_path(up.string()) + ", synthetic data that '" +
                         typed_command(ledger.maker()) +
                         "' made and whose loader would read it as data; choose a place outside it (nothing "
                         "was changed)");
    if (up == up.root_path()) break;  // "/" is its own parent
  }
}

}  // namespace

void check_output_dir(const std::string& dir, const std::string& option, bool overwrite, const std::string& command) {
  if (dir.empty()) refuse(option, ": must name a folder");
  require_utf8_name(dir, option);
  const fs::path root = normal(dir);
  refuse_inside_data_folder(dir, root.parent_path(), option);
  std::error_code ec;
  const auto status = fs::status(root, ec);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) refuse(option, printable_path(dir) + ": exists and is not a folder");
  refuse_if_held_elsewhere(root, option, /*exclusive=*/true);
  if (is_empty_folder(root)) return;
  // Another command's folder first: --overwrite would not help.
  if (const std::string maker = folder_made_by(dir); !maker.empty() && maker != command)
    refuse(option, printable_path(dir) + ": made by '" + typed_command(maker) + "', not by '" + typed_command(command) +
                       "'; only that command replaces what it made there, even with " +
                       "{overwrite}; choose another folder (nothing was changed)");
  if (!overwrite)
    refuse(option, printable_path(dir) +
                       ": exists and is not empty; add {overwrite} to replace what qkv wrote there (other files are "
                       "kept), or choose another folder");
  const Ledger ledger = read_ledger(root);
  if (ledger.header.is_null())
    refuse(option, printable_path(dir) + ": not empty and holds nothing qkv wrote (no " + kLedgerName +
                       "); qkv will not write into it, even with {overwrite}; choose another folder");
  // The file a torn line named would be found only when the new run writes
  // it, after the rest of the old run was deleted: refused before that.
  if (ledger.unreadable_line > 0)
    refuse(option, printable_path((root / kLedgerName).string()) + ": line " + std::to_string(ledger.unreadable_line) +
                       " cannot be read (torn by a crash, or edited), so qkv cannot tell which files there it wrote; "
                       "it will not replace the folder, even with {overwrite} (nothing was changed); move it away or "
                       "choose another folder");
}

void check_names_writable(const std::string& dir, const std::string& option, const std::vector<std::string>& names) {
  const fs::path root = normal(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  const Ledger ledger = read_ledger(root);
  for (const auto& name : names) {
    const Found found = inspect(root, fs::path(name));
    if (found.kind == Found::Refused) throw UsageError(found.why);
    if (found.kind == Found::Absent) continue;
    // A listed file's bytes are checked where the folder is: --resume's
    // verify_output_dir, --overwrite's claim (require_owned, before removing).
    if (std::find(ledger.files.begin(), ledger.files.end(), name) == ledger.files.end())
      refuse(option, printable_path((root / name).string()) +
                         ": exists and was not written by qkv; this command writes that file and will not replace "
                         "it (nothing was changed); move it away or choose another folder");
  }
}

void check_files_folder(const std::string& dir, const std::string& option) {
  const fs::path root = normal(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec) || is_empty_folder(root) || !read_ledger(root).header.is_null()) return;
  refuse(option, printable_path(dir) + ": not empty and holds nothing qkv wrote (no " + kLedgerName +
                     "); qkv will not mix its files into it; choose another folder");
}

OutputClaim claim_output_dir(const std::string& dir, const std::string& option, bool overwrite,
                             const OutputMarker& marker) {
  check_output_dir(dir, option, overwrite, marker.command);
  const fs::path root = normal(dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) make_directories(root.string());
  const auto held = ClaimedRoot::lock(root, option, /*exclusive=*/true);
  // Again: another command may have written there before the lock.
  check_output_dir(dir, option, overwrite, marker.command);
  remove_stale_temp_files(root.string(), {kLedgerName});  // a killed claim's, under the lock
  if (is_empty_folder(root)) {
    write_new_ledger(root, marker);
    return ClaimedRoot::hold(held, {}, {}, /*replaced=*/false, marker.command, marker.command);
  }
  const Ledger ledger = read_ledger(root);
  removable_ledger_files(root, ledger);  // refused before anything is touched
  auto claim = ClaimedRoot::hold(held, {}, {}, /*replaced=*/true, marker.command, marker.command);
  std::lock_guard<std::mutex> lock(claims_mutex());
  held->replace_earlier = [root, ledger, marker] {
    remove_stale_temps_of_ledger(root.string());  // a killed write's, under the lock: no writer is left
    remove_ledger_files(root, ledger);
    write_new_ledger(root, marker);
  };
  return claim;
}

void replace_earlier_output_below(const std::string& path) {
  const fs::path target = normal(path);
  std::vector<std::pair<std::shared_ptr<ClaimedRoot>, std::function<void()>>> due;
  {
    std::lock_guard<std::mutex> lock(claims_mutex());
    for (const auto& weak : root_list_locked()) {
      auto root = weak.lock();
      if (!root || !root->replace_earlier) continue;
      if (at_or_below(target, root->dir)) due.emplace_back(root, std::exchange(root->replace_earlier, nullptr));
    }
  }
  // Outside the lock: the replacement writes the fresh ledger.
  for (auto& [root, replace] : due) {
    try {
      replace();
    } catch (...) {
      std::lock_guard<std::mutex> lock(claims_mutex());
      root->replace_earlier = std::move(replace);  // what was not removed is still the earlier output's
      throw;
    }
  }
}

void OutputClaim::release_if_unused(bool remove_folder) noexcept {
  const auto held = std::move(root_);  // the claim ends on every path out
  if (!held) return;
  {
    std::lock_guard<std::mutex> lock(claims_mutex());
    if (held->replace_earlier) return;  // nothing written: the earlier output is as it was
  }
  try {
    const fs::path& root = held->dir;
    std::error_code ec;
    if (!fs::is_directory(root, ec) || !fs::exists(root / kLedgerName, ec) || !is_empty_folder(root)) return;
    fs::remove(root / kLedgerName, ec);
    if (remove_folder) fs::remove(root, ec);  // only while empty
  } catch (const std::exception&) {
    // A ledger qkv cannot read, or no memory: everything stays as it is.
  }
}

namespace {

// The outputs qkv wrote around `dir` (folders above it holding a ledger):
// refused while another command holds one (a run writing there; a file
// output's own folder takes its own lock), and the command that wrote `file`
// as part of one, or "" (for a message naming who may replace it).
std::string writer_in_enclosing_outputs(const fs::path& dir, const fs::path& file, const std::string& option) {
  std::string writer;
  for (fs::path up = dir.parent_path(); !up.empty(); up = up.parent_path()) {
    std::error_code ec;
    if (fs::is_regular_file(fs::symlink_status(up / kLedgerName, ec))) {
      refuse_if_held_elsewhere(up, option, /*exclusive=*/false);
      try {
        if (writer.empty()) writer = read_ledger(up).writer_of(file.lexically_relative(up).generic_string());
      } catch (const std::exception&) {
        // An enclosing ledger qkv cannot read names no writer.
      }
    }
    if (up == up.root_path()) break;
  }
  return writer;
}

}  // namespace

void check_output_file(const std::string& path, const std::string& option, bool overwrite, const std::string& command) {
  if (path.empty()) refuse(option, ": must name a file");
  require_utf8_name(path, option);
  // "out/", "out/." and ".." name folders, which normal() would turn into a
  // file of the folder's name beside it.
  const auto last = fs::path(path).filename();
  if (last.empty() || last == "." || last == "..")
    refuse(option, printable_path(path) + ": names a folder; name a file");
  if (last == kLedgerName)
    refuse(option,
           printable_path(path) + ": is the name of qkv's record of what it wrote in a folder; name another file");
  const fs::path file = normal(path);
  const fs::path dir = file.parent_path();
  refuse_inside_data_folder(path, dir, option);
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (fs::is_directory(status)) refuse(option, printable_path(path) + ": is a folder; name a file");
  refuse_if_held_elsewhere(dir, option, /*exclusive=*/false);
  const std::string enclosing_writer = writer_in_enclosing_outputs(dir, file, option);
  if (fs::exists(status)) {
    const std::string name = file.filename().string();
    // Another command's file first: --overwrite would not help.
    std::string writer;
    try {
      writer = read_ledger(dir).writer_of(name);
    } catch (const std::exception&) {
      // A ledger qkv cannot read is refused below, with or without overwrite.
    }
    if (writer.empty()) writer = enclosing_writer;  // a run's checkpoints/last.ckpt: its run folder's ledger
    if (!writer.empty() && writer != command)
      refuse(option, printable_path(path) + ": written by '" + typed_command(writer) + "', not by '" +
                         typed_command(command) + "'; only that command replaces it, even with {overwrite}; " +
                         "choose another name (nothing was changed)");
    if (!overwrite)
      refuse(option, printable_path(path) + ": exists; add {overwrite} to replace it, or choose another name");
    const Ledger ledger = read_ledger(dir);
    if (std::find(ledger.files.begin(), ledger.files.end(), name) == ledger.files.end())
      refuse(option, printable_path(path) +
                         ": exists and was not written by qkv; qkv will not replace it, even with {overwrite}");
    if (const std::string why = unowned(dir, name, ledger.written); !why.empty()) throw UsageError(why);
  }
  const auto dir_status = fs::status(dir, ec);
  if (fs::exists(dir_status) && !fs::is_directory(dir_status))
    refuse(option, printable_path(path) + ": " + dir.string() + " is not a folder");
}

OutputClaim claim_output_file(const std::string& path, const std::string& option, bool overwrite,
                              const OutputMarker& marker) {
  check_output_file(path, option, overwrite, marker.command);
  const fs::path dir = normal(path).parent_path();
  make_directories(dir.string());
  const auto held = ClaimedRoot::lock(dir, option, /*exclusive=*/false);
  check_output_file(path, option, overwrite, marker.command);  // again, under the lock
  const Ledger ledger = read_ledger(dir);
  if (ledger.header.is_null()) write_new_ledger(dir, marker);
  const std::string maker = ledger.header.is_null() ? marker.command : ledger.maker();
  return ClaimedRoot::hold(held, ledger.files, ledger.written, false, marker.command, maker);
}

namespace {

// verify_output_dir's checks; returns the ledger.
Ledger verified_ledger(const std::string& dir, const std::string& option, const std::string& command) {
  const fs::path root = normal(dir);
  std::error_code ec;
  if (!fs::exists(root, ec)) refuse(option, printable_path(dir) + ": no such folder (nothing to continue)");
  if (!fs::is_directory(root, ec)) refuse(option, printable_path(dir) + ": is not a folder");
  // Not refuse_if_held_elsewhere: every rank of a data-parallel --resume
  // verifies the folder that rank 0 holds (adopt_output_dir's lock still
  // keeps a second command out).
  const Ledger ledger = read_ledger(root);
  if (ledger.header.is_null())
    refuse(option,
           printable_path(dir) + ": has no " + kLedgerName + " (not a folder qkv wrote); qkv will not write into it");
  const std::string made_by = ledger.maker();
  if (!command.empty() && made_by != command)
    refuse(option, printable_path(dir) + ": made by '" + typed_command(made_by) + "', not by '" +
                       typed_command(command) +
                       "'; continue it with the command that made it, or choose another folder");
  require_owned(root, ledger);
  return ledger;
}

}  // namespace

OutputClaim adopt_output_dir(const std::string& dir, const std::string& option, const std::string& command) {
  verified_ledger(dir, option, command);
  const fs::path root = normal(dir);
  const auto held = ClaimedRoot::lock(root, option, /*exclusive=*/true);
  const Ledger ledger = verified_ledger(dir, option, command);  // again, under the lock
  return ClaimedRoot::hold(held, ledger.files, ledger.written, false, command, ledger.maker());
}

std::string folder_made_by(const std::string& dir) noexcept {
  try {
    return read_ledger(normal(dir)).header.value("command", "");
  } catch (const std::exception&) {
    return "";
  }
}

void verify_output_dir(const std::string& dir, const std::string& option, const std::string& command) {
  verified_ledger(dir, option, command);
}

std::vector<std::string> remove_stale_temps_of_ledger(const std::string& dir) {
  const fs::path root = normal(dir);
  std::map<fs::path, std::set<std::string>> by_folder;
  by_folder[fs::path()].insert(kLedgerName);  // a ledger write's too
  for (const auto& name : read_ledger(root).files) {
    const fs::path rel(name);
    by_folder[rel.parent_path()].insert(rel.filename().string());
  }
  std::vector<std::string> removed;
  for (const auto& [folder, names] : by_folder) {
    // A folder reached through a link or mount point is not swept.
    if (!folder.empty() && inspect(root, folder, /*folder=*/true).kind == Found::Refused) continue;
    for (const auto& path : remove_stale_temp_files((root / folder).string(), names)) removed.push_back(path);
  }
  return removed;
}

namespace {

// What a synthetic-data folder calls for, after the refusals of
// claim_synthetic_dir: nothing is there yet, qkv's complete data with these
// settings, or data to make again (unfinished, or other settings with
// --overwrite).
enum class SyntheticDir { Empty, Reuse, Regenerate };

SyntheticDir synthetic_dir_state(const std::string& dir, const std::string& option, bool overwrite,
                                 const OutputMarker& marker) {
  if (dir.empty()) refuse(option, ": must name a folder");
  require_utf8_name(dir, option);
  const fs::path root = normal(dir);
  std::error_code ec;
  const auto status = fs::status(root, ec);
  if (!fs::exists(status) || (fs::is_directory(status) && is_empty_folder(root))) return SyntheticDir::Empty;
  if (!fs::is_directory(status)) refuse(option, printable_path(dir) + ": exists and is not a folder");
  const Ledger ledger = read_ledger(root);
  if (ledger.header.is_null())
    refuse(option, printable_path(dir) + ": not empty and not written by qkv; choose another folder");
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
    if (rel.parent_path().empty() && is_ledger_or_its_temp(*it)) continue;
    bool known = it->is_directory() ? listed_dirs.count(rel) > 0 : listed.count(rel) > 0;
    // What a generation stopped midway leaves (its ledger not complete): a
    // class folder made before its files, and the temporary of the file it
    // was writing (listed before it is written). Regenerating takes them over.
    if (!known && !ledger.complete) {
      const std::string name = rel.filename().string();
      known = it->is_directory()
                  ? holds_no_files(it->path())
                  : is_atomic_temp_name(name) && listed.count(rel.parent_path() / atomic_temp_target(name));
    }
    if (!known)
      refuse(option, printable_path(dir) + ": holds " + rel.string() +
                         ", which qkv did not write; move it away or choose another folder (nothing was deleted)");
  }
  if (ledger.maker() != marker.command)
    refuse(option, printable_path(dir) + ": made by '" + typed_command(ledger.maker()) + "', not by '" +
                       typed_command(marker.command) + "'; qkv will not replace it with synthetic data, even with " +
                       "{overwrite}; choose another folder (nothing was changed)");
  const auto settings = marker.settings.is_null() ? nlohmann::json::object() : marker.settings;
  const bool same = ledger.header.value("command", "") == marker.command &&
                    ledger.header.value("settings", nlohmann::json::object()) == settings;
  if (same && ledger.complete) {
    require_owned(root, ledger);  // data read as it was generated, or not at all
    return SyntheticDir::Reuse;
  }
  if (!same && !overwrite)
    refuse(option, printable_path(dir) +
                       ": holds synthetic data made with other settings; add {overwrite} to regenerate it, or choose "
                       "another folder");
  // Same settings but unfinished (interrupted), or --overwrite: regenerate.
  return SyntheticDir::Regenerate;
}

}  // namespace

bool check_synthetic_dir(const std::string& dir, const std::string& option, bool overwrite,
                         const OutputMarker& marker) {
  return synthetic_dir_state(dir, option, overwrite, marker) != SyntheticDir::Reuse;
}

SyntheticDirClaim claim_synthetic_dir(const std::string& dir, const std::string& option, bool overwrite,
                                      const OutputMarker& marker) {
  switch (synthetic_dir_state(dir, option, overwrite, marker)) {
    case SyntheticDir::Reuse: return {false, {}};
    case SyntheticDir::Empty: return {true, claim_output_dir(dir, option, false, marker)};
    case SyntheticDir::Regenerate: break;
  }
  auto claim = claim_output_dir(dir, option, true, marker);
  clear_for_generation(dir);
  return {true, std::move(claim)};
}

void clear_for_generation(const std::string& dir) {
  replace_earlier_output_below(dir);          // the generation writes at once
  remove_folders_without_files(normal(dir));  // under the claim's lock
}

void mark_output_complete(const std::string& dir) { append_line(normal(dir) / kLedgerName, kCompleteLine); }

nlohmann::json read_output_marker(const std::string& dir) { return read_ledger(normal(dir)).header; }

std::vector<std::string> ledger_files(const std::string& dir) { return read_ledger(normal(dir)).files; }

namespace {
// The innermost held root above `file` (where claims nest), or null. The
// caller holds claims_mutex.
std::shared_ptr<ClaimedRoot> innermost_root_locked(const fs::path& file) {
  std::shared_ptr<ClaimedRoot> best;
  for (const auto& weak : root_list_locked()) {
    auto r = weak.lock();
    if (!r) continue;
    if (!at_or_below(file, r->dir)) continue;
    if (!best || r->dir.string().size() > best->dir.string().size()) best = std::move(r);
  }
  return best;
}
}  // namespace

void check_and_record_write(const std::string& path, const void* data, size_t size) {
  replace_earlier_output_below(path);
  std::lock_guard<std::mutex> lock(claims_mutex());
  auto& roots = root_list_locked();
  if (roots.empty()) return;
  const fs::path file = normal(path);
  if (file.filename() == kLedgerName) return;
  const auto best = innermost_root_locked(file);
  if (!best) return;
  const std::string rel = file.lexically_relative(best->dir).generic_string();
  const Found found = inspect(best->dir, fs::path(rel));
  if (found.kind == Found::Refused) throw DataError(found.why);
  if (found.kind == Found::File && !best->known.count(rel)) {
    if (!best->listed.count(rel))
      throw DataError(printable_path(file.string()) + ": exists and was not written by qkv; not replacing it");
    if (const std::string why = unowned(best->dir, rel, best->written); !why.empty()) throw DataError(why);
  }
  const LedgerFingerprint f{static_cast<uint64_t>(size), crc32(data, size)};
  append_line(best->dir / kLedgerName, entry_line(rel, f, best->writer != best->maker ? best->writer : ""));
  best->listed.insert(rel);
  best->written[rel].push_back(f);
  best->known.insert(rel);
}

void remove_own_file(const std::string& path) {
  replace_earlier_output_below(path);
  std::lock_guard<std::mutex> lock(claims_mutex());
  const fs::path file = normal(path);
  const auto best = innermost_root_locked(file);
  if (!best) throw DataError(printable_path(path) + ": not below an output qkv holds; not deleting it");
  const std::string rel = file.lexically_relative(best->dir).generic_string();
  if (!best->listed.count(rel)) {
    if (inspect(best->dir, fs::path(rel)).kind == Found::Absent) return;
    throw DataError(printable_path(path) + ": not written by qkv; not deleting it");
  }
  if (const std::string why = unowned(best->dir, rel, best->written); !why.empty()) throw DataError(why);
  std::error_code ec;
  if (!fs::remove(file, ec) && ec)
    throw DataError(printable_path(path) + ": cannot remove (written by qkv): " + ec.message());
}

namespace {

// `path` with every link resolved (as far as it exists: a missing output
// resolves through its nearest existing parent).
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(fs::path(path)), ec);
  if (ec) return normal(path);
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

// Whether two existing paths are one file or folder (a second hard link).
bool same_file(const fs::path& a, const fs::path& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

void check_outputs_apart(const std::string& output, const std::string& option, const std::vector<InputPath>& inputs) {
  if (output.empty()) return;
  const fs::path out = resolved(output);
  for (const auto& input : inputs) {
    if (input.path.empty()) continue;
    const fs::path in = resolved(input.path);
    const std::string named = input.listed_in.empty() ? "{" + input.key + "} " + printable_path(input.path)
                                                      : printable_path(input.path) + " (listed in {" + input.key +
                                                            "} " + printable_path(input.listed_in) + ")";
    std::string how;
    if (at_or_below(in, out) && at_or_below(out, in))
      how = "is " + named;
    else if (same_file(out, in))
      how = "is " + named + " under another name";
    else if (at_or_below(in, out))
      how = "holds " + named;
    else if (at_or_below(out, in))
      how = "lies inside " + named;
    if (!how.empty())
      refuse(option, printable_path(output) + ": " + how +
                         ", which this command reads; an output is never an input (nothing was changed); choose "
                         "another output");
  }
}

}  // namespace qkv
