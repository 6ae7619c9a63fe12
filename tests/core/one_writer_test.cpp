// What keeps a user's data whole when commands meet in the field: an output
// is never one of the command's inputs, a folder has one writer at a time
// (another process is refused, naming it; a dead one's folder is taken over),
// and every input is read as a regular file of bounded size.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::testing::data_error_of;
using qkv::testing::fresh_dir;
using qkv::testing::usage_error_of;
using qkv::testing::write_text_file;

TEST(OutputsApart, AnOutputThatIsHoldsOrLiesInsideAnInputIsRefused) {
  const fs::path root = fresh_dir("apart");
  const fs::path cohort = root / "cohort";
  write_text_file(cohort / "manifest.csv", "subject_id,label,spect\n");
  write_text_file(root / "elsewhere.txt", "x");
  const std::vector<qkv::InputPath> inputs = {{"manifest", (cohort / "manifest.csv").string()}, {"cpg_list", ""}};
  // The cohort folder holds the manifest; the manifest itself; a file inside a folder read whole.
  EXPECT_NE(usage_error_of([&] { qkv::check_outputs_apart(cohort.string(), "out", inputs); }).find("holds manifest"),
            std::string::npos);
  EXPECT_NE(usage_error_of([&] {
              qkv::check_outputs_apart((cohort / "manifest.csv").string(), "output", inputs);
            }).find("is manifest"),
            std::string::npos);
  EXPECT_NE(usage_error_of([&] {
              qkv::check_outputs_apart((cohort / "run").string(), "out", {{"source", cohort.string()}});
            }).find("lies inside source"),
            std::string::npos);
  // Through a link to the folder, a "." and "..", and a second hard link.
  fs::create_directory_symlink(cohort, root / "link");
  EXPECT_NE(usage_error_of([&] { qkv::check_outputs_apart((root / "link").string(), "out", inputs); }),
            "(no UsageError)");
  EXPECT_NE(usage_error_of([&] { qkv::check_outputs_apart((cohort / "." / ".." / "cohort").string(), "out", inputs); }),
            "(no UsageError)");
  fs::create_hard_link(cohort / "manifest.csv", root / "same.csv");
  EXPECT_NE(usage_error_of([&] {
              qkv::check_outputs_apart((root / "same.csv").string(), "output", inputs);
            }).find("under another name"),
            std::string::npos);
  // Beside an input (a sibling, a prefix of its name) is fine.
  EXPECT_NO_THROW(qkv::check_outputs_apart((cohort / "predictions.csv").string(), "output", inputs));
  EXPECT_NO_THROW(qkv::check_outputs_apart((root / "cohort2").string(), "out", inputs));
  EXPECT_NO_THROW(qkv::check_outputs_apart((root / "elsewhere.txt").string(), "output", inputs));
  fs::remove_all(root);
}

