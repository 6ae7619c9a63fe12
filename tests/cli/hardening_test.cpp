// Careless and hostile options and data at the CLI: each gets exit 1 or 2 and
// one line naming the option or file, before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_run.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::testing::expect_clean_failure;
using qkv::testing::fresh_dir;
using qkv::testing::run_qkv;
using qkv::testing::temp_path;

namespace {

void write(const std::string& path, const std::string& text) { qkv::testing::write_text_file(path, text); }

// A tiny classification run (seconds), trained once for the tests that need
// a checkpoint; they test what happens before the model runs.
const std::string& tiny_vnt_checkpoint() {
  static const std::string ckpt = [] {
    const std::string run = fresh_dir("hard_tiny_run");
    const auto r = run_qkv("vnt train --synth-classes box,sphere --synth-train-per-class 4 --synth-test-per-class 1 "
                           "--points-per-shape 64 --points 32 --epochs 1 --batch-size 4 --linear-dim 4 --heads 2 "
                           "--head-dim 4 --model-options '{\"k\":4}' --threads 1 --out " + run);
    EXPECT_EQ(r.status, 0) << r.output;
    return run + "/checkpoints/best.ckpt";
  }();
  return ckpt;
}

}  // namespace

TEST(Hardening, NumericOptionsAreCheckedAgainstTheirRange) {
  const std::string out = fresh_dir("hard_opts");
  // Refused by the option's own range, named, before the output exists.
  expect_clean_failure(run_qkv("vnt train --seed -1 --out " + out), 2, "--seed");
  expect_clean_failure(run_qkv("vnt train --threads 100000 --out " + out), 2, "--threads");
  expect_clean_failure(run_qkv("vnt train --heads -3 --out " + out), 2, "--heads");
  expect_clean_failure(run_qkv("vnt train --head-dim -1 --out " + out), 2, "--head-dim");
  expect_clean_failure(run_qkv("vnt train --linear-dim -1 --out " + out), 2, "--linear-dim");
  expect_clean_failure(run_qkv("vnt train --lr nan --out " + out), 2, "--lr: value nan must be a finite number");
  expect_clean_failure(run_qkv("vnt train --label-smoothing 2 --out " + out), 2, "--label-smoothing");
  expect_clean_failure(run_qkv("vnt train --batch-size 0 --out " + out), 2, "--batch-size");
  expect_clean_failure(run_qkv("vnt train --synth-train-per-class -2 --out " + out), 2, "--synth-train-per-class");
  expect_clean_failure(run_qkv("vnt train --max-per-class -1 --out " + out), 2, "--max-per-class");
  expect_clean_failure(run_qkv("vnt train --up-axis 3 --out " + out), 2, "--up-axis");
  expect_clean_failure(run_qkv("spirals train --noise inf --out " + out), 2, "--noise");
  expect_clean_failure(run_qkv("mhca select --manifest m.csv --methylation b.csv --output x.txt --n-features -4"), 2,
                       "--n-features");
  expect_clean_failure(run_qkv("mhca synth --out " + out + " --seed -1"), 2, "--seed");
  expect_clean_failure(run_qkv("mhca synth --out " + out + " --shape 0,10,10"), 2, "--shape");
  expect_clean_failure(run_qkv("data synth-shapes --out " + out + " --train-per-class -1"), 2, "--train-per-class");
  EXPECT_FALSE(fs::exists(out));
  // The range is part of the help.
  const auto help = run_qkv("vnt train --help");
  EXPECT_NE(help.output.find("learning rate (in [0, 1000])"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("training epochs (>= 1)"), std::string::npos) << help.output;
}

TEST(Hardening, MhcaAugmentationAndSizesAreCheckedBeforeLoading) {
  const std::string out = fresh_dir("hard_mhca");
  // The cohort files need not exist: options are checked first.
  const std::string cohort = " --manifest /nonexistent/m.csv --methylation /nonexistent/b.csv --out " + out;
  expect_clean_failure(run_qkv("mhca train" + cohort + " --augment-degrees nan"), 2, "--augment-degrees");
  expect_clean_failure(run_qkv("mhca train" + cohort + " --augment 2"), 2, "--augment");
  expect_clean_failure(run_qkv("mhca cv" + cohort + " --augment-noise nan"), 2, "--augment-noise");
  expect_clean_failure(run_qkv("mhca train" + cohort + " --select list"), 2, "--cpg-list");
  EXPECT_FALSE(fs::exists(out));
}

TEST(Hardening, MhcaNetworkSizesThatCannotFitAreUsageErrors) {
  // A width that would need terabytes is refused by the model's options,
  // named, instead of allocating until the kernel kills the process.
  expect_clean_failure(run_qkv("params --model mhca --model-options '{\"channels\":[100000,8,16]}'"), 2, "channels");
  expect_clean_failure(run_qkv("params --model mhca --model-options '{\"channels\":[1024,8,16]}'"), 2,
                       "convolution 1's output");
  EXPECT_EQ(run_qkv("params --model mhca --count").status, 0);  // the paper's sizes fit
}

TEST(Hardening, NeighbourhoodsLargerThanTheCloudAreUsageErrors) {
  const std::string out = fresh_dir("hard_k");
  expect_clean_failure(run_qkv("seg train --points 16 --out " + out), 2, "option 'k' (20 neighbours)");
  expect_clean_failure(run_qkv("vnt train --model-options '{\"k\":1000000000}' --out " + out), 2,
                       "--points is 1024");
  EXPECT_FALSE(fs::exists(out));  // refused before the synthetic data were written
}

TEST(Hardening, DegeneratePointCloudsAreRefusedByName) {
  const std::string one = temp_path("one_point.xyz"), same = temp_path("same_points.xyz");
  write(one, "0.5 0.5 0.5\n");
  std::string text;
  for (int i = 0; i < 100; ++i) text += "1 2 3\n";
  write(same, text);
  const std::string& ckpt = tiny_vnt_checkpoint();
  expect_clean_failure(run_qkv("vnt predict --checkpoint " + ckpt + " --input " + one), 1, one + ": only 1 point");
  expect_clean_failure(run_qkv("vnt predict --checkpoint " + ckpt + " --input " + same), 1,
                       same + ": all 100 points are the same point");
}

TEST(Hardening, TextTooShortForHeldOutWindowsIsNamed) {
  const std::string tiny = temp_path("tiny.txt"), out = fresh_dir("hard_lm");
  write(tiny, "abc");
  expect_clean_failure(run_qkv("lm train --text " + tiny + " --out " + out), 1, tiny + ": 3 bytes hold 0 windows");
  const std::string small = temp_path("small.txt");
  write(small, std::string(500, 'a'));
  // 500 bytes are 3 windows of 128, or 62 windows of 8.
  expect_clean_failure(run_qkv("lm train --text " + small + " --out " + out), 1, "or a smaller --context");
  EXPECT_FALSE(fs::exists(out + "/checkpoints/last.ckpt"));
}

TEST(Hardening, PathsThatAreNotUtf8) {
  // An output folder whose name JSON cannot hold is refused by name...
  const std::string bad_out = fresh_dir("hard_utf8") + "\xff";
  expect_clean_failure(run_qkv("spirals train --epochs 1 --out '" + bad_out + "'"), 2, "not valid UTF-8");
  EXPECT_FALSE(fs::exists(bad_out));
  // ...and an input file's name is written with the bad bytes replaced.
  const std::string bad_in = temp_path("bad\xff.xyz");
  std::string text;
  for (int i = 0; i < 64; ++i) text += std::to_string(i % 4) + " " + std::to_string(i / 4 % 4) + " " + std::to_string(i / 16) + "\n";
  write(bad_in, text);
  const auto r = run_qkv("vnt predict --checkpoint " + tiny_vnt_checkpoint() + " --input '" + bad_in + "' --json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bad\xef\xbf\xbd.xyz"), std::string::npos) << r.output;  // U+FFFD
}
