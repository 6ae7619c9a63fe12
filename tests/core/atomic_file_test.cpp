#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/runtime/runtime.h"
#include "support/test_files.h"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <cstdlib>

namespace fs = std::filesystem;

namespace {

// A fresh, existing folder.
fs::path make_fresh_dir(const std::string& name) {
  fs::path dir = qkv::testing::fresh_dir("core_" + name);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(AtomicFile, ReplacesContentsAndLeavesNoTemporaries) {
  auto dir = make_fresh_dir("replace");
  const auto path = (dir / "a.json").string();
  qkv::write_file_atomic(path, std::string("first"));
  qkv::write_file_atomic(path, std::string("second, longer"));
  EXPECT_EQ(slurp(path), "second, longer");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFile, FailureKeepsThePreviousVersionAndNamesTheFile) {
  auto dir = make_fresh_dir("fail");
  const auto path = (dir / "kept.txt").string();
  qkv::write_file_atomic(path, std::string("precious"));
  // A folder in the way of the rename: the write must fail and the old data stay.
  const auto blocked = (dir / "blocked").string();
  fs::create_directories(blocked + "/inside");
  try {
    qkv::write_file_atomic(blocked, std::string("x"));
    FAIL() << "expected DataError";
  } catch (const qkv::DataError& e) {
    EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), "precious");
  EXPECT_TRUE(fs::is_directory(blocked + "/inside"));
}

// Hidden files named like write_file_atomic's temporaries.
std::vector<std::string> temporaries_in(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (qkv::is_atomic_temp_name(e.path().filename().string())) found.push_back(e.path().filename().string());
  return found;
}

TEST(AtomicFile, AFailedRenameRemovesItsTemporary) {
  auto dir = make_fresh_dir("fail_tmp");
  fs::create_directories(dir / "blocked" / "inside");
  EXPECT_THROW(qkv::write_file_atomic((dir / "blocked").string(), std::string("x")), qkv::DataError);
  EXPECT_TRUE(temporaries_in(dir).empty());
}

TEST(AtomicFile, StaleTemporariesAreRemovedByExactNameOnly) {
  auto dir = make_fresh_dir("stale");
  const std::vector<std::string> ours = {".last.ckpt.tmp.Ab12cD", ".config.json.tmp.000000", ".a.tmp.zzzzzz"};
  // A user's files that only look alike: other lengths, no leading dot, other
  // letters, an empty NAME, a folder and a link; and a temporary's form for a
  // file that is not a target.
  const std::vector<std::string> theirs = {".last.ckpt.tmp.Ab12c",
                                           ".last.ckpt.tmp.Ab12cDe",
                                           "last.ckpt.tmp.Ab12cD",
                                           ".last.ckpt.tmp.Ab-2cD",
                                           ".tmp.Ab12cD",
                                           ".last.ckpt.TMP.Ab12cD",
                                           "notes.txt",
                                           ".notes.txt.tmp.Ab12cD"};
  for (const auto& n : ours) std::ofstream(dir / n) << "half";
  for (const auto& n : theirs) std::ofstream(dir / n) << "mine";
  fs::create_directories(dir / ".folder.tmp.Ab12cD");
  fs::create_symlink(dir / "notes.txt", dir / ".link.tmp.Ab12cD");
  const std::set<std::string> targets = {"last.ckpt", "config.json", "a", "link", "folder"};
  const auto removed = qkv::remove_stale_temp_files(dir.string(), targets);
  EXPECT_EQ(removed.size(), ours.size());
  for (const auto& n : ours) EXPECT_FALSE(fs::exists(dir / n)) << n;
  for (const auto& n : theirs) EXPECT_TRUE(fs::exists(dir / n)) << n;
  EXPECT_TRUE(fs::is_directory(dir / ".folder.tmp.Ab12cD"));
  EXPECT_TRUE(fs::is_symlink(dir / ".link.tmp.Ab12cD"));
  EXPECT_TRUE(qkv::remove_stale_temp_files((dir / "missing").string(), targets).empty());
}

// Not a test on its own: the child of SignalDuringAWriteLeavesNoTemporary,
// which runs this binary again with QKV_TEST_WRITE_LOOP set.
TEST(AtomicFile, WriteLoopChild) {
  const char* dir = std::getenv("QKV_TEST_WRITE_LOOP");
  if (!dir) GTEST_SKIP() << "run by SignalDuringAWriteLeavesNoTemporary";
  const std::string data(32 << 20, 'x');
  for (;;) qkv::write_file_atomic(std::string(dir) + "/big.bin", data);
}

TEST(AtomicFile, SignalDuringAWriteLeavesNoTemporary) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    auto dir = make_fresh_dir("signal" + std::to_string(sig));
    const pid_t pid = fork();
    if (pid == 0) {
      // A shell may start tests with SIGINT ignored, which qkv leaves alone.
      for (int s : {SIGTERM, SIGINT, SIGHUP}) signal(s, SIG_DFL);
      setenv("QKV_TEST_WRITE_LOOP", dir.c_str(), 1);
      execl("/proc/self/exe", "test_core", "--gtest_filter=AtomicFile.WriteLoopChild", nullptr);
      _exit(127);
    }
    // The first write done, the child spends its time inside the next ones.
    for (int i = 0; i < 600 && !fs::exists(dir / "big.bin"); ++i) usleep(50000);
    ASSERT_TRUE(fs::exists(dir / "big.bin"));
    usleep(30000);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    // It still dies of the signal (its parent sees how it ended)...
    ASSERT_TRUE(WIFSIGNALED(status)) << sig;
    EXPECT_EQ(WTERMSIG(status), sig);
    // ...without leaving its temporary behind.
    EXPECT_TRUE(temporaries_in(dir).empty()) << sig << ": " << temporaries_in(dir).front();
    EXPECT_EQ(fs::file_size(dir / "big.bin"), 32u << 20);
    fs::remove_all(dir);
  }
}

