// The overwrite policy: an existing output is refused without --overwrite;
// with it only what qkv wrote is removed; a file qkv did not write is never
// replaced, even by a later write in a claimed folder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::testing::expect_usage_error;
using qkv::testing::fresh_dir;
using qkv::testing::write_text_file;

namespace {

std::string read(const fs::path& p) {
  const auto bytes = qkv::read_file_bytes(p.string());
  return std::string(bytes.begin(), bytes.end());
}

using qkv::testing::usage_error_of;

// --overwrite of `dir` as a command does it: the claim, then its first write
// (first.txt), at which the earlier files go. Whether the claim found qkv's files.
bool overwritten(const fs::path& dir, const std::string& command) {
  const auto claim = qkv::claim_output_dir(dir.string(), "--out", true, {command, {}});
  qkv::write_file_atomic((dir / "first.txt").string(), std::string("new"));
  return claim.replaced();
}

}  // namespace

TEST(OutputPolicy, NewFolderIsCreatedAndRecordsWhatQkvWrites) {
  const fs::path dir = fresh_dir("policy_new") + "/a/b";
  const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
  EXPECT_FALSE(claim.replaced());
  qkv::make_directories((dir / "sub").string());
  qkv::write_file_atomic((dir / "sub/x.txt").string(), std::string("x"));
  qkv::write_file_atomic((dir / "y.txt").string(), std::string("y"));
  qkv::write_file_atomic((dir / "y.txt").string(), std::string("y2"));  // its own file: replaced
  const auto files = qkv::ledger_files(dir.string());
  EXPECT_EQ(files, (std::vector<std::string>{"sub/x.txt", "y.txt"}));
  EXPECT_EQ(qkv::read_output_marker(dir.string()).value("command", ""), "test");
}

TEST(OutputPolicy, ExistingFolderIsRefusedWithoutOverwriteAndNothingChanges) {
  const fs::path dir = fresh_dir("policy_refuse");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::write_file_atomic((dir / "result.txt").string(), std::string("first"));
  }
  const auto message = usage_error_of([&] {
    static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}}));
  });
  EXPECT_NE(message.find("--out " + dir.string()), std::string::npos) << message;
  EXPECT_NE(message.find("add overwrite"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "result.txt"), "first");
}

TEST(OutputPolicy, OverwriteRemovesOnlyQkvsFiles) {
  const fs::path dir = fresh_dir("policy_overwrite");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::make_directories((dir / "checkpoints").string());
    qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("old"));
    qkv::write_file_atomic((dir / "summary.json").string(), std::string("{}"));
  }
  write_text_file(dir / "notes.txt", "mine");
  write_text_file(dir / "checkpoints/keep.me", "mine too");
  EXPECT_TRUE(overwritten(dir, "test"));
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  EXPECT_FALSE(fs::exists(dir / "checkpoints/last.ckpt"));
  EXPECT_EQ(read(dir / "notes.txt"), "mine");
  EXPECT_EQ(read(dir / "checkpoints/keep.me"), "mine too");
  EXPECT_EQ(qkv::ledger_files(dir.string()), std::vector<std::string>{"first.txt"});
}

// --overwrite removes the earlier output at the command's first write, not
// at its claim: a command refused in between (data that cannot be read, after
// the run folder is claimed) leaves that output as it was, ledger and all.
TEST(OutputPolicy, OverwriteRemovesNothingUntilTheCommandWrites) {
  const fs::path dir = fresh_dir("policy_overwrite_later");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::make_directories((dir / "checkpoints").string());
    qkv::write_file_atomic((dir / "checkpoints/best.ckpt").string(), std::string("best"));
    qkv::write_file_atomic((dir / "summary.json").string(), std::string("{}"));
  }
  const std::string ledger = read(dir / qkv::kLedgerName);
  for (const bool release : {false, true}) {
    auto claim = qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}});
    EXPECT_TRUE(claim.replaced());
    if (release) claim.release_if_unused(/*remove_folder=*/true);  // a failed command's way out
  }
  EXPECT_EQ(read(dir / "checkpoints/best.ckpt"), "best");
  EXPECT_EQ(read(dir / "summary.json"), "{}");
  EXPECT_EQ(read(dir / qkv::kLedgerName), ledger);
  // The first folder made is a change too: the earlier files go before it
  // is made, and it stays.
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}});
    qkv::make_directories((dir / "checkpoints").string());
    EXPECT_FALSE(fs::exists(dir / "checkpoints/best.ckpt"));
    EXPECT_FALSE(fs::exists(dir / "summary.json"));
    EXPECT_TRUE(fs::is_directory(dir / "checkpoints"));
    EXPECT_TRUE(qkv::ledger_files(dir.string()).empty());
    qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("new"));
  }
  EXPECT_EQ(qkv::ledger_files(dir.string()), std::vector<std::string>{"checkpoints/last.ckpt"});
}

