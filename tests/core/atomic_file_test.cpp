#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/runtime.h"
#include "support/test_files.h"

#include <nlohmann/json.hpp>

#include <torch/cuda.h>
#include <unistd.h>

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
  if (info.at("name") == "OpenBLAS") EXPECT_EQ(info.at("threads"), 1);
  qkv::set_threads(2);
  EXPECT_EQ(at::get_num_threads(), 2);
  if (info.at("name") == "OpenBLAS") EXPECT_EQ(qkv::blas_info().at("threads"), 2);
  qkv::set_threads(1);
}