namespace {

// A child process that claims `dir` as a folder (`whole`) or one file in it,
// says so on a pipe, then waits to be killed. Returns its pid (after the claim).
pid_t claiming_child(const fs::path& dir, bool whole) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    try {
      auto claim = whole ? qkv::claim_output_dir(dir.string(), "out", true, {"vnt train", {}})
                         : qkv::claim_output_file((dir / "a.csv").string(), "output", false, {"mhca predict", {}});
      char ok = 1;
      if (::write(ready[1], &ok, 1) != 1) ::_exit(3);
      ::pause();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char ok = 0;
  const bool claimed = ::read(ready[0], &ok, 1) == 1 && ok == 1;
  ::close(ready[0]);
  return claimed ? pid : -1;
}

std::string read_ledger_text(const fs::path& dir) {
  const auto bytes = qkv::read_file_bytes((dir / qkv::kLedgerName).string());
  return std::string(bytes.begin(), bytes.end());
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace

TEST(OneWriter, ASecondCommandIsRefusedNamingTheHolderAndADeadOnesFolderIsTakenOver) {
  const fs::path dir = fresh_dir("one_writer") + "/run";
  {
    auto first = qkv::claim_output_dir(dir.string(), "out", false, {"vnt train", {}});
    qkv::write_file_atomic((dir / "config.json").string(), std::string("{\"lr\":0.001}"));
  }
  const pid_t holder = claiming_child(dir, /*whole=*/true);
  ASSERT_GT(holder, 0);
  // Refused before anything is removed, naming the process and its command.
  const std::string why = usage_error_of([&] {
    auto c = qkv::claim_output_dir(dir.string(), "out", true, {"vnt train", {}});
  });
  EXPECT_NE(why.find("another qkv command is writing there (process " + std::to_string(holder) + ": "),
            std::string::npos)
      << why;
  const auto ledger_before = read_ledger_text(dir);
  EXPECT_NE(usage_error_of([&] { auto c = qkv::adopt_output_dir(dir.string(), "resume", "vnt train"); }),
            "(no UsageError)");
  EXPECT_NE(usage_error_of([&] {
              auto c = qkv::claim_output_file((dir / "b.csv").string(), "output", false, {"mhca predict", {}});
            }),
            "(no UsageError)");
  // The refusals changed nothing there (not even the ledger).
  EXPECT_EQ(read_ledger_text(dir), ledger_before);
  // The holder killed (no chance to clean up): the next command takes the folder.
  kill_and_reap(holder);
  {
    auto next = qkv::claim_output_dir(dir.string(), "out", true, {"vnt train", {}});
    EXPECT_TRUE(next.held());
  }
  // Files claimed side by side by two commands share the folder; a whole claim waits for both.
  const pid_t writer = claiming_child(dir, /*whole=*/false);
  ASSERT_GT(writer, 0);
  {
    auto beside = qkv::claim_output_file((dir / "b.csv").string(), "output", false, {"mhca predict", {}});
    EXPECT_TRUE(beside.held());
  }
  EXPECT_NE(usage_error_of([&] {
              auto c = qkv::claim_output_dir(dir.string(), "out", true, {"vnt train", {}});
            }),
            "(no UsageError)");
  kill_and_reap(writer);
  // Two claims in one process share the folder's lock (a command writing two files).
  auto a = qkv::claim_output_dir(dir.string(), "out", true, {"vnt train", {}});
  auto b = qkv::claim_output_file((dir / "c.csv").string(), "output", false, {"vnt train", {}});
  EXPECT_TRUE(a.held() && b.held());
  fs::remove_all(dir.parent_path());
}

TEST(InputFiles, OnlyRegularFilesAreReadAndNoMoreThanTheirSize) {
  const fs::path dir = fresh_dir("input_files");
  fs::create_directories(dir);
  const std::string fifo = (dir / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Refused at once (no writer is waited for), one line naming the file.
  EXPECT_NE(data_error_of([&] { qkv::read_regular_file(fifo); }).find(fifo + ": is not a regular file"),
            std::string::npos);
  EXPECT_NE(data_error_of([&] { qkv::read_text_file(fifo); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(data_error_of([&] { qkv::read_file_bytes(fifo); }).find("not a regular file"), std::string::npos);
  fs::create_symlink("/dev/zero", dir / "zero.txt");
  EXPECT_NE(data_error_of([&] { qkv::read_text_file((dir / "zero.txt").string()); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(data_error_of([&] { qkv::read_text_file(dir.string()); }).find("is a folder"), std::string::npos);
  EXPECT_NE(data_error_of([&] { qkv::read_text_file((dir / "missing").string()); }).find("no such file"),
            std::string::npos);
  write_text_file(dir / "a.txt", "hello\n");
  EXPECT_EQ(qkv::read_text_file((dir / "a.txt").string()), "hello\n");
  fs::remove_all(dir);
}

TEST(OutputsApart, ALedgerLineThatCannotBeReadStopsOverwriteBeforeAnythingIsDeleted) {
  // The file a torn line named was found only when the new run wrote it,
  // after the rest of the old run had been deleted.
  const fs::path dir = fresh_dir("torn_ledger") + "/run";
  {
    auto claim = qkv::claim_output_dir(dir.string(), "out", false, {"vnt train", {}});
    qkv::write_file_atomic((dir / "a.txt").string(), std::string("a"));
    qkv::write_file_atomic((dir / "b.txt").string(), std::string("b"));
  }
  {
    std::ofstream ledger(dir / qkv::kLedgerName, std::ios::app);
    ledger << "{\"bytes\":3,\"crc32\":\"0\n";
  }
  const std::string why = usage_error_of([&] {
    auto c = qkv::claim_output_dir(dir.string(), "out", true, {"vnt train", {}});
  });
  EXPECT_NE(why.find(qkv::kLedgerName + std::string(": line 4 cannot be read")), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(dir / "a.txt"));
  EXPECT_TRUE(fs::exists(dir / "b.txt"));
  fs::remove_all(dir.parent_path());
}