// A folder or file is replaced only by the command that made it, with or
// without --overwrite: a trained run is not replaced by synthetic data, nor a
// run's summary.json by an export. The folder's own command, with
// --overwrite, replaces everything qkv wrote there, the export's file too.
TEST(OutputPolicy, OverwriteReplacesOnlyWhatThisCommandMade) {
  const fs::path dir = fresh_dir("policy_other_command");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"vnt train", {}});
    qkv::write_file_atomic((dir / "summary.json").string(), std::string("{}"));
  }
  {
    const auto claim = qkv::claim_output_file((dir / "weights.pt").string(), "--output", false, {"export-weights", {}});
    qkv::write_file_atomic((dir / "weights.pt").string(), std::string("weights"));
  }
  const auto other = usage_error_of([&] {
    static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", true, {"qkv data synth-shapes", {}}));
  });
  EXPECT_NE(other.find(": made by 'qkv vnt train', not by 'qkv data synth-shapes'; only that command replaces"),
            std::string::npos)
      << other;
  // Said first, also without --overwrite (which would not help).
  EXPECT_NE(usage_error_of([&] {
              static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", false, {"qkv data synth-shapes", {}}));
            }).find("made by 'qkv vnt train'"),
            std::string::npos);
  const auto synthetic = usage_error_of([&] {
    static_cast<void>(qkv::claim_synthetic_dir(dir.string(), "--out", true, {"qkv data synth-shapes", {}}));
  });
  EXPECT_NE(synthetic.find("made by 'qkv vnt train'"), std::string::npos) << synthetic;
  const auto summary = usage_error_of([&] {
    static_cast<void>(
        qkv::claim_output_file((dir / "summary.json").string(), "--output", true, {"export-weights", {}}));
  });
  EXPECT_NE(summary.find("summary.json: written by 'qkv vnt train', not by 'qkv export-weights'"), std::string::npos)
      << summary;
  EXPECT_EQ(read(dir / "summary.json"), "{}");
  // The export replaces its own file.
  {
    const auto claim = qkv::claim_output_file((dir / "weights.pt").string(), "--output", true, {"export-weights", {}});
    qkv::write_file_atomic((dir / "weights.pt").string(), std::string("weights 2"));
  }
  EXPECT_EQ(read(dir / "weights.pt"), "weights 2");
  EXPECT_TRUE(overwritten(dir, "vnt train"));
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  EXPECT_FALSE(fs::exists(dir / "weights.pt"));
  // A ledger from before writers were recorded (no "writers" in its header,
  // no "by" in its entries) says nothing of who wrote a file: --overwrite
  // replaces what qkv wrote there, as it did.
  const fs::path old = fresh_dir("policy_old_ledger");
  fs::create_directories(old);
  write_text_file(old / qkv::kLedgerName, "{\"command\":\"vnt train\",\"qkv_version\":\"0.1.0\",\"settings\":{}}\n");
  {
    const auto claim = qkv::claim_output_file((old / "weights.pt").string(), "--output", false, {"export-weights", {}});
    qkv::write_file_atomic((old / "weights.pt").string(), std::string("w"));
  }
  auto ledger = read(old / qkv::kLedgerName);
  const std::string said_by = "\"by\":\"export-weights\",";  // keys in order: by, bytes, crc32, file
  const auto by = ledger.find(said_by);
  ASSERT_NE(by, std::string::npos) << ledger;
  ledger.erase(by, said_by.size());  // as the earlier version wrote it
  write_text_file(old / qkv::kLedgerName, ledger);
  {
    const auto claim = qkv::claim_output_file((old / "weights.pt").string(), "--output", true, {"export-weights", {}});
    qkv::write_file_atomic((old / "weights.pt").string(), std::string("w2"));
  }
  EXPECT_EQ(read(old / "weights.pt"), "w2");
}

// A file below a folder another command made: its writer is named from that
// folder's ledger (a run's checkpoints/last.ckpt had been "not written by
// qkv"), and while another process holds the folder nothing is written below
// it (an export had written into a running train's checkpoints/, under a ledger of its own).
TEST(OutputPolicy, AFileBelowAnotherCommandsFolderIsThatCommands) {
  const fs::path dir = fresh_dir("policy_below_other");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"lm train", {}});
    qkv::make_directories((dir / "checkpoints").string());
    qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("weights"));
  }
  const auto named = usage_error_of(
      [&] { qkv::check_output_file((dir / "checkpoints/last.ckpt").string(), "--output", true, "export-weights"); });
  EXPECT_NE(named.find("last.ckpt: written by 'qkv lm train', not by 'qkv export-weights'"), std::string::npos)
      << named;
  // Another process's hold, as a running command's flock.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const auto held = usage_error_of(
      [&] { qkv::check_output_file((dir / "checkpoints/w.pt").string(), "--output", false, "export-weights"); });
  EXPECT_NE(held.find(dir.string() + ": another qkv command is writing there"), std::string::npos) << held;
  ::close(fd);
  EXPECT_NO_THROW(qkv::check_output_file((dir / "checkpoints/w.pt").string(), "--output", false, "export-weights"));
}

