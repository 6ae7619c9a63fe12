// --resume continues a run with its stored settings: only where and how long it
// goes on may be given; the run records each resume in config.json beside the
// original settings. And what a train command prints: a short summary, or the
// whole summary JSON with --json.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/core/output_policy.h"
#include "qkv/models/model.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/optim.h"
#include "qkv/train/trainer.h"
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

TEST(Resume, EpochsNotAboveThoseDoneChangeNothing) {
  // --epochs is the run's total: fewer than done is refused, as many as done
  // (or none given, on a finished run) says there is nothing to do; the run
  // keeps every byte either way.
  const std::string dir = fresh_dir("resume_done");
  ASSERT_EQ(run_qkv(kResumableSpirals + " --epochs 2 --out " + dir).status, 0);
  const auto before = file_bytes(dir);
  expect_clean_failure(run_qkv("spirals train --resume " + dir + " --epochs 1 --threads 1"), 2,
                       "--epochs 1: --resume " + dir + " has already trained 2 epochs");
  EXPECT_EQ(file_bytes(dir), before);
  for (const std::string epochs : {"", " --epochs 2"}) {
    const auto r = run_qkv("spirals train --resume " + dir + epochs + " --threads 1");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("nothing to do: " + dir + " has finished all 2 epochs"), std::string::npos) << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << r.output;
    EXPECT_EQ(file_bytes(dir), before);
  }
  // With --json, stdout is still one document: the finished run's summary.
  const auto json = run_qkv("spirals train --resume " + dir + " --json --threads 1");
  EXPECT_EQ(json.status, 0) << json.output;
  EXPECT_NE(json.output.find("\"selected_epoch\""), std::string::npos) << json.output;
  // Stopped after the last epoch's checkpoint, before the summary: --resume writes it.
  const auto summary = read_json(dir + "/summary.json");
  fs::remove(dir + "/summary.json");
  const auto finished = run_qkv("spirals train --resume " + dir + " --threads 1");
  EXPECT_EQ(finished.status, 0) << finished.output;
  EXPECT_EQ(finished.output.find("nothing to do"), std::string::npos) << finished.output;
  ASSERT_TRUE(fs::exists(dir + "/summary.json")) << finished.output;
  EXPECT_EQ(read_json(dir + "/summary.json").at("test"), summary.at("test"));
  fs::remove_all(dir);
}

TEST(Resume, ADivergedOptimizerStateIsRefusedByName) {
  // A last checkpoint qkv itself wrote (the ledger records it) whose Adam
  // moments hold NaN: resuming would diverge at once.
  const std::string dir = fresh_dir("resume_nan");
  ASSERT_EQ(run_qkv(kResumableSpirals + " --epochs 1 --out " + dir).status, 0);
  const std::string last = dir + "/checkpoints/last.ckpt";
  train::TrainState state = train::read_checkpoint_state(last);
  const auto& stored = state.run_config.at("model");
  auto model = models::find_model(stored.at("name")).make(stored.at("options"));
  auto optimizer =
      train::make_optimizer(model->parameters(), train::TrainConfig::from_json(state.run_config.at("train")).optim);
  train::load_checkpoint(last, *model, optimizer.get());
  int poisoned = 0;
  for (auto& [key, param_state] : optimizer->state()) {
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(param_state.get()))
      adam->exp_avg_sq().view(-1)[0].fill_(NAN), ++poisoned;
    else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(param_state.get()))
      adamw->exp_avg_sq().view(-1)[0].fill_(NAN), ++poisoned;
  }
  ASSERT_GT(poisoned, 0) << "the run's optimizer is neither Adam nor AdamW";
  {
    // Written as qkv writes, so that the ledger records it.
    const auto claim = adopt_output_dir(dir, "--resume", "spirals train");
    train::save_checkpoint(last, *model, optimizer.get(), state);
  }
  const auto before = file_bytes(dir);
  const auto r = run_qkv("spirals train --resume " + dir + " --epochs 2 --threads 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("qkv spirals train: error: " + last + ": 'optimizer/"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exp_avg_sq' holds 1 NaN or infinite value (the run diverged"), std::string::npos)
      << r.output;
  EXPECT_EQ(file_bytes(dir), before);
  fs::remove_all(dir);
}

}  // namespace qkv::testing
