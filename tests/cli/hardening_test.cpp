// Careless and hostile options and data at the CLI: each gets exit 1 or 2 and
// one line naming the option or file, before anything is written.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "qkv/models/model.h"
#include "qkv/tasks/stored_runs.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/run.h"
#include "support/build_parts.h"
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
    const auto r = run_qkv(
        "vnt train --synth-classes box,sphere --synth-train-per-class 4 --synth-test-per-class 1 "
        "--points-per-shape 64 --points 32 --epochs 1 --batch-size 4 --linear-dim 4 --heads 2 "
        "--head-dim 4 --model-options '{\"k\":4}' --threads 1 --out " +
        run);
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
  // More points than the built-in shapes will hold: known before they are written into the run folder.
  expect_clean_failure(run_qkv("vnt train --data synthetic --points 4096 --out " + out), 2,
                       "--points 4096 is more than the 2048 points stored per shape (--points-per-shape 4096");
  expect_clean_failure(run_qkv("seg train --data synthetic --points 3000 --out " + out), 2,
                       "--points 3000 is more than the 2500 points each shape is resampled to");
  EXPECT_FALSE(fs::exists(out));
  // The range is part of the help.
  const auto help = run_qkv("vnt train --help");
  EXPECT_NE(help.output.find("learning rate (in (0, 1000])"), std::string::npos) << help.output;
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
  expect_clean_failure(run_qkv("seg train --points 16 --out " + out), 2,
                       "--points 16: vnt-seg's option 'k' takes 20 neighbours");
  expect_clean_failure(run_qkv("vnt train --model-options '{\"k\":1000000000}' --out " + out), 2,
                       "--points 1024: vnt's option 'k' takes 1000000000 neighbours");
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
  // A rotation that is not one names the option that gave it.
  expect_clean_failure(run_qkv("vnt predict --checkpoint " + ckpt + " --input " + same + " --rotate x"), 2,
                       "--rotate unknown rotation 'x': expected none (or i), z or so3");
  expect_clean_failure(run_qkv("vnt eval --checkpoint " + ckpt + " --rotate so4"), 2,
                       "--rotate unknown rotation 'so4'");
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
  for (int i = 0; i < 64; ++i)
    text += std::to_string(i % 4) + " " + std::to_string(i / 4 % 4) + " " + std::to_string(i / 16) + "\n";
  write(bad_in, text);
  const auto r = run_qkv("vnt predict --checkpoint " + tiny_vnt_checkpoint() + " --input '" + bad_in + "' --json");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bad\xef\xbf\xbd.xyz"), std::string::npos) << r.output;  // U+FFFD
}

TEST(Hardening, ACheckpointWithNaNWeightsIsRefusedUnlessAsked) {
  const std::string dir = fresh_dir("hard_nan");
  ASSERT_EQ(run_qkv("spirals train --epochs 1 --points-per-arm 30 --batch-size 16 --threads 1 --out " + dir).status, 0);
  nlohmann::json config;
  auto model = qkv::train::load_model_from_checkpoint(dir + "/checkpoints/best.ckpt", &config);
  auto state = qkv::train::read_checkpoint_state(dir + "/checkpoints/best.ckpt");
  const auto first = model->named_parameters()[0];
  {
    torch::NoGradGuard no_grad;
    first.value().view(-1)[0].fill_(NAN);
  }
  const std::string diverged = dir + "/diverged.ckpt";
  qkv::train::save_checkpoint(diverged, *model, nullptr, state);
  for (const std::string command : {"spirals eval", "export-weights"}) {
    const std::string output = command == "export-weights" ? " --output " + dir + "/w.pt" : "";
    expect_clean_failure(run_qkv(command + " --checkpoint " + diverged + output), 1,
                         "diverged.ckpt: 'model/" + first.key() + "' holds 1 NaN or infinite value");
  }
  EXPECT_FALSE(fs::exists(dir + "/w.pt"));
  const auto anyway = run_qkv("spirals eval --allow-non-finite --checkpoint " + diverged);
  EXPECT_EQ(anyway.status, 0) << anyway.output;
  // The switch is the read's own argument: a read told nothing in the same
  // process still refuses, and one told so still reads.
  qkv::train::CheckpointFile allowed(diverged);
  allowed.allow_non_finite = true;
  EXPECT_NO_THROW(qkv::train::load_model_from_checkpoint(allowed));
  EXPECT_THROW(qkv::train::load_model_from_checkpoint(diverged), qkv::DataError);
  EXPECT_NO_THROW(qkv::train::load_model_from_checkpoint(allowed));
}

