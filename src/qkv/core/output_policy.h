#pragma once
// The overwrite policy every command that writes shares: a user's files are
// never replaced or deleted, and what qkv itself wrote only with --overwrite.
//
// qkv knows what it wrote through a ledger, `.qkv-written`, at the root of
// each output it claims (a run folder, a data folder, or the folder of one
// output file): a header line (qkv version, command, settings) and one line
// per write below that root with the file's length and CRC-32, so that a file
// replaced or edited since, or a name added to the ledger by hand, is never
// taken for qkv's. While a command holds its claim of a root (an
// OutputClaim), every write_file_atomic below it is checked and recorded:
// replacing a file there that the ledger does not list is refused. The claim
// ends with its holder (a train::RunFolder, or the task function for the
// length of its writes), so that nothing of one command's claims outlives it
// in a process that runs several (tests, the Python package). Writes below no
// held claim are not watched.
//
// One writer: a claim holds an flock on its root folder from before anything
// there is removed or written until the claim ends, exclusive for a folder
// claimed whole (a run, a data folder, --resume) and shared for a folder
// that one output file is claimed in (two commands may write two files side
// by side, never into a folder another command holds whole). A command that
// finds the folder held is refused at once, naming the holder's process id
// and command line (from /proc/locks; nothing is written to tell it); the
// kernel drops the lock of a process that dies, so that a killed run's folder
// is taken over by the next command. The checks made before a claim
// (check_output_dir, check_output_file) try the lock first, so that a folder
// being written is refused as held, not by what its half-written files look
// like. verify_output_dir does not: every rank of a data-parallel --resume
// verifies the folder rank 0 holds.
//
// Outputs apart from inputs: before a command claims anything it compares
// each output with the files and folders it reads (check_outputs_apart),
// so that --overwrite can never remove or replace an input.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv {

inline constexpr const char* kLedgerName = ".qkv-written";

// What a claim records in the ledger's header: the command and, for outputs
// that are reused when made the same way (synthetic data), its settings.
struct OutputMarker {
  std::string command;
  nlohmann::json settings = nlohmann::json::object();
};

// `path` absolute, without "." and ".." parts or a trailing separator (links
// are kept): how a run records a folder it will be read from elsewhere.
std::string absolute_normal_path(const std::string& path);

// Whether `path` is `folder` or lies below it, compared as absolute_normal_path
// gives them (links are not followed).
bool path_at_or_below(const std::string& path, const std::string& folder);

// A file or folder a command reads, and the setting that names it ("manifest",
// "checkpoint"; messages say "{key}", which the CLI names by its flag).
struct InputPath {
  std::string key;
  std::string path;
  // Where `path` is named when not by the setting itself: the file that
  // lists it (a cohort's manifest lists its volumes); messages then say
  // "PATH (listed in {key} LISTED_IN)".
  std::string listed_in = "";
};

// UsageError naming both when the output `output` (named by `option`, as
// claim_output_dir's) is one of `inputs`, contains one, or lies inside a
// folder that is one, compared after links are resolved (and, for files that
// exist, by device and inode, so that a second hard link counts as the same
// file). Inputs with an empty path are skipped. Called before the output is
// checked or claimed: a refusal leaves everything as it was.
void check_outputs_apart(const std::string& output, const std::string& option, const std::vector<InputPath>& inputs);

struct ClaimedRoot;  // output_policy.cpp: a root's ledger as this process knows it

// A command's hold on an output root. Move-only; while one claim of a root
// lives, writes below it are checked and recorded (two claims of one folder,
// e.g. two output files side by side, share its record). Empty when
// default-made.
class [[nodiscard]] OutputClaim {
 public:
  OutputClaim() = default;
  OutputClaim(OutputClaim&&) noexcept = default;
  OutputClaim& operator=(OutputClaim&&) noexcept = default;
  OutputClaim(const OutputClaim&) = delete;
  OutputClaim& operator=(const OutputClaim&) = delete;

  bool held() const { return root_ != nullptr; }
  // claim_output_dir with `overwrite` found qkv's own earlier files there,
  // which go at the claim's first write (a user's files are kept); false for
  // a missing or empty folder.
  bool replaced() const { return replaced_; }
  // Ends the claim, for a command that failed before writing anything: when
  // the folder holds nothing but its ledger (listing no file), the ledger
  // goes and, with `remove_folder` (the claim created the folder), the folder
  // too, so that a failed command leaves no trace. Anything else stays; never
  // throws (it runs while another error is on its way out).
  void release_if_unused(bool remove_folder) noexcept;

 private:
  friend struct ClaimedRoot;  // which alone makes claims
  OutputClaim(std::shared_ptr<ClaimedRoot> root, bool replaced) : root_(std::move(root)), replaced_(replaced) {}
  std::shared_ptr<ClaimedRoot> root_;
  bool replaced_ = false;
};

// Before a command writes into the folder `dir` (named by `option` in
// messages: a setting's key, "out", which the CLI names by its flag):
//  - missing or empty: created (with its parents);
//  - holding files, without `overwrite`: UsageError naming it and the way out;
//  - holding files, with `overwrite`: the files its ledger lists are removed
//    (and folders this leaves empty) at the claim's first write
//    (replace_earlier_output_below), every other file stays; a folder holding
//    no ledger is refused even then, since nothing there is qkv's, and so is
//    one another command made (marker.command: a trained run is not replaced
//    by synthetic data, nor a cohort by a run). Files another command wrote
//    into the folder (its ledger says "by": an export's weights.pt in a run)
//    go with the rest: they belonged to the output being replaced, and kept
//    out of the fresh ledger they would be nobody's.
// The folder becomes a claimed root with a fresh ledger, for as long as the
// claim returned is held.
OutputClaim claim_output_dir(const std::string& dir, const std::string& option, bool overwrite,
                             const OutputMarker& marker);