// A run stopped before its report, where the user then saved a report.html:
// the name the run will write is refused before the run, not after it.
TEST(OutputPolicy, ANameTheRunWillWriteIsCheckedBeforeTheRun) {
  const fs::path dir = fresh_dir("policy_names");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::write_file_atomic((dir / "summary.json").string(), std::string("{}"));
  }
  write_text_file(dir / "report.html", "mine");
  EXPECT_NO_THROW(qkv::check_names_writable(dir.string(), "--out", {"summary.json", "metrics.jsonl"}));
  const auto message = usage_error_of([&] {
    qkv::check_names_writable(dir.string(), "--out", {"summary.json", "report.html"});
  });
  EXPECT_NE(message.find("report.html: exists and was not written by qkv"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "report.html"), "mine");
}

TEST(OutputPolicy, AFolderQkvDidNotWriteIsRefusedEvenWithOverwrite) {
  const fs::path dir = fresh_dir("policy_foreign");
  write_text_file(dir / "config.json", "{\"mine\": true}");
  const auto message = usage_error_of([&] {
    static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}));
  });
  EXPECT_NE(message.find("holds nothing qkv wrote"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "config.json"), "{\"mine\": true}");
  EXPECT_FALSE(fs::exists(dir / qkv::kLedgerName));
}

TEST(OutputPolicy, AWriteNeverReplacesAFileQkvDidNotWrite) {
  const fs::path dir = fresh_dir("policy_guard");
  static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}}));
  write_text_file(dir / "report.html", "the user's");
  const auto claim = qkv::adopt_output_dir(dir.string(), "--resume", "test");
  const auto message = qkv::testing::data_error_of(
      [&] { qkv::write_file_atomic((dir / "report.html").string(), std::string("qkv's")); });
  EXPECT_NE(message.find("was not written by qkv"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "report.html"), "the user's");
}

TEST(OutputPolicy, OneOutputFileIsReplacedOnlyIfQkvWroteIt) {
  const fs::path dir = fresh_dir("policy_file");
  const auto mine = (dir / "predictions.csv").string();
  {
    const auto claim = qkv::claim_output_file(mine, "--out", false, {"test", {}});
    qkv::write_file_atomic(mine, std::string("a,b\n"));
  }
  EXPECT_NE(usage_error_of([&] {
              static_cast<void>(qkv::claim_output_file(mine, "--out", false, {"test", {}}));
            }).find("add overwrite"),
            std::string::npos);
  {
    const auto claim = qkv::claim_output_file(mine, "--out", true, {"test", {}});
    qkv::write_file_atomic(mine, std::string("c,d\n"));
  }
  EXPECT_EQ(read(mine), "c,d\n");

  const auto users = (dir / "theirs.csv").string();
  write_text_file(users, "keep");  // the user's file, written outside qkv's claim
  const auto message = usage_error_of([&] {
    static_cast<void>(qkv::claim_output_file(users, "--out", true, {"test", {}}));
  });
  EXPECT_NE(message.find("was not written by qkv"), std::string::npos) << message;
  EXPECT_EQ(read(users), "keep");
  // Nor is it named as another command's (the folder's maker wrote other files).
  const auto other = usage_error_of([&] {
    static_cast<void>(qkv::claim_output_file(users, "--out", true, {"other", {}}));
  });
  EXPECT_EQ(other.find("written by 'qkv test'"), std::string::npos) << other;
  EXPECT_NE(other.find("was not written by qkv"), std::string::npos) << other;
}

