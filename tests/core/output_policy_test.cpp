// The overwrite policy: an existing output is refused without --overwrite;
// with it only what qkv wrote is removed; a file qkv did not write is never
// replaced, even by a later write in a claimed folder.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

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

struct OutputPolicy : ::testing::Test {
  void SetUp() override { qkv::reset_output_claims(); }
  void TearDown() override { qkv::reset_output_claims(); }
};

}  // namespace

TEST_F(OutputPolicy, NewFolderIsCreatedAndRecordsWhatQkvWrites) {
  const fs::path dir = fresh_dir("policy_new") + "/a/b";
  EXPECT_EQ(qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}}), qkv::ClaimResult::Fresh);
  qkv::make_directories((dir / "sub").string());
  qkv::write_file_atomic((dir / "sub/x.txt").string(), std::string("x"));
  qkv::write_file_atomic((dir / "y.txt").string(), std::string("y"));
  qkv::write_file_atomic((dir / "y.txt").string(), std::string("y2"));  // its own file: replaced
  const auto files = qkv::ledger_files(dir.string());
  EXPECT_EQ(files, (std::vector<std::string>{"sub/x.txt", "y.txt"}));
  EXPECT_EQ(qkv::read_output_marker(dir.string()).value("command", ""), "test");
}

TEST_F(OutputPolicy, ExistingFolderIsRefusedWithoutOverwriteAndNothingChanges) {
  const fs::path dir = fresh_dir("policy_refuse");
  qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
  qkv::write_file_atomic((dir / "result.txt").string(), std::string("first"));
  qkv::reset_output_claims();
  const auto message = usage_error_of([&] { qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}}); });
  EXPECT_NE(message.find("--out " + dir.string()), std::string::npos) << message;
  EXPECT_NE(message.find("add overwrite"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "result.txt"), "first");
}

TEST_F(OutputPolicy, OverwriteRemovesOnlyQkvsFiles) {
  const fs::path dir = fresh_dir("policy_overwrite");
  qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
  qkv::make_directories((dir / "checkpoints").string());
  qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("old"));
  qkv::write_file_atomic((dir / "summary.json").string(), std::string("{}"));
  qkv::reset_output_claims();
  write_text_file(dir / "notes.txt", "mine");
  write_text_file(dir / "checkpoints/keep.me", "mine too");
  EXPECT_EQ(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}), qkv::ClaimResult::Replaced);
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  EXPECT_FALSE(fs::exists(dir / "checkpoints/last.ckpt"));
  EXPECT_EQ(read(dir / "notes.txt"), "mine");
  EXPECT_EQ(read(dir / "checkpoints/keep.me"), "mine too");
  EXPECT_TRUE(qkv::ledger_files(dir.string()).empty());
}

TEST_F(OutputPolicy, AFolderQkvDidNotWriteIsRefusedEvenWithOverwrite) {
  const fs::path dir = fresh_dir("policy_foreign");
  write_text_file(dir / "config.json", "{\"mine\": true}");
  const auto message = usage_error_of([&] { qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}); });
  EXPECT_NE(message.find("holds nothing qkv wrote"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "config.json"), "{\"mine\": true}");
  EXPECT_FALSE(fs::exists(dir / qkv::kLedgerName));
}

TEST_F(OutputPolicy, AWriteNeverReplacesAFileQkvDidNotWrite) {
  const fs::path dir = fresh_dir("policy_guard");
  qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
  qkv::reset_output_claims();
  write_text_file(dir / "report.html", "the user's");
  qkv::adopt_output_dir(dir.string(), "--resume", "test");
  const auto message = qkv::testing::data_error_of(
      [&] { qkv::write_file_atomic((dir / "report.html").string(), std::string("qkv's")); });
  EXPECT_NE(message.find("was not written by qkv"), std::string::npos) << message;
  EXPECT_EQ(read(dir / "report.html"), "the user's");
}

