// The lm commands as a user runs them: generate streams its bytes and stops
// cleanly on Ctrl-C, sizes that cannot fit are refused before any allocation,
// cache-size never prints a wrapped number, and a train run clears the
// temporaries a killed checkpoint write left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/cli_run.h"
#include "support/paths.h"
#include "support/test_files.h"

namespace fs = std::filesystem;

namespace qkv::testing {
namespace {

class LmCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(fresh_dir("lm_cli"));
    train_ =
        new CliResult(run_qkv("lm train --task copy --samples 64 --epochs 1 --d-model 16 --heads 2 --layers 1 "
                              "--threads 1 --out " +
                              *dir_));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete train_;
  }
  static std::string checkpoint() { return *dir_ + "/checkpoints/last.ckpt"; }
  static std::string* dir_;
  static CliResult* train_;
};
std::string* LmCli::dir_ = nullptr;
CliResult* LmCli::train_ = nullptr;

// Runs qkv with stdout on a pipe; `on_output` sees the bytes as they arrive
// and may signal the process. Returns the exit status (128 + signal if killed).
int run_piped(const std::vector<std::string>& args, std::string& out,
              const std::function<void(pid_t, const std::string&)>& on_output) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv{const_cast<char*>(qkv::testing::qkv_binary())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(qkv::testing::qkv_binary(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    on_output(pid, out);
  }
  close(fds[0]);
  int raw = 0;
  waitpid(pid, &raw, 0);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

TEST_F(LmCli, GenerateStreamsAndStopsCleanlyOnCtrlC) {
  ASSERT_EQ(train_->status, 0) << train_->output;
  // Far more bytes than it could make before the reader reacts: the first ones
  // must reach the pipe while the rest are still being computed.
  std::string out;
  bool interrupted = false;
  std::string seen_at_interrupt;
  const auto start = std::chrono::steady_clock::now();
  const int status = run_piped({"lm", "generate", "--checkpoint", checkpoint(), "--prompt", "abc|", "--max-new",
                                "100000000", "--temperature", "1", "--threads", "1"},
                               out, [&](pid_t pid, const std::string& so_far) {
                                 if (!interrupted && so_far.size() >= 8) {
                                   interrupted = true;
                                   seen_at_interrupt = so_far;
                                   kill(pid, SIGINT);
                                 }
                               });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(interrupted) << out;
  EXPECT_EQ(status, 130) << out;
  // What was shown stays, and the output ends with a newline.
  EXPECT_EQ(out.compare(0, seen_at_interrupt.size(), seen_at_interrupt), 0);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_LT(seconds, 60.0);
}

TEST_F(LmCli, MaxNewBeyondMemoryIsAUsageError) {
  ASSERT_EQ(train_->status, 0) << train_->output;
  const auto r = run_qkv("lm generate --checkpoint " + checkpoint() + " --prompt a --max-new 1000000000000");
  expect_clean_failure(r, 2, "--max-new 1000000000000");
  EXPECT_NE(r.output.find("at most"), std::string::npos) << r.output;
  expect_clean_failure(
      run_qkv("lm generate --checkpoint " + checkpoint() + " --prompt a --max-new 9223372036854775807"), 2,
      "--max-new 9223372036854775807");
}

TEST_F(LmCli, TrainRemovesOnlyItsOwnStaleTemporaries) {
  ASSERT_EQ(train_->status, 0) << train_->output;
  const std::string ckpts = *dir_ + "/checkpoints";
  // What an interrupted write_file_atomic leaves, and files that only look alike.
  const std::vector<std::string> stale = {".last.ckpt.tmp.Ab12cD", ".best.ckpt.tmp.000000"};
  // The last: named like a temporary of a file qkv never wrote.
  const std::vector<std::string> kept = {".last.ckpt.tmp.keep", "last.ckpt.tmp.Ab12cD", ".notes.tmp.Ab12cD.txt",
                                         ".notes.tmp.Ab12cD"};
  for (const auto& name : stale) std::ofstream(ckpts + "/" + name) << "half";
  for (const auto& name : kept) std::ofstream(ckpts + "/" + name) << "mine";
  const auto r = run_qkv("lm train --resume " + *dir_ + " --epochs 2 --threads 1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const auto& name : stale) EXPECT_FALSE(fs::exists(ckpts + "/" + name)) << name;
  for (const auto& name : kept) EXPECT_TRUE(fs::exists(ckpts + "/" + name)) << name;
}

TEST(LmCacheSize, OverflowIsAUsageErrorNotAWrappedNumber) {
  // Each of these printed 0, a negative or a wrapped byte count before.
  for (const char* sizes :
       {"--layers 4294967296 --heads 4294967296 --dk 1 --dv 1 --seq 1",
        "--layers 9223372036854775807 --heads 1 --dk 1 --dv 1 --seq 1",
        "--layers 1000000 --heads 1000000 --dk 1000000 --dv 1000000 --seq 1000000 --batch-size 1000000"}) {
    const auto r = run_qkv(std::string("lm cache-size ") + sizes);
    expect_clean_failure(r, 2, "--layers");
    EXPECT_NE(r.output.find("--heads"), std::string::npos) << r.output;
  }
  // Near the limit the count is still exact: 2^60 layers of one f16 key and value.
  const auto big = run_qkv("lm cache-size --layers 1152921504606846976 --heads 1 --dk 1 --dv 1 --seq 1 --json");
  ASSERT_EQ(big.status, 0) << big.output;
  EXPECT_EQ(nlohmann::json::parse(big.output).at("total_bytes").get<int64_t>(), int64_t{1} << 62);
}

TEST(LmCacheSize, EverySizeMustBePositive) {
  const std::string base = "lm cache-size --layers 2 --heads 2 --dk 4 --dv 4 --seq 8";
  for (const char* option : {"--layers", "--heads", "--dk", "--dv", "--seq", "--batch-size", "--batch"}) {
    const auto r = run_qkv(base + " " + option + " 0");
    EXPECT_EQ(r.status, 2) << option << ": " << r.output;
    EXPECT_NE(r.output.find(option), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("must be at least 1"), std::string::npos) << r.output;
  }
  EXPECT_NE(run_qkv("lm cache-size --help").output.find("sequence length (>= 1)"), std::string::npos);
}

TEST_F(LmCli, CacheSizeReadsTheCheckpointAndKnowsEverySpelling) {
  ASSERT_EQ(train_->status, 0) << train_->output;
  // The fixture's model: 1 layer, 2 heads of width 8, float32.
  // A prompt that is not UTF-8 is an option's fault: exit 2, naming it.
  expect_clean_failure(run_qkv("lm generate --checkpoint " + checkpoint() + " --prompt \"$(printf 'a\\377')\""), 2,
                       "--prompt: not valid UTF-8 (byte offset 1)");
  const auto r = run_qkv("lm cache-size --checkpoint " + checkpoint() + " --seq 100 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output).at("total_bytes").get<int64_t>(), 1 * 2 * 100 * (8 + 8) * 4);
  const auto int8 = run_qkv("lm cache-size --checkpoint " + checkpoint() + " --seq 100 --dtype int8 --json");
  ASSERT_EQ(int8.status, 0) << int8.output;
  EXPECT_EQ(nlohmann::json::parse(int8.output).at("total_bytes").get<int64_t>(), 1 * 2 * 100 * 2 * (8 + 2));
  expect_clean_failure(run_qkv("lm cache-size --checkpoint " + checkpoint() + " --seq 10 --heads 4"), 2, "--heads");
  // The window too, even 0: the model decodes with its own.
  expect_clean_failure(run_qkv("lm cache-size --checkpoint " + checkpoint() + " --seq 10 --window 0"), 2, "--window");
  expect_clean_failure(run_qkv("lm cache-size --checkpoint " + checkpoint() + " --seq 10 --sinks 2"), 2, "--sinks");
  // --head-dim for both widths, fp16 for f16, windows and kv heads.
  const auto spelled = run_qkv(
      "lm cache-size --layers 2 --heads 8 --kv-heads 2 --head-dim 64 --seq 4096 --window 1000 "
      "--sinks 24 --dtype fp16 --json");
  ASSERT_EQ(spelled.status, 0) << spelled.output;
  EXPECT_EQ(nlohmann::json::parse(spelled.output).at("total_bytes").get<int64_t>(), 2LL * 2 * 1024 * 2 * 64 * 2);
  // A mistyped option is named, not hidden behind a required one.
  const auto typo = run_qkv("lm cache-size --layers 2 --heads 2 --head-dims 64 --seq 8");
  expect_clean_failure(typo, 2, "--head-dims");
  EXPECT_NE(typo.output.find("did you mean --head-dim"), std::string::npos) << typo.output;
  const auto hidden = run_qkv("lm generate --checkpoint " + checkpoint() + " --promt hi");
  expect_clean_failure(hidden, 2, "unknown option --promt");
  EXPECT_NE(hidden.output.find("did you mean --prompt"), std::string::npos) << hidden.output;
  expect_clean_failure(run_qkv("lm cache-size --layers 2 --heads 3 --kv-heads 2 --head-dim 4 --seq 8"), 2,
                       "--kv-heads 2");
  // An odd width for int4 is said as such (it was reported as an 8 EiB overflow).
  expect_clean_failure(run_qkv("lm cache-size --layers 2 --heads 4 --head-dim 7 --seq 1 --dtype int4"), 2,
                       "--head-dim: an int4 cache packs two numbers a byte: the head width must be even, got 7");
  expect_clean_failure(run_qkv("lm cache-size --layers 2 --heads 4 --dk 8 --dv 5 --seq 1 --dtype int4"), 2, "--dv:");
  expect_clean_failure(run_qkv("lm cache-size --layers 2 --heads 2 --head-dim 4 --seq 8 --dtype int3"), 2,
                       "--dtype 'int3'");
  // The article's example, shrunk step by step.
  const auto article = run_qkv("lm cache-size --article --json");
  ASSERT_EQ(article.status, 0) << article.output;
  const auto rows = nlohmann::json::parse(article.output);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].at("key_bytes").get<int64_t>(), 10'000'000'000LL);
  EXPECT_EQ(rows[1].at("key_bytes").get<int64_t>(), 2'000'000'000LL);
  EXPECT_EQ(rows[2].at("key_bytes").get<int64_t>(), 400'000'000LL);
}

TEST_F(LmCli, GenerateSavesAndResumesAPromptCache) {
  ASSERT_EQ(train_->status, 0) << train_->output;
  const std::string file = *dir_ + "/prompt.kvc";
  const std::string base =
      "lm generate --checkpoint " + checkpoint() +
      " --prompt 'abc|' --temperature 1 --max-new 30 --seed 3 --threads 1 --json --cache-dtype int8";
  const auto first = run_qkv(base + " --save-cache " + file);
  ASSERT_EQ(first.status, 0) << first.output;
  const auto again = run_qkv(base + " --load-cache " + file);
  ASSERT_EQ(again.status, 0) << again.output;
  const auto a = nlohmann::json::parse(first.output), b = nlohmann::json::parse(again.output);
  EXPECT_EQ(a.at("tokens"), b.at("tokens"));
  EXPECT_EQ(b.at("resumed_positions").get<int64_t>(), 4);
  // qkv's own file is replaced only with --overwrite; a user's never.
  expect_clean_failure(run_qkv(base + " --save-cache " + file), 2, "--overwrite");
  EXPECT_EQ(run_qkv(base + " --save-cache " + file + " --overwrite").status, 0);
  const std::string mine = *dir_ + "/mine.kvc";
  std::ofstream(mine) << "a user's file";
  expect_clean_failure(run_qkv(base + " --save-cache " + mine + " --overwrite"), 2, mine);
  expect_clean_failure(run_qkv(base + " --load-cache " + mine), 1, "not a qkv prompt cache");
  expect_clean_failure(run_qkv(base + " --load-cache " + file + " --no-cache"), 2, "--no-cache");
}

TEST_F(LmCli, TaskModelAnswersGreedilyByDefault) {
  ASSERT_EQ(train_->status, 0) << train_->output;
  // Without --temperature: greedy, stopping at the terminator, so two seeds agree.
  const std::string base = "lm generate --checkpoint " + checkpoint() + " --prompt 'abc|' --max-new 40 --json --seed ";
  const auto one = run_qkv(base + "1"), two = run_qkv(base + "2");
  ASSERT_EQ(one.status, 0) << one.output;
  const auto tokens = nlohmann::json::parse(one.output).at("tokens");
  EXPECT_EQ(tokens, nlohmann::json::parse(two.output).at("tokens"));
  for (const auto& t : tokens) EXPECT_NE(t.get<int>(), '\n');
}

// A text run records its file's size and CRC: after the text changes, eval
// and --resume would read other held-out windows and say nothing; they are
// refused by name. inspect-mlp reads in the run's context windows, and a
// unit's contexts never reach back past a window's start.
TEST(LmTextRun, AChangedTextIsRefusedAndInspectReadsInTheRunsWindows) {
  const std::string dir = fresh_dir("lm_text_run");
  fs::create_directories(dir);
  const std::string text = dir + "/words.txt";
  {
    std::ofstream f(text);
    const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
    for (int i = 0; i < 120; ++i) f << words[(i * 7) % 5] << (i % 9 == 8 ? '.' : '_');
  }
  const auto run =
      run_qkv("lm train --text " + text +
              " --context 16 --epochs 1 --d-model 16 --heads 2 --layers 1 --threads 1 --out " + dir + "/run");
  ASSERT_EQ(run.status, 0) << run.output;
  const auto eval = run_qkv("lm eval --threads 1 --checkpoint " + dir + "/run");
  ASSERT_EQ(eval.status, 0) << eval.output;

  const auto inspect =
      run_qkv("lm inspect-mlp --json --threads 1 --contexts 20 --checkpoint " + dir + "/run --text " + text);
  ASSERT_EQ(inspect.status, 0) << inspect.output;
  size_t longest = 0;
  for (const auto& unit : nlohmann::json::parse(inspect.output))
    for (const auto& key : unit.at("keys")) longest = std::max(longest, key.at("context").get<std::string>().size());
  EXPECT_LE(longest, 16u);  // --contexts' 24 bytes of context, cut at the 16-byte window's start
  EXPECT_GE(longest, 8u);

  { std::ofstream(text, std::ios::app) << "zeta_"; }
  expect_clean_failure(run_qkv("lm eval --threads 1 --checkpoint " + dir + "/run"), 1,
                       text + ": changed since the run trained on it (744 bytes then, 749 now)");
  const auto resumed = run_qkv("lm train --resume " + dir + "/run --epochs 2 --threads 1");
  EXPECT_EQ(resumed.status, 1) << resumed.output;
  EXPECT_NE(resumed.output.find(text + ": changed since the run trained on it"), std::string::npos) << resumed.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace qkv::testing