TEST(OutputPolicy, TheLedgersNameIsNoOutputAndAUsersFileOfThatNameIsNoLedger) {
  const fs::path dir = fresh_dir("policy_ledger_name");
  expect_usage_error(
      [&] {
        static_cast<void>(qkv::claim_output_file((dir / ".qkv-written").string(), "--out", false, {"test", {}}));
      },
      "is the name of qkv's record of what it wrote in a folder");
  EXPECT_FALSE(fs::exists(dir / ".qkv-written"));
  // A JSON list of the user's own by that name: never appended to, nor read as qkv's record.
  const fs::path users = fresh_dir("policy_users_ledger");
  write_text_file(users / ".qkv-written", "{\"todo\":\"my own list\"}\n");
  expect_usage_error(
      [&] {
        static_cast<void>(qkv::claim_output_file((users / "w.pt").string(), "--out", false, {"test", {}}));
      },
      "is not a ledger qkv wrote");
  expect_usage_error(
      [&] {
        static_cast<void>(qkv::claim_output_dir(users.string(), "--out", true, {"test", {}}));
      },
      "is not a ledger qkv wrote");
  EXPECT_EQ(read((users / ".qkv-written").string()), "{\"todo\":\"my own list\"}\n");
}

TEST(OutputPolicy, AGenerationStoppedMidwayIsTakenOverByTheNext) {
  // Killed while writing: a class folder made before its files, and the
  // temporary of the file being written (listed before it is written).
  const fs::path dir = fresh_dir("policy_synth_stopped");
  const qkv::OutputMarker a{"synth", {{"seed", 1}}};
  {
    const auto claim = qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a);
    qkv::make_directories((dir / "box").string());
    qkv::write_file_atomic((dir / "box/b1.off").string(), std::string("OFF"));
    qkv::write_file_atomic((dir / "box/b2.off").string(), std::string("OFF"));
  }
  fs::rename(dir / "box/b2.off", dir / "box/.b2.off.tmp.Ab12cD");
  qkv::make_directories((dir / "sphere/test").string());
  EXPECT_TRUE(qkv::check_synthetic_dir(dir.string(), "--synth-dir", false, a));  // made again
  {
    const auto again = qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a);
    EXPECT_TRUE(again.generate);
  }
  EXPECT_FALSE(fs::exists(dir / "box/.b2.off.tmp.Ab12cD"));
  EXPECT_FALSE(fs::exists(dir / "box/b1.off"));
  EXPECT_FALSE(fs::exists(dir / "sphere"));  // no class folder is left without files
  // Once complete, a folder qkv did not list is an extra class, refused as before.
  qkv::make_directories((dir / "cone").string());  // not made by a claim: not listed
  qkv::mark_output_complete(dir.string());
  const auto message =
      usage_error_of([&] { static_cast<void>(qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a)); });
  EXPECT_NE(message.find("which qkv did not write"), std::string::npos) << message;
}

TEST(OutputPolicy, SyntheticFolderIsReusedRegeneratedOrRefused) {
  const fs::path dir = fresh_dir("policy_synth");
  const qkv::OutputMarker a{"synth", {{"seed", 1}}}, b{"synth", {{"seed", 2}}};
  {
    const auto claim = qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a);
    EXPECT_TRUE(claim.generate);
    EXPECT_TRUE(claim.claim.held());
    qkv::make_directories((dir / "cls").string());
    qkv::write_file_atomic((dir / "cls/x.off").string(), std::string("OFF"));
  }
  // Unfinished: made again, even with the same settings.
  EXPECT_TRUE(qkv::check_synthetic_dir(dir.string(), "--synth-dir", false, a));
  qkv::mark_output_complete(dir.string());
  const auto reuse = qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a);  // same settings: reused
  EXPECT_FALSE(reuse.generate);
  EXPECT_FALSE(reuse.claim.held());  // nothing to write
  EXPECT_NE(usage_error_of([&] {
              static_cast<void>(qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, b));
            }).find("other settings"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "cls/x.off"));
  // A file the user put there is never loaded as data nor deleted.
  write_text_file(dir / "notes.txt", "mine");
  for (bool overwrite : {false, true}) {
    const auto message =
        usage_error_of([&] { static_cast<void>(qkv::claim_synthetic_dir(dir.string(), "--synth-dir", overwrite, b)); });
    EXPECT_NE(message.find("notes.txt"), std::string::npos) << message;
  }
  EXPECT_TRUE(fs::exists(dir / "cls/x.off"));
  EXPECT_EQ(read(dir / "notes.txt"), "mine");
}

TEST(OutputPolicy, LedgerEntriesCannotReachOutsideTheFolder) {
  const fs::path dir = fresh_dir("policy_escape");
  const fs::path victim = fs::path(fresh_dir("policy_victim")) / "precious.txt";
  write_text_file(victim, "keep");
  const auto relative = victim.lexically_relative(dir).generic_string();  // "../policy_victim/precious.txt"
  // An edited ledger is refused as a whole, naming it, before anything is
  // removed or rewritten.
  for (const std::string& entry : {relative, victim.string()}) {
    const std::string ledger = "{\"qkv_version\":\"0.1.0\",\"command\":\"x\"}\n\"" + entry + "\"\n";
    write_text_file(dir / qkv::kLedgerName, ledger);
    try {
      static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}));
      ADD_FAILURE() << "an entry outside the folder was accepted: " << entry;
    } catch (const qkv::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(".qkv-written: lists " + entry), std::string::npos) << e.what();
    }
    EXPECT_EQ(read(victim), "keep");
    EXPECT_EQ(read(dir / qkv::kLedgerName), ledger);
  }
}