TEST_F(OutputPolicy, OneOutputFileIsReplacedOnlyIfQkvWroteIt) {
  const fs::path dir = fresh_dir("policy_file");
  const auto mine = (dir / "predictions.csv").string();
  qkv::claim_output_file(mine, "--out", false, {"test", {}});
  qkv::write_file_atomic(mine, std::string("a,b\n"));
  qkv::reset_output_claims();
  EXPECT_NE(usage_error_of([&] { qkv::claim_output_file(mine, "--out", false, {"test", {}}); }).find("add overwrite"),
            std::string::npos);
  qkv::claim_output_file(mine, "--out", true, {"test", {}});
  qkv::write_file_atomic(mine, std::string("c,d\n"));
  EXPECT_EQ(read(mine), "c,d\n");

  const auto users = (dir / "theirs.csv").string();
  qkv::reset_output_claims();  // the user's file, written outside qkv's claim
  write_text_file(users, "keep");
  const auto message = usage_error_of([&] { qkv::claim_output_file(users, "--out", true, {"test", {}}); });
  EXPECT_NE(message.find("was not written by qkv"), std::string::npos) << message;
  EXPECT_EQ(read(users), "keep");
}

TEST_F(OutputPolicy, SyntheticFolderIsReusedRegeneratedOrRefused) {
  const fs::path dir = fresh_dir("policy_synth");
  const qkv::OutputMarker a{"synth", {{"seed", 1}}}, b{"synth", {{"seed", 2}}};
  EXPECT_TRUE(qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a));
  qkv::make_directories((dir / "cls").string());
  qkv::write_file_atomic((dir / "cls/x.off").string(), std::string("OFF"));
  // Unfinished: made again, even with the same settings.
  qkv::reset_output_claims();
  EXPECT_TRUE(qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a, /*check_only=*/true));
  qkv::mark_output_complete(dir.string());
  qkv::reset_output_claims();
  EXPECT_FALSE(qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, a));  // same settings: reused
  qkv::reset_output_claims();
  EXPECT_NE(usage_error_of([&] { qkv::claim_synthetic_dir(dir.string(), "--synth-dir", false, b); })
                .find("other settings"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "cls/x.off"));
  // A file the user put there is never loaded as data nor deleted.
  write_text_file(dir / "notes.txt", "mine");
  for (bool overwrite : {false, true}) {
    qkv::reset_output_claims();
    const auto message = usage_error_of([&] { qkv::claim_synthetic_dir(dir.string(), "--synth-dir", overwrite, b); });
    EXPECT_NE(message.find("notes.txt"), std::string::npos) << message;
  }
  EXPECT_TRUE(fs::exists(dir / "cls/x.off"));
  EXPECT_EQ(read(dir / "notes.txt"), "mine");
}

TEST_F(OutputPolicy, LedgerEntriesCannotReachOutsideTheFolder) {
  const fs::path dir = fresh_dir("policy_escape");
  const fs::path victim = fs::path(fresh_dir("policy_victim")) / "precious.txt";
  write_text_file(victim, "keep");
  const auto relative = victim.lexically_relative(dir).generic_string();  // "../qkv_test_policy_victim_N/precious.txt"
  // An edited ledger is refused as a whole, naming it, before anything is
  // removed or rewritten.
  for (const std::string& entry : {relative, victim.string()}) {
    const std::string ledger = "{\"command\":\"x\"}\n\"" + entry + "\"\n";
    write_text_file(dir / qkv::kLedgerName, ledger);
    try {
      qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}});
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
  qkv::claim_output_dir(dir.string(), "--out", false, {"test", {}});
  qkv::make_directories((dir / "checkpoints").string());
  qkv::write_file_atomic((dir / "config.json").string(), std::string("{\"a\": 1}"));
  qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("weights"));
  qkv::reset_output_claims();
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
        qkv::adopt_output_dir(dir.string(), "--resume", "test");
      else
        qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}});
    });
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(read(file), contents);
    EXPECT_EQ(read(dir / qkv::kLedgerName), ledger);
    EXPECT_TRUE(fs::exists(dir / "config.json"));
  }
}

}  // namespace

TEST_F(OutputPolicy, TheLedgerRecordsWhatQkvWroteAndAChangedFileIsNotQkvs) {
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
  EXPECT_EQ(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}), qkv::ClaimResult::Replaced);
  EXPECT_FALSE(fs::exists(dir / "checkpoints/last.ckpt"));
}

TEST_F(OutputPolicy, AUserFileAddedToTheLedgerIsNeverDeleted) {
  // A name added by hand, without a record or with a made-up one.
  const fs::path dir = written_run("policy_added");
  write_text_file(dir / "user_notes.txt", "mine");
  const std::string original = read(dir / qkv::kLedgerName);
  write_text_file(dir / qkv::kLedgerName, original + "\"user_notes.txt\"\n");
  expect_untouched(dir, "user_notes.txt: listed in qkv's ledger without a record", dir / "user_notes.txt", "mine");
  write_text_file(dir / qkv::kLedgerName, original + "{\"file\":\"user_notes.txt\",\"bytes\":4,\"crc32\":\"00000000\"}\n");
  expect_untouched(dir, "user_notes.txt: changed since qkv wrote it", dir / "user_notes.txt", "mine");
}