// The same for one output file: a missing file is fine (its parent folders
// are created); an existing one is replaced only with `overwrite` and only if
// this command wrote it (listed in its folder's ledger as marker.command's:
// export-weights does not replace a run's summary.json). The folder's ledger
// records it while the claim is held, with "by" where another command made
// the folder.
OutputClaim claim_output_file(const std::string& path, const std::string& option, bool overwrite,
                              const OutputMarker& marker);

// claim_output_file's refusals without its effects; `command` is the marker's.
void check_output_file(const std::string& path, const std::string& option, bool overwrite, const std::string& command);

// Continues in a folder a command claimed before (--resume): claims it with
// its existing ledger, removing nothing, after verify_output_dir's checks.
OutputClaim adopt_output_dir(const std::string& dir, const std::string& option, const std::string& command);

// Whether `dir` (named by `option`) may be continued by `command` (the name
// its ledger's header records, e.g. "vnt train"; empty: any): UsageError if
// it is missing, has no ledger, was made by another command, or lists a file
// that is not what qkv wrote: reached through a symbolic link or a mount
// point (a folder such as checkpoints/ replaced by a link), not a plain file
// with one name, or holding other bytes than the ledger records (replaced or
// edited since). qkv neither reads its own files, writes nor deletes through
// any of these. claim_output_dir (with --overwrite) makes the same file checks.
void verify_output_dir(const std::string& dir, const std::string& option, const std::string& command);

// The command whose ledger heads the folder `dir` ("qkv data synth-shapes",
// "vnt train"): what made it; "" where there is no ledger qkv can read.
std::string folder_made_by(const std::string& dir) noexcept;

// Removes the temporaries a killed write_file_atomic left next to the files
// the ledger of `dir` lists (".NAME.tmp.XXXXXX" for a listed NAME), in folders
// reached without a link; call it only when no other process writes there.
// Returns what it removed.
std::vector<std::string> remove_stale_temps_of_ledger(const std::string& dir);

// A folder of built-in synthetic data, reused when qkv made it with the same
// settings. `generate` says whether it must be (re)generated; the claim to
// write it under is then held. Without `overwrite`, a folder made with other
// settings is refused; any file in it that qkv did not write is refused
// either way (a loader would read it as data), naming it.
struct [[nodiscard]] SyntheticDirClaim {
  bool generate = false;
  OutputClaim claim;
};
SyntheticDirClaim claim_synthetic_dir(const std::string& dir, const std::string& option, bool overwrite,
                                      const OutputMarker& marker);

// For a generator about to write synthetic data into `dir`, which it holds
// (claim_output_dir): what qkv wrote there before is replaced now, and the
// folders below holding no file at any depth go too (class folders a stopped
// generation made before their files, or of other classes), since a loader
// would read each as a class.
void clear_for_generation(const std::string& dir);

// claim_synthetic_dir's refusals without its effects: nothing is written or
// claimed. Returns whether the data would be (re)generated.
bool check_synthetic_dir(const std::string& dir, const std::string& option, bool overwrite, const OutputMarker& marker);

// For a command that writes named files into the folder `dir` (one claim per
// file, beside what is there): UsageError naming `option` when `dir` exists
// and holds files but no ledger, a folder qkv did not make, which its files
// would be mixed into. Missing or empty folders and qkv's own are fine.
void check_files_folder(const std::string& dir, const std::string& option);

// Before the work whose files will land in `dir`: UsageError naming the first
// of `names` (paths below `dir`) that exists there and is not one qkv wrote
// (not in the ledger, or reached through a link), which the write would
// refuse only at the end of the work (hours of training later). Missing
// names are fine; a listed file changed since qkv wrote it is refused by
// verify_output_dir and claim_output_dir, which read every listed file.
void check_names_writable(const std::string& dir, const std::string& option, const std::vector<std::string>& names);

// claim_output_dir's refusals without its effects, so that a command can check
// every output before it writes any; `command` is the marker's.
void check_output_dir(const std::string& dir, const std::string& option, bool overwrite, const std::string& command);

// Marks a synthetic-data folder finished, so that a later claim with the same
// settings reuses it instead of a half-written tree.
void mark_output_complete(const std::string& dir);

// The ledger header of `dir`, or null if it has none.
nlohmann::json read_output_marker(const std::string& dir);

// The relative paths a folder's ledger lists (empty if there is none).
std::vector<std::string> ledger_files(const std::string& dir);

// Before the first change below a folder claimed whole with `overwrite` (a
// file written or removed, a folder made): the files the earlier output's
// ledger lists are removed and a fresh ledger written then, not when the
// folder is claimed, so that a command refused after its claim but before it
// writes anything (data that cannot be read) leaves the earlier output as it
// was. write_file_atomic, make_directories and remove_own_file call it.
void replace_earlier_output_below(const std::string& path);

// For write_file_atomic, before it writes `size` bytes at `data` to `path`:
// below a held claim (the innermost, where claims nest), throws DataError if
// the path goes through a link or mount point, or an existing file there is
// not one qkv wrote (unlisted, or changed since); otherwise records the new
// contents' length and CRC-32 in the ledger (before the rename, so that after
// a crash the file holds either contents the ledger records).
void check_and_record_write(const std::string& path, const void* data, size_t size);

// Deletes `path`, a file below a held claim that the claim's ledger records
// and that still holds what qkv wrote there (a run's last checkpoint, no
// longer needed once its best one is kept); nothing if it is missing.
// DataError naming it otherwise (no claim above it, reached through a link,
// not listed, or changed since): nothing is deleted then.
void remove_own_file(const std::string& path);

}  // namespace qkv