namespace {

// A run folder qkv wrote: config.json and checkpoints/last.ckpt.
fs::path written_run(const std::string& name) {
  const fs::path dir = fresh_dir(name);
  const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
  qkv::make_directories((dir / "checkpoints").string());
  qkv::write_file_atomic((dir / "config.json").string(), std::string("{\"a\": 1}"));
  qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("weights"));
  return dir;
}

// --overwrite and --resume are refused with a message containing `needle`,
// and the folder keeps `file` with `contents`.
void expect_untouched(const fs::path& dir, const std::string& needle, const fs::path& file,
                      const std::string& contents) {
  const std::string ledger = read(dir / qkv::kLedgerName);
  for (int resume = 0; resume < 2; ++resume) {
    const auto message = usage_error_of([&] {
      if (resume)
        static_cast<void>(qkv::adopt_output_dir(dir.string(), "--resume", "test"));
      else
        static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}));
    });
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(read(file), contents);
    EXPECT_EQ(read(dir / qkv::kLedgerName), ledger);
    EXPECT_TRUE(fs::exists(dir / "config.json"));
  }
}

}  // namespace

// An output inside finished synthetic data (vnt embed --out RUN/synthetic/emb)
// made the data folder refuse every later use: refused before it is made.
// Inside a run folder, or data not yet finished, an output is fine.
TEST(OutputPolicy, NoOutputIsPlacedInsideSyntheticData) {
  const fs::path dir = fresh_dir("policy_inside_synth");
  {
    const auto claim =
        qkv::claim_synthetic_dir((dir / "data").string(), "--synth-dir", false, {"synth", {{"seed", 1}}});
    qkv::make_directories((dir / "data/cls").string());
    qkv::write_file_atomic((dir / "data/cls/x.off").string(), std::string("OFF"));
  }
  static_cast<void>(qkv::claim_output_file((dir / "data/early.txt").string(), "--out", false, {"test", {}}));
  qkv::mark_output_complete((dir / "data").string());
  const std::string ledger = read(dir / "data" / qkv::kLedgerName);
  for (const fs::path& inside : {dir / "data/emb", dir / "data/cls/deeper/emb"}) {
    const auto message = usage_error_of([&] {
      static_cast<void>(qkv::claim_output_dir(inside.string(), "--out", false, {"test", {}}));
    });
    EXPECT_NE(message.find(": inside " + (dir / "data").string() + ", synthetic data that 'qkv synth' made"),
              std::string::npos)
        << message;
    EXPECT_FALSE(fs::exists(inside));
  }
  const auto message = usage_error_of([&] {
    static_cast<void>(qkv::claim_output_file((dir / "data/emb.npy").string(), "--out", false, {"test", {}}));
  });
  EXPECT_NE(message.find("data/emb.npy: inside "), std::string::npos) << message;
  EXPECT_EQ(read(dir / "data" / qkv::kLedgerName), ledger);
  const fs::path run = written_run("policy_inside_run");
  EXPECT_TRUE(qkv::claim_output_dir((run / "embeddings").string(), "--out", false, {"test", {}}).held());
}