TEST(Hardening, MaxParamsTravelsWithTheCheckpointRead) {
  const std::string dir = fresh_dir("hard_max_params");
  ASSERT_EQ(run_qkv("spirals train --epochs 1 --points-per-arm 30 --batch-size 16 --threads 1 --out " + dir).status, 0);
  const std::string best = dir + "/checkpoints/best.ckpt";
  const auto parameters = qkv::models::count_parameters(*qkv::train::load_model_from_checkpoint(best));
  const std::string below = std::to_string(parameters - 1);
  expect_clean_failure(run_qkv("spirals eval --max-params " + below + " --checkpoint " + best), 1,
                       "more than --max-params " + below);
  EXPECT_EQ(run_qkv("spirals eval --max-params " + std::to_string(parameters) + " --checkpoint " + best).status, 0);
  qkv::train::CheckpointFile tight(best);
  tight.limits.max_parameters = parameters - 1;
  EXPECT_THROW(qkv::train::load_model_from_checkpoint(tight), qkv::DataError);
  EXPECT_NO_THROW(qkv::train::load_model_from_checkpoint(best));  // the limit was that read's alone
}

TEST(Hardening, ModelOptionsAreTypedStrictlyAndShownShort) {
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  const std::pair<std::string, std::string> cases[] = {
      {"{\"k\":8.5}", "vnt option 'k' = 8.5: not a whole number"},
      {"{\"k\":1e300}", "vnt option 'k' = 1e+300: not a whole number"},
      {"{\"k\":9223372036854775808}", "vnt option 'k' = 9223372036854775808: not a whole number"},
      {"{\"normals\":1}", "vnt option 'normals' = 1: not true or false"},
      {"{\"head_hidden\":[8,2.5]}", "vnt option 'head_hidden' = [8,2.5]: item 1 is not a whole number"},
      {"{\"pooling\":" + deep + "}", "--model-options: JSON nested 60001 levels deep; at most 64"},
      {"{\"pooling\":\"" + std::string(100000, 'x') + "\"}", "... (100000 bytes)"},
  };
  for (const auto& [options, needle] : cases) {
    const auto r = run_qkv("params --model vnt --count --model-options '" + options + "'");
    expect_clean_failure(r, 2, needle);
    EXPECT_LT(r.output.size(), 300u) << r.output.substr(0, 300);
  }
}

TEST(Hardening, AFlagAndAModelOptionForOneSettingMustAgree) {
  const std::string out = fresh_dir("hard_conflict");
  const std::string train =
      "vnt train --synth-classes box,sphere --synth-train-per-class 2 --synth-test-per-class 1 "
      "--points 32 --epochs 1 --threads 1 --out " +
      out + " --heads 2 --model-options ";
  expect_clean_failure(run_qkv(train + "'{\"heads\":3}'"), 2,
                       "--heads 2 and --model-options' \"heads\": 3 set the same option");
  expect_clean_failure(run_qkv(train + "'{\"heads\":[2]}'"), 2, "set the same option");
  EXPECT_FALSE(fs::exists(out + "/config.json"));
}

TEST(Hardening, RangesArePrintedAsPeopleWriteThem) {
  const auto r = run_qkv("lm cache-size --layers -2 --heads 1 --dk 1 --dv 1 --seq 1");
  expect_clean_failure(r, 2, "--layers");
  EXPECT_NE(r.output.find("must be at least 1"), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 200u) << r.output;
}

