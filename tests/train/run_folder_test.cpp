// train::RunFolder is the one place that decides who may write in a run
// folder: a new run refuses a folder holding anything, --overwrite removes
// only what qkv wrote, --resume continues only what the same command made,
// and a new folder that the data failed to fill is taken back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "qkv/train/run.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;
using train::RunFolder;
using train::RunFolderMode;

void write_user_file(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

TEST(RunFolder, NewRefusesAFolderHoldingAnythingAndNamesTheKey) {
  const fs::path dir = fresh_dir("run_folder_new");
  fs::create_directories(dir);
  write_user_file(dir / "notes.txt", "mine");
  EXPECT_EQ(config_error_key_of([&] { RunFolder::check(dir.string(), RunFolderMode::New, "vnt train"); }), "out");
  EXPECT_EQ(
      config_error_key_of([&] { static_cast<void>(RunFolder::open(dir.string(), RunFolderMode::New, "vnt train")); }),
      "out");
  // Even with overwrite: nothing there is qkv's.
  EXPECT_EQ(config_error_key_of(
                [&] { static_cast<void>(RunFolder::open(dir.string(), RunFolderMode::Overwrite, "vnt train")); }),
            "out");
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  fs::remove_all(dir);
}

TEST(RunFolder, OverwriteRemovesOnlyWhatQkvWrote) {
  const fs::path dir = fs::path(fresh_dir("run_folder_overwrite")) / "run";
  {
    const auto folder = RunFolder::open(dir.string(), RunFolderMode::New, "vnt train");
    EXPECT_EQ(folder.paths().summary(), dir.string() + "/summary.json");
    write_file_atomic(folder.paths().summary(), std::string("{}"));
  }
  write_user_file(dir / "mine.txt", "a user's file");
  const auto folder = RunFolder::open(dir.string(), RunFolderMode::Overwrite, "vnt train");
  EXPECT_TRUE(fs::exists(dir / "summary.json"));  // until the run writes: its data may still be refused
  write_file_atomic(folder.paths().config(), std::string("{}"));
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  EXPECT_TRUE(fs::exists(dir / "mine.txt"));
  // While the folder is held, a write there is refused where a user's file lies.
  EXPECT_THROW(write_file_atomic((dir / "mine.txt").string(), std::string("qkv's")), DataError);
  fs::remove_all(dir.parent_path());
}

TEST(RunFolder, ResumeContinuesOnlyWhatTheSameCommandMade) {
  const fs::path dir = fs::path(fresh_dir("run_folder_resume")) / "run";
  {
    const auto folder = RunFolder::open(dir.string(), RunFolderMode::New, "vnt train");
    write_file_atomic((dir / "summary.json").string(), std::string("{}"));
  }
  EXPECT_EQ(config_error_key_of([&] { RunFolder::check(dir.string(), RunFolderMode::Resume, "seg train", "resume"); }),
            "resume");
  auto folder = RunFolder::open(dir.string(), RunFolderMode::Resume, "vnt train", "resume");
  folder.release_if_unused();  // a resumed folder is never taken back
  EXPECT_TRUE(fs::exists(dir / "summary.json"));
  EXPECT_THROW(train::run_folder_mode(true, true), ConfigError);
  fs::remove_all(dir.parent_path());
}

TEST(RunFolder, ANewFolderTheDataFailedToFillIsTakenBack) {
  const fs::path parent = fresh_dir("run_folder_release");
  fs::create_directories(parent);
  const fs::path created = parent / "new-run";
  RunFolder::open(created.string(), RunFolderMode::New, "vnt train").release_if_unused();
  EXPECT_FALSE(fs::exists(created));
  // An empty folder the user made stays, without qkv's ledger.
  const fs::path made = parent / "made-by-user";
  fs::create_directories(made);
  RunFolder::open(made.string(), RunFolderMode::New, "vnt train").release_if_unused();
  EXPECT_TRUE(fs::exists(made));
  EXPECT_FALSE(fs::exists(made / kLedgerName));
  fs::remove_all(parent);
}

}  // namespace
}  // namespace qkv::testing