// A folder qkv cannot remove from (immutable, which stops root too, or
// read-only for another user) is found before the first removal: --overwrite
// removes all it must or nothing (config.json went before checkpoints/ failed).
TEST(OutputPolicy, OverwriteRemovesAllItMustOrNothing) {
  const fs::path dir = written_run("policy_locked_folder");
  const std::string ledger = read(dir / qkv::kLedgerName);
  const std::string checkpoints = (dir / "checkpoints").string();
  const bool root = ::geteuid() == 0;
  const std::string lock = root ? "chattr +i " + checkpoints : "chmod a-w " + checkpoints;
  if (std::system((lock + " 2>/dev/null").c_str()) != 0) GTEST_SKIP() << "cannot lock a folder here: " << lock;
  const auto message = qkv::testing::data_error_of([&] {
    static_cast<void>(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}));
  });
  ASSERT_EQ(std::system(((root ? "chattr -i " : "chmod u+w ") + checkpoints).c_str()), 0);
  EXPECT_NE(message.find("checkpoints/last.ckpt: cannot remove (written by qkv)"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing was removed"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "config.json"), "{\"a\": 1}");
  EXPECT_EQ(read(dir / "checkpoints/last.ckpt"), "weights");
  EXPECT_EQ(read(dir / qkv::kLedgerName), ledger);
}

TEST(OutputPolicy, TheLedgerRecordsWhatQkvWroteAndAChangedFileIsNotQkvs) {
  // Each write records the file's length and CRC-32: a file replaced or
  // edited since is refused, naming it, and nothing is removed.
  const fs::path dir = written_run("policy_changed");
  EXPECT_NE(read(dir / qkv::kLedgerName).find("\"crc32\""), std::string::npos);
  write_text_file(dir / "checkpoints/last.ckpt", "the user's own");
  expect_untouched(dir, "last.ckpt: changed since qkv wrote it", dir / "checkpoints/last.ckpt", "the user's own");
  write_text_file(dir / "checkpoints/last.ckpt", "weightz");  // same length, other bytes
  expect_untouched(dir, "last.ckpt: changed since qkv wrote it", dir / "checkpoints/last.ckpt", "weightz");
  // Put back as written: qkv's again.
  write_text_file(dir / "checkpoints/last.ckpt", "weights");
  EXPECT_TRUE(overwritten(dir, "test"));
  EXPECT_FALSE(fs::exists(dir / "checkpoints/last.ckpt"));
}

TEST(OutputPolicy, AUserFileAddedToTheLedgerIsNeverDeleted) {
  // A name added by hand, without a record or with a made-up one.
  const fs::path dir = written_run("policy_added");
  write_text_file(dir / "user_notes.txt", "mine");
  const std::string original = read(dir / qkv::kLedgerName);
  write_text_file(dir / qkv::kLedgerName, original + "\"user_notes.txt\"\n");
  expect_untouched(dir, "user_notes.txt: listed in qkv's ledger without a record", dir / "user_notes.txt", "mine");
  write_text_file(dir / qkv::kLedgerName,
                  original + "{\"file\":\"user_notes.txt\",\"bytes\":4,\"crc32\":\"00000000\"}\n");
  expect_untouched(dir, "user_notes.txt: changed since qkv wrote it", dir / "user_notes.txt", "mine");
}

TEST(OutputPolicy, HardLinksAndNonFilesAreRefused) {
  const fs::path dir = written_run("policy_links");
  const fs::path elsewhere = fs::path(fresh_dir("policy_links_elsewhere")) / "same.ckpt";
  fs::create_directories(elsewhere.parent_path());
  fs::create_hard_link(dir / "checkpoints/last.ckpt", elsewhere);
  expect_untouched(dir, "last.ckpt: has 2 hard links", elsewhere, "weights");
  fs::remove(elsewhere);
  fs::remove(dir / "checkpoints/last.ckpt");
  ASSERT_EQ(::mkfifo((dir / "checkpoints/last.ckpt").c_str(), 0600), 0);
  expect_untouched(dir, "last.ckpt: is a device, pipe or socket", dir / "config.json", "{\"a\": 1}");
  EXPECT_TRUE(fs::is_fifo(dir / "checkpoints/last.ckpt"));
}

TEST(OutputPolicy, AWriteInterruptedBeforeItsRenameLeavesAFileTheLedgerRecords) {
  // The record is appended before the rename: a crash between the two leaves
  // the earlier contents, which an earlier line records.
  const fs::path dir = written_run("policy_crash");
  const std::string ledger = read(dir / qkv::kLedgerName);
  write_text_file(dir / qkv::kLedgerName,
                  ledger + "{\"file\":\"checkpoints/last.ckpt\",\"bytes\":3,\"crc32\":\"12345678\"}\n");
  EXPECT_TRUE(overwritten(dir, "test"));
  EXPECT_FALSE(fs::exists(dir / "checkpoints/last.ckpt"));
}

TEST(OutputPolicy, ResumeNeedsTheFolderTheCommandMade) {
  const fs::path dir = written_run("policy_resume");
  expect_usage_error([&] { static_cast<void>(qkv::adopt_output_dir(dir.string(), "--resume", "other train")); },
                     "made by 'qkv test', not by 'qkv other train'");
  expect_usage_error([&] { static_cast<void>(qkv::adopt_output_dir((dir / "missing").string(), "--resume", "test")); },
                     "missing: no such folder");
  const auto claim = qkv::adopt_output_dir(dir.string(), "--resume", "test");
  qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("epoch 2"));  // listed, unchanged
  EXPECT_EQ(read(dir / "checkpoints/last.ckpt"), "epoch 2");
}