// Starts qkv with `args` (start_qkv_quietly), sends it one SIGINT once
// `folder` holds a file (within 60 s), and returns how it ended: its exit
// status, or minus the signal that killed it (a shell would say 130 for both
// an exit status of 130 and SIGINT's death).
static int interrupted_once_writing(const std::vector<std::string>& args, const std::string& folder) {
  const pid_t pid = qkv::testing::start_qkv_quietly(args);
  EXPECT_GE(pid, 0);
  if (pid < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto started = [&] { return fs::exists(folder) && !fs::is_empty(folder); };
  while (!started() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(started()) << folder;
  kill(pid, SIGINT);
  int raw = 0;
  waitpid(pid, &raw, 0);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -WTERMSIG(raw);
}

TEST(Hardening, CtrlCDuringMhcaSynthExits130) {
  QKV_SKIP_WITHOUT(qkv::Part::Nifti);
  const std::string out = fresh_dir("hard_synth_sigint");
  EXPECT_EQ(interrupted_once_writing({"mhca", "synth", "--subjects", "3000", "--cpg", "50", "--shape", "24,28,24",
                                      "--atlas", "none", "--threads", "1", "--out", out},
                                     out + "/spect"),
            130);
  EXPECT_FALSE(fs::exists(out + "/manifest.csv"));
  fs::remove_all(out);
}

// data synth-shapes was killed by the signal, saying nothing: it stops at
// the next file with one line and exits 130, its folder left unfinished (no
// README.txt, no complete mark) for the next command to make again.
TEST(Hardening, CtrlCDuringDataSynthShapesExits130) {
  const std::string out = fresh_dir("hard_shapes_sigint");
  EXPECT_EQ(interrupted_once_writing(
                {"data", "synth-shapes", "--classes", "cone", "--train-per-class", "100000", "--out", out},
                out + "/cone/train"),
            130);
  EXPECT_FALSE(fs::exists(out + "/README.txt"));
  EXPECT_EQ(qkv::testing::read_text(out + "/.qkv-written").find("\"complete\""), std::string::npos);
  // Made again with other classes: the stopped generation's class folders go,
  // files or none (an empty cone/test had stayed, and was read as a class).
  const auto again = run_qkv("data synth-shapes --classes box,sphere --train-per-class 2 --test-per-class 1 --out " +
                             out + " --overwrite");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_FALSE(fs::exists(out + "/cone"));
  EXPECT_TRUE(fs::exists(out + "/box/test"));
  fs::remove_all(out);
}

// A train command generating its synthetic shapes was killed by the signal,
// saying nothing: it stops at the next file with one line too.
TEST(Hardening, CtrlCWhileATrainCommandGeneratesItsDataExits130) {
  const std::string out = fresh_dir("hard_train_sigint");
  EXPECT_EQ(interrupted_once_writing({"vnt", "train", "--synth-classes", "box,sphere", "--synth-train-per-class",
                                      "100000", "--threads", "1", "--out", out},
                                     out + "/synthetic/box/train"),
            130);
  EXPECT_FALSE(fs::exists(out + "/config.json"));
  fs::remove_all(out);
}

TEST(Hardening, HugeModelsAreRefusedBeforeTheyAreBuilt) {
  // Each grew past 3.5 GB before it was killed; sized by arithmetic now, each
  // is refused with LibTorch's own footprint (~180 MB) and at most 120 MB more.
  const std::string out = fresh_dir("hard_huge");
  for (const std::string options : {"{\"blocks\":100000000}", "{\"head_hidden\":[100000000,256]}",
                                    "{\"ffn_hidden\":1000000000}", "{\"linear_dim\":4000000}"}) {
    const std::string train = "vnt train --synth-classes box,sphere --points 32 --threads 1 --out " + out +
                              " --model-options '" + options + "'";
    expect_clean_failure(run_qkv(train), 2, "more than --max-params 268435456");
    const auto [status, peak] =
        qkv::testing::qkv_status_and_peak_kib({"vnt", "train", "--synth-classes", "box,sphere", "--points", "32",
                                               "--threads", "1", "--out", out, "--model-options", options});
    EXPECT_EQ(status, 2) << options;
    EXPECT_LT(peak, qkv::testing::qkv_baseline_peak_kib() + 120 * 1024) << options;
    EXPECT_FALSE(fs::exists(out)) << options;
  }
  // One cloud whose neighbourhood graph alone would not fit in memory.
  expect_clean_failure(run_qkv("vnt train --points 4096 --model-options '{\"k\":4096,\"linear_dim\":100000}' --out " +
                               out + " --max-params 100000000000000"),
                       2, "would need more memory for its activations than this machine has");
  // Counted, never built, however large.
  const auto count = run_qkv("params --model vnt --count --model-options '{\"blocks\":1000000}'");
  EXPECT_EQ(count.status, 0) << count.output;
  EXPECT_EQ(count.output, "1280129096143752\n");
  const auto [status, peak] = qkv::testing::qkv_status_and_peak_kib(
      {"params", "--model", "vnt", "--count", "--model-options", "{\"blocks\":1000000}"});
  EXPECT_EQ(status, 0);
  EXPECT_LT(peak, qkv::testing::qkv_baseline_peak_kib() + 120 * 1024);
}

TEST(Hardening, CraftedCheckpointSettingsNameTheCheckpoint) {
  // A checkpoint's stored settings edited (valid CRC: written by the library)
  // are checked as a new run's options are, and the error names the file.
  const std::string dir = fresh_dir("hard_crafted");
  fs::create_directories(dir);
  nlohmann::json config;
  auto model = qkv::train::load_model_from_checkpoint(tiny_vnt_checkpoint(), &config);
  const auto original = qkv::train::read_checkpoint_state(tiny_vnt_checkpoint());
  const std::string input = dir + "/cloud.xyz";
  std::string text;
  for (int i = 0; i < 64; ++i)
    text += std::to_string(i % 4) + " " + std::to_string(i / 4 % 4) + " " + std::to_string(i / 16) + "\n";
  write(input, text);
  auto crafted = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    auto state = original;
    edit(state.run_config);
    const std::string path = dir + "/" + name + ".ckpt";
    qkv::train::save_checkpoint(path, *model, nullptr, state);
    return path;
  };
  const std::pair<std::string, std::function<void(nlohmann::json&)>> cases[] = {
      {"linear_dim", [](nlohmann::json& c) { c["model"]["options"]["linear_dim"] = 4000000; }},
      {"points", [](nlohmann::json& c) { c["data"]["points"] = 200000000; }},
      {"k", [](nlohmann::json& c) { c["model"]["options"]["k"] = 100000000; }},
      {"classes", [](nlohmann::json& c) { c["data"]["class_names"] = {"box"}; }},
      {"typed", [](nlohmann::json& c) { c["data"]["points"] = 32.5; }},
  };
  const std::map<std::string, std::string> expected = {
      {"linear_dim", "linear_dim.ckpt: stored model: vnt: these options make a model of"},
      {"points", "points.ckpt: stored run configuration:"},
      {"k", "k.ckpt: stored run configuration: points 32: vnt's option 'k' takes 100000000 neighbours"},
      {"classes", "classes.ckpt: stored run configuration: the model has 2 outputs but the run names 1 class"},
      {"typed", "typed.ckpt: stored run configuration:"},
  };
  for (const auto& [name, edit] : cases) {
    const std::string path = crafted(name, edit);
    const auto r = run_qkv("vnt predict --checkpoint " + path + " --input " + input);
    expect_clean_failure(r, 1, expected.at(name));
    const auto [status, peak] =
        qkv::testing::qkv_status_and_peak_kib({"vnt", "predict", "--checkpoint", path, "--input", input});
    EXPECT_EQ(status, 1) << name;
    EXPECT_LT(peak, qkv::testing::qkv_baseline_peak_kib() + 120 * 1024) << name;
    // qkv.load reads checkpoints through load_checked_model: the same refusal.
    const std::string message = qkv::testing::data_error_of([&] {
      nlohmann::json stored;
      qkv::tasks::load_checked_model(path, &stored);
    });
    EXPECT_NE(message.find(expected.at(name)), std::string::npos) << name << ": " << message;
  }
  nlohmann::json stored;
  EXPECT_NE(qkv::tasks::load_checked_model(tiny_vnt_checkpoint(), &stored), nullptr);
  EXPECT_EQ(stored.value("command", ""), "vnt train");
}