TEST(AtomicFile, MissingFolderIsAnErrorNamingTheTarget) {
  try {
    qkv::write_file_atomic("/nonexistent-qkv-dir/x.json", std::string("x"));
    FAIL() << "expected DataError";
  } catch (const qkv::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-qkv-dir/x.json"), std::string::npos);
  }
}

TEST(AtomicFile, ReadMissingFileNamesIt) {
  try {
    qkv::read_file_bytes("/nonexistent-qkv-file.bin");
    FAIL() << "expected DataError";
  } catch (const qkv::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-qkv-file.bin"), std::string::npos);
  }
}

TEST(Runtime, DeviceParsing) {
  EXPECT_TRUE(qkv::parse_device("cpu").is_cpu());
  EXPECT_THROW(qkv::parse_device("tpu"), qkv::UsageError);
  if (!torch::cuda::is_available()) {
    try {
      qkv::parse_device("cuda");
      FAIL() << "expected UsageError";
    } catch (const qkv::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA"), std::string::npos) << e.what();
    }
  }
}

TEST(Runtime, ThreadsReachTorchAndBlas) {
  qkv::set_threads(1);
  EXPECT_EQ(at::get_num_threads(), 1);
  auto info = qkv::blas_info();
  EXPECT_EQ(info.at("torch_threads"), 1);
  // PyTorch's wheels serve sgemm_ from the MKL inside libtorch_cpu.
  if (info.at("library").get<std::string>().find("libtorch_cpu") != std::string::npos) {
    EXPECT_EQ(info.at("name"), "MKL") << info.dump();
    EXPECT_EQ(info.value("summary", "").rfind("MKL 20", 0), 0u) << info.dump();
  }
  if (info.at("name") == "OpenBLAS") {
    EXPECT_EQ(info.at("threads"), 1);
  }
  qkv::set_threads(2);
  EXPECT_EQ(at::get_num_threads(), 2);
  if (info.at("name") == "OpenBLAS") {
    EXPECT_EQ(qkv::blas_info().at("threads"), 2);
  }
  qkv::set_threads(1);
}