TEST(OutputPolicy, TheTemporarySweepRemovesOnlyTemporariesOfListedFiles) {
  const fs::path dir = written_run("policy_sweep");
  for (const char* name : {"checkpoints/.last.ckpt.tmp.Ab12cD", "checkpoints/.notes.txt.tmp.Ab12cD",
                           ".config.json.tmp.000000", ".mine.tmp.zzzzzz", "..qkv-written.tmp.Ab12cD"})
    write_text_file(dir / name, "x");
  const auto removed = qkv::remove_stale_temps_of_ledger(dir.string());
  EXPECT_EQ(removed.size(), 3u);
  EXPECT_FALSE(fs::exists(dir / "..qkv-written.tmp.Ab12cD"));  // the ledger's own
  EXPECT_FALSE(fs::exists(dir / "checkpoints/.last.ckpt.tmp.Ab12cD"));
  EXPECT_FALSE(fs::exists(dir / ".config.json.tmp.000000"));
  EXPECT_TRUE(fs::exists(dir / "checkpoints/.notes.txt.tmp.Ab12cD"));
  EXPECT_TRUE(fs::exists(dir / ".mine.tmp.zzzzzz"));
}

// A claim killed between making its folder and renaming its first ledger
// into place left only the ledger's temporary: that folder was refused for
// good, even with --overwrite or --resume. It is qkv's, and empty.
TEST(OutputPolicy, AKilledClaimsLedgerTemporaryIsNothingToKeep) {
  const fs::path dir = fresh_dir("policy_killed_claim");
  write_text_file(dir / "..qkv-written.tmp.Ab12cD", "{\"command\":\"te");
  EXPECT_NO_THROW(qkv::check_output_dir(dir.string(), "--out", false, "test"));
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    EXPECT_FALSE(claim.replaced());
    EXPECT_FALSE(fs::exists(dir / "..qkv-written.tmp.Ab12cD"));
    qkv::write_file_atomic((dir / "first.txt").string(), std::string("new"));
  }
  EXPECT_EQ(qkv::ledger_files(dir.string()), std::vector<std::string>{"first.txt"});
  // A user's file of that form that is not a regular file is no temporary.
  const fs::path other = fresh_dir("policy_killed_claim_dir");
  fs::create_directories(other / "..qkv-written.tmp.Ab12cD");
  write_text_file(other / "..qkv-written.tmp.Ab12cD/mine.txt", "mine");
  EXPECT_THROW(qkv::check_output_dir(other.string(), "--out", true, "test"), qkv::UsageError);
}

// A ledger line cut short (a full disk) had stayed torn: the ledger was
// untrusted for good and the next entry glued onto it. The line is cut off,
// so the ledger is as before the failed write. (A file-size limit in a child
// gives the short write a full disk does.)
TEST(OutputPolicy, ALedgerLineCutShortIsCutOff) {
  const fs::path dir = fresh_dir("policy_torn_line");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::write_file_atomic((dir / "a.txt").string(), std::string("a"));
  }
  const std::string before = read(dir / qkv::kLedgerName);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{static_cast<rlim_t>(before.size() + 10), static_cast<rlim_t>(before.size() + 10)};
    setrlimit(RLIMIT_FSIZE, &limit);
    bool refused = false;
    try {
      const auto claim = qkv::claim_output_file((dir / "b.txt").string(), "--output", false, {"export", {}});
      qkv::write_file_atomic((dir / "b.txt").string(), std::string("b"));  // its entry takes > 10 bytes
    } catch (const qkv::DataError&) {
      refused = true;
    }
    _exit(refused ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(read(dir / qkv::kLedgerName), before);
  EXPECT_FALSE(fs::exists(dir / "b.txt"));
  {  // the folder is still qkv's to overwrite
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}});
    qkv::write_file_atomic((dir / "c.txt").string(), std::string("c"));
  }
  EXPECT_EQ(qkv::ledger_files(dir.string()), std::vector<std::string>{"c.txt"});
}