TEST_F(OutputPolicy, HardLinksAndNonFilesAreRefused) {
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

TEST_F(OutputPolicy, AWriteInterruptedBeforeItsRenameLeavesAFileTheLedgerRecords) {
  // The record is appended before the rename: a crash between the two leaves
  // the earlier contents, which an earlier line records.
  const fs::path dir = written_run("policy_crash");
  const std::string ledger = read(dir / qkv::kLedgerName);
  write_text_file(dir / qkv::kLedgerName,
                  ledger + "{\"file\":\"checkpoints/last.ckpt\",\"bytes\":3,\"crc32\":\"12345678\"}\n");
  EXPECT_EQ(qkv::claim_output_dir(dir.string(), "--out", true, {"test", {}}), qkv::ClaimResult::Replaced);
  EXPECT_FALSE(fs::exists(dir / "checkpoints/last.ckpt"));
}

TEST_F(OutputPolicy, ResumeNeedsTheFolderTheCommandMade) {
  const fs::path dir = written_run("policy_resume");
  expect_usage_error([&] { qkv::adopt_output_dir(dir.string(), "--resume", "other train"); },
                     "made by 'qkv test', not by 'qkv other train'");
  expect_usage_error([&] { qkv::adopt_output_dir((dir / "missing").string(), "--resume", "test"); },
                     "missing: no such folder");
  qkv::adopt_output_dir(dir.string(), "--resume", "test");
  qkv::write_file_atomic((dir / "checkpoints/last.ckpt").string(), std::string("epoch 2"));  // listed, unchanged
  EXPECT_EQ(read(dir / "checkpoints/last.ckpt"), "epoch 2");
}

TEST_F(OutputPolicy, TheTemporarySweepRemovesOnlyTemporariesOfListedFiles) {
  const fs::path dir = written_run("policy_sweep");
  for (const char* name : {"checkpoints/.last.ckpt.tmp.Ab12cD", "checkpoints/.notes.txt.tmp.Ab12cD",
                           ".config.json.tmp.000000", ".mine.tmp.zzzzzz"})
    write_text_file(dir / name, "x");
  const auto removed = qkv::remove_stale_temps_of_ledger(dir.string());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(dir / "checkpoints/.last.ckpt.tmp.Ab12cD"));
  EXPECT_FALSE(fs::exists(dir / ".config.json.tmp.000000"));
  EXPECT_TRUE(fs::exists(dir / "checkpoints/.notes.txt.tmp.Ab12cD"));
  EXPECT_TRUE(fs::exists(dir / ".mine.tmp.zzzzzz"));
}

// A command that fails after its claim and before its first write leaves
// nothing: the ledger goes, and the folder where the claim made it.
TEST_F(OutputPolicy, AnUnusedClaimIsReleasedWithoutTouchingAnythingElse) {
  const fs::path made = fresh_dir("policy_release_made");
  qkv::claim_output_dir(made.string(), "--out", false, {"test", {}});
  qkv::release_unused_output_dir(made.string(), true);
  EXPECT_FALSE(fs::exists(made));
  // A folder that existed (empty) stays, without a ledger.
  const fs::path existed = fresh_dir("policy_release_existed");
  fs::create_directories(existed);
  qkv::claim_output_dir(existed.string(), "--out", false, {"test", {}});
  qkv::release_unused_output_dir(existed.string(), false);
  EXPECT_TRUE(fs::is_directory(existed));
  EXPECT_TRUE(fs::is_empty(existed));
  // Once something is written, or where a user's file lies, nothing is removed.
  const fs::path used = fresh_dir("policy_release_used");
  qkv::claim_output_dir(used.string(), "--out", false, {"test", {}});
  qkv::write_file_atomic((used / "config.json").string(), std::string("{}"));
  qkv::release_unused_output_dir(used.string(), true);
  EXPECT_EQ(read(used / "config.json"), "{}");
  EXPECT_EQ(qkv::ledger_files(used.string()), (std::vector<std::string>{"config.json"}));
  const fs::path mine = fresh_dir("policy_release_mine");
  write_text_file((mine / "notes.txt").string(), "mine");
  qkv::release_unused_output_dir(mine.string(), true);
  EXPECT_EQ(read(mine / "notes.txt"), "mine");
}
