// --resume continues a run with its stored settings: only where and how long it
// goes on may be given; the run records each resume in config.json beside the
// original settings. And what a train command prints: a short summary, or the
// whole summary JSON with --json.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_run.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;

const std::string kResumableSpirals = "spirals train --points-per-arm 60 --batch-size 16 --threads 1";

// The command's stdout alone (stderr dropped) and its exit status.
CliResult run_stdout(const std::string& args) { return qkv::testing::run_qkv_stderr_to(args, "/dev/null"); }

// Relative path -> bytes of every file below `root`.
std::map<std::string, std::string> file_bytes(const std::string& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) files[fs::relative(e.path(), root).generic_string()] = read_text(e.path().string());
  return files;
}

}  // namespace

TEST(Resume, KeepsTheStoredSettingsAndRecordsEachResume) {
  const std::string dir = fresh_dir("resume_spirals");
  const auto first = run_qkv(kResumableSpirals + " --epochs 2 --out " + dir);
  ASSERT_EQ(first.status, 0) << first.output;

  // How the run trains cannot be changed on resume; the run is left as it was.
  const auto before = file_bytes(dir);
  const auto lr = run_qkv("spirals train --resume " + dir + " --lr 0.1 --epochs 3 --threads 1");
  expect_clean_failure(lr, 2, "--lr");
  EXPECT_TRUE(file_bytes(dir) == before) << "a refused --resume changed the run folder";
  expect_clean_failure(run_qkv("spirals train --resume " + dir + " --hidden 8 --epochs 3"), 2, "--hidden");
  EXPECT_TRUE(file_bytes(dir) == before);

  const auto resumed = run_stdout("spirals train --resume " + dir + " --epochs 3 --threads 1 --json");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(nlohmann::json::parse(resumed.output).at("epochs"), 3) << resumed.output;

  const auto config = read_json(dir + "/config.json");
  EXPECT_EQ(config.at("train").at("epochs"), 2) << config.dump(2);
  ASSERT_TRUE(config.contains("resumes")) << config.dump(2);
  const auto& resumes = config.at("resumes");
  ASSERT_EQ(resumes.size(), 1u) << config.dump(2);
  EXPECT_EQ(resumes[0].at("epochs"), 3);
  EXPECT_EQ(resumes[0].at("from_epoch"), 2);
  for (const char* key : {"qkv_version", "time", "threads"}) EXPECT_TRUE(resumes[0].contains(key)) << key;
  EXPECT_EQ(read_json(dir + "/summary.json").at("epochs"), 3);
  fs::remove_all(dir);
}

TEST(Resume, ShortSummaryOrTheWholeJson) {
  const std::string dir = fresh_dir("resume_output");
  const auto plain = run_stdout(kResumableSpirals + " --epochs 1 --out " + dir + "/plain");
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_GE(count_lines(plain.output), 1) << plain.output;
  EXPECT_LE(count_lines(plain.output), 8) << plain.output;
  EXPECT_EQ(plain.output.find('{'), std::string::npos) << plain.output;

  const auto json = run_stdout(kResumableSpirals + " --epochs 1 --json --out " + dir + "/json");
  ASSERT_EQ(json.status, 0) << json.output;
  nlohmann::json summary;
  ASSERT_NO_THROW(summary = nlohmann::json::parse(json.output)) << json.output;
  EXPECT_TRUE(summary.contains("test")) << json.output;
  EXPECT_EQ(summary, read_json(dir + "/json/summary.json"));
  fs::remove_all(dir);
}

}  // namespace qkv::testing