// A command that fails after its claim and before its first write leaves
// nothing: the ledger goes, and the folder where the claim made it.
TEST(OutputPolicy, AnUnusedClaimIsReleasedWithoutTouchingAnythingElse) {
  const fs::path made = fresh_dir("policy_release_made");
  auto claim = qkv::claim_output_dir(made.string(), "--out", false, {"test", {}});
  claim.release_if_unused(true);
  EXPECT_FALSE(claim.held());
  EXPECT_FALSE(fs::exists(made));
  // A folder that existed (empty) stays, without a ledger.
  const fs::path existed = fresh_dir("policy_release_existed");
  fs::create_directories(existed);
  claim = qkv::claim_output_dir(existed.string(), "--out", false, {"test", {}});
  claim.release_if_unused(false);
  EXPECT_TRUE(fs::is_directory(existed));
  EXPECT_TRUE(fs::is_empty(existed));
  // Once something is written, nothing is removed.
  const fs::path used = fresh_dir("policy_release_used");
  claim = qkv::claim_output_dir(used.string(), "--out", false, {"test", {}});
  qkv::write_file_atomic((used / "config.json").string(), std::string("{}"));
  claim.release_if_unused(true);
  EXPECT_EQ(read(used / "config.json"), "{}");
  EXPECT_EQ(qkv::ledger_files(used.string()), (std::vector<std::string>{"config.json"}));
  // Nor where a user put a file since the claim.
  const fs::path mine = fresh_dir("policy_release_mine");
  claim = qkv::claim_output_dir(mine.string(), "--out", false, {"test", {}});
  write_text_file((mine / "notes.txt").string(), "mine");
  claim.release_if_unused(true);
  EXPECT_EQ(read(mine / "notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(mine / qkv::kLedgerName));
}

// A claim lasts as long as its holder: writes below it are recorded while it
// is held and not after, so that a process running several commands (tests,
// the Python package) carries no claim of one into the next.
TEST(OutputPolicy, AClaimEndsWithItsHolder) {
  const fs::path dir = fresh_dir("policy_scope");
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::write_file_atomic((dir / "a.txt").string(), std::string("a"));
  }
  qkv::write_file_atomic((dir / "b.txt").string(), std::string("b"));
  EXPECT_EQ(qkv::ledger_files(dir.string()), (std::vector<std::string>{"a.txt"}));
  // Two files of one folder: each claim holds the folder's one record, which
  // lasts until the last of them ends.
  const fs::path files = fresh_dir("policy_scope_files");
  auto first = qkv::claim_output_file((files / "x.ply").string(), "--out", false, {"test", {}});
  {
    const auto second = qkv::claim_output_file((files / "x.png").string(), "--out", false, {"test", {}});
    qkv::write_file_atomic((files / "x.ply").string(), std::string("ply"));
    qkv::write_file_atomic((files / "x.png").string(), std::string("png"));
  }
  qkv::write_file_atomic((files / "x.ply").string(), std::string("ply, again"));
  first = qkv::OutputClaim();
  qkv::write_file_atomic((files / "notes.txt").string(), std::string("not watched"));
  EXPECT_EQ(qkv::ledger_files(files.string()), (std::vector<std::string>{"x.ply", "x.png"}));
  EXPECT_EQ(read(files / qkv::kLedgerName).find("notes.txt"), std::string::npos);
  // A claim inside another (a synthetic folder inside a run folder) records
  // its own writes; once it ends, the outer one records them.
  const fs::path outer = fresh_dir("policy_scope_outer");
  const auto run = qkv::claim_output_dir(outer.string(), "--out", false, {"test", {}});
  {
    const auto inner = qkv::claim_output_dir((outer / "synthetic").string(), "--synth-dir", false, {"synth", {}});
    qkv::write_file_atomic((outer / "synthetic/s.off").string(), std::string("OFF"));
  }
  qkv::write_file_atomic((outer / "synthetic/t.off").string(), std::string("OFF"));
  EXPECT_EQ(qkv::ledger_files((outer / "synthetic").string()), (std::vector<std::string>{"s.off"}));
  EXPECT_EQ(qkv::ledger_files(outer.string()), (std::vector<std::string>{"synthetic/t.off"}));
}

TEST(OutputPolicy, QkvDeletesOnlyItsOwnUnchangedFilesBelowAHeldClaim) {
  const fs::path dir = fresh_dir("policy_remove");
  const std::string own = (dir / "run/last.ckpt").string(), user = (dir / "notes.txt").string();
  {
    const auto claim = qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
    qkv::make_directories((dir / "run").string());
    qkv::write_file_atomic(own, std::string("weights"));
    std::ofstream(user) << "mine";                             // the user's, beside qkv's
    EXPECT_THROW(qkv::remove_own_file(user), qkv::DataError);  // not listed: the user's
    EXPECT_TRUE(fs::exists(user));
    qkv::remove_own_file(own);
    EXPECT_FALSE(fs::exists(own));
    qkv::remove_own_file(own);  // already gone: nothing to do
    qkv::write_file_atomic(own, std::string("weights"));
    std::ofstream(own) << "edited by hand";
    EXPECT_THROW(qkv::remove_own_file(own), qkv::DataError);  // changed since qkv wrote it
    EXPECT_EQ(read(own), "edited by hand");
  }
  qkv::write_file_atomic((dir / "other.txt").string(), std::string("x"));  // no claim held now
  EXPECT_THROW(qkv::remove_own_file((dir / "other.txt").string()), qkv::DataError);
  EXPECT_TRUE(fs::exists(dir / "other.txt"));
}
