// The qkv binary as a user meets it: exit codes, one-line errors, the run
// folder, Ctrl-C and resume.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "qkv/core/file_input.h"
#include "qkv/models/model.h"
#include "support/cli_run.h"
#include "support/paths.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::testing::fresh_dir;

namespace {

using Result = qkv::testing::CliResult;
using qkv::testing::count_lines;
using qkv::testing::expect_clean_failure;

Result run(const std::string& args) { return qkv::testing::run_qkv(args); }

const char* kFast = " --threads 1 --points-per-arm 60 --batch-size 16";

}  // namespace

// A typo gets the word it most likely meant; a word far from every known one gets none.
// The processes whose command line names the tests' zygote's socket: the
// zygote, a handler per command, and the commands it forked.
static int processes_of_this_zygote() {
  const char* socket_path = std::getenv("QKV_TEST_ZYGOTE_SOCKET");
  if (!socket_path) return 0;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    count += qkv::read_proc_file(entry.path() / "cmdline").find(socket_path) != std::string::npos;
  }
  return count;
}

// The tests' zygote (support/qkv_zygote.cpp) runs a test's command in a fork
// of a loaded qkv, passes on the signal a shell's timeout sends, ends as the
// command ended, and leaves a command whose load-time environment differs to
// a fresh qkv.
TEST(Cli, TheTestsZygoteRunsCommandsAsAFreshQkvWould) {
  const std::string client = qkv::testing::qkv_command();
  if (client == qkv::testing::qkv_binary())
    GTEST_SKIP() << "no zygote (QKV_TEST_FRESH_PROCESSES=1, or it did not start)";
  const std::string dir = fresh_dir("zygote");
  int most = 0;
  std::thread watcher([&most] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until) {
      most = std::max(most, processes_of_this_zygote());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // --foreground: timeout signals the client alone, once (without it, it
  // signals its process group as well, and a second SIGINT ends qkv at once).
  const auto r = qkv::testing::run_shell("timeout --foreground --preserve-status -s INT 3 " + client +
                                         " spirals train --points-per-arm 20 --epochs 100000000 --threads 1 --out " +
                                         dir + "/run 2>&1");
  watcher.join();
  EXPECT_EQ(r.status, 130) << r.output;
  EXPECT_NE(r.output.find("interrupted: checkpoint written to " + dir + "/run/checkpoints/last.ckpt"),
            std::string::npos)
      << r.output;
  EXPECT_GE(most, 3) << "the zygote, the command's handler and the command itself";
  const auto fresh = qkv::testing::run_shell("OMP_NUM_THREADS=1 " + client + " vnt train --epochs 0 2>&1");
  expect_clean_failure(fresh, 2, "--epochs: value 0 must be at least 1");
  std::filesystem::remove_all(dir);
}

TEST(Cli, TyposGetASuggestion) {
  expect_clean_failure(run("vnx"), 2, "unknown command 'vnx'; did you mean 'vnt'?");
  expect_clean_failure(run("vnt trian"), 2, "qkv vnt: error: unknown command 'trian'; did you mean 'train'?");
  expect_clean_failure(run("spirals train --epoch 2 --lr-schedule cos"), 2,
                       "not expected: --epoch 2 --lr-schedule cos; did you mean --epochs for --epoch, --schedule for "
                       "--lr-schedule?");
  expect_clean_failure(run("spirals train --bacth-size=4"), 2, "did you mean --batch-size for --bacth-size?");
  const auto far = run("spirals train --zzzzzzzz 2");
  EXPECT_EQ(far.status, 2);
  EXPECT_EQ(far.output.find("did you mean"), std::string::npos) << far.output;
}

// What a newcomer types first: the launch command without --, a grid with
// x's, a shape file where a data folder goes.
TEST(Cli, CommonMistakesSayWhatToTypeInstead) {
  expect_clean_failure(run("launch -n 2 vnt train --epochs 1"), 2,
                       "the command to run goes after --, e.g. qkv launch -n 2 -- vnt train");
  expect_clean_failure(run("mhca synth --shape 24x28x24 --out " + fresh_dir("xshape")), 2,
                       "--shape: expected 3 values separated by commas, got '24x28x24'");
  const auto shape = qkv::testing::temp_path("mug.off");
  std::ofstream(shape) << "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  expect_clean_failure(run("vnt train --data " + shape + " --out " + fresh_dir("file_as_data_run")), 1,
                       "mug.off: a file, not a data folder");
}

// Whatever failed (the parser, a setting's range, a missing file, an unknown
// command), the line starts the same way: "qkv <command>: error: ".
TEST(Cli, OneErrorPrefixEverywhere) {
  const auto failed_run = fresh_dir("prefix_data");
  const std::pair<std::string, std::string> cases[] = {
      {"vnt train --batch-size 0", "qkv vnt train: error: --batch-size"},
      {"vnt train --protocol q/z --out " + fresh_dir("prefix_protocol"), "qkv vnt train: error: --protocol q/z"},
      {"vnt train --data /nonexistent-qkv-data --out " + failed_run,
       "qkv vnt train: error: /nonexistent-qkv-data: no such folder"},
      {"vnt eval --checkpoint /nonexistent-qkv.ckpt", "qkv vnt eval: error: "},
      {"nonsense", "qkv: error: unknown command 'nonsense'"},
      {"vnt train --up-axis w", "qkv vnt train: error: --up-axis: w: expected x, y, z, layout or auto"}};
  for (const auto& [args, start] : cases) {
    const auto r = run(args);
    EXPECT_EQ(r.output.rfind(start, 0), 0u) << args << "\n" << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << r.output;
  }
  // A train command whose data cannot be read leaves no run folder behind.
  EXPECT_FALSE(std::filesystem::exists(failed_run));
}

TEST(Cli, UsageErrorsExit2WithOneLine) {
  expect_clean_failure(run(""), 2, "missing command");
  expect_clean_failure(run("spirals frob"), 2, "qkv spirals: error: unknown command 'frob' (known: train, eval)");
  expect_clean_failure(run("frobnicate"), 2, "frobnicate");
  expect_clean_failure(run("spirals train --epochs abc"), 2, "--epochs");
  // Past int64: refused, not taken as its largest value (which trained for ever).
  expect_clean_failure(run("spirals train --epochs 99999999999999999999 --out " + fresh_dir("e_huge")), 2,
                       "--epochs: value 99999999999999999999 is out of range: -9223372036854775808 to "
                       "9223372036854775807");
  expect_clean_failure(run("lm cache-size --layers 99999999999999999999 --heads 2 --head-dim 4 --seq 10"), 2,
                       "--layers: value 99999999999999999999 is out of range");
  expect_clean_failure(run("spirals train --no-such-flag"), 2, "--no-such-flag");
  expect_clean_failure(run("spirals train --epochs 0 --out " + fresh_dir("e0")), 2, "--epochs");
  expect_clean_failure(run("spirals train --optimizer adagrad --out " + fresh_dir("opt")), 2, "--optimizer");
  expect_clean_failure(run("spirals train --device cuda --out " + fresh_dir("cuda")), 2, "--device cuda");
  expect_clean_failure(run("spirals train --resume /nonexistent-qkv-run"), 2, "--resume");
  expect_clean_failure(run("params --model nope"), 2, "unknown model 'nope'");
  expect_clean_failure(run("params --model mlp --model-options '{\"hiden\": 3}'"), 2, "unknown option 'hiden'");
  // An empty value (an unset shell variable) is refused by the option's name, before anything is written.
  const std::string never = fresh_dir("empty_value");
  expect_clean_failure(run("vnt train --synth-dir '' --out " + never), 2,
                       "--synth-dir: empty; give a value, or leave the option out for its default");
  expect_clean_failure(run("spirals train --select-metric '' --out " + never), 2, "--select-metric: empty");
  EXPECT_FALSE(std::filesystem::exists(never));
}

// What the settings' field lists mark as required, or as a file that must
// exist, is refused by the option's name before anything is read.
TEST(Cli, FieldsMarkedRequiredOrExistingAreCheckedAsOptions) {
  const auto file = qkv::testing::temp_path("marked.ckpt");  // exists; never read: the checks come first
  { std::ofstream(file) << "x"; }
  for (const char* command : {"vnt predict", "seg predict", "vnt attention"})
    expect_clean_failure(run(std::string(command) + " --checkpoint " + file), 2, "--input is required");
  expect_clean_failure(run("lm generate --checkpoint " + file), 2, "--prompt is required");
  expect_clean_failure(run("lm generate --prompt a --load-cache /no/such.cache --checkpoint " + file), 2,
                       "--load-cache: File does not exist: /no/such.cache");
  expect_clean_failure(run("lm train --text /no/such.txt"), 2, "--text: File does not exist");
  expect_clean_failure(run("mhca select --methylation m.csv"), 2, "--manifest is required");
  expect_clean_failure(run("mhca train --manifest a --methylation b --cpg-list /no/list"), 2,
                       "--cpg-list: File does not exist");
}

TEST(Cli, HelpExplainsCommandsAndDefaults) {
  auto top = run("--help");
  EXPECT_EQ(top.status, 0);
  for (const char* s : {"spirals", "params", "export-weights", "Exit status"})
    EXPECT_NE(top.output.find(s), std::string::npos) << s;
  auto train = run("spirals train --help");
  EXPECT_EQ(train.status, 0);
  for (const char* s : {"--epochs", "--seed", "--threads", "--device", "--out", "--resume", "--init-weights",
                        "--label-smoothing", "--clip-grad-norm", "--schedule", "cosine"})
    EXPECT_NE(train.output.find(s), std::string::npos) << s;
  // A train command's help in sections, each option in its own; usage names
  // the program "qkv", not the path it was started by.
  auto vnt = run("vnt train --help");
  ASSERT_EQ(vnt.status, 0);
  EXPECT_NE(vnt.output.find("Usage: qkv vnt train"), std::string::npos) << vnt.output;
  std::vector<size_t> at;
  for (const char* heading : {"\nRun:\n", "\nData:\n", "\nModel:\n", "\nTraining:\n", "\nData-parallel training"}) {
    at.push_back(vnt.output.find(heading));
    ASSERT_NE(at.back(), std::string::npos) << heading << "\n" << vnt.output;
  }
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end())) << vnt.output;
  auto within = [&](const char* option, size_t section) {
    const size_t where = vnt.output.find(std::string("  ") + option + " ");
    EXPECT_GT(where, at[section]) << option;
    if (section + 1 < at.size()) {
      EXPECT_LT(where, at[section + 1]) << option;
    }
  };
  within("--out", 0);
  within("--resume", 0);
  within("--data", 1);
  within("--points", 1);
  within("--model", 2);
  within("--init-weights", 2);
  within("--lr", 3);
  within("--world-size", 4);

  // Every command's help comes in sections: the command's own options under
  // a heading of their own, the shared ones under "Run"; none is left in
  // CLI11's catch-all "Options".
  for (const char* command :
       {"params",        "export-weights", "spirals eval",      "lm eval",          "lm generate",
        "lm cache-size", "lm inspect-mlp", "data synth-shapes", "data synth-parts", "vnt eval",
        "vnt predict",   "vnt attention",  "vnt compare",       "seg eval",         "seg predict",
        "seg compare",   "mhca synth",     "mhca select",       "mhca cv",          "mhca predict",
        "mhca explain",  "mhca train",     "lm train",          "seg train",        "vnt embed",
        "doctor"}) {
    const auto help = run(std::string(command) + " --help");
    ASSERT_EQ(help.status, 0) << command;
    EXPECT_EQ(help.output.find("\nOptions:\n"), std::string::npos) << command << "\n" << help.output;
    EXPECT_NE(help.output.find("\nRun:\n"), std::string::npos) << command << "\n" << help.output;
  }
  // Commands in a deliberate order: the flagship first, the tools last.
  std::vector<size_t> order;
  for (const char* name : {"\n  vnt ", "\n  seg ", "\n  mhca ", "\n  lm ", "\n  spirals ", "\n  params "})
    order.push_back(top.output.find(name));
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << top.output;
  EXPECT_EQ(std::count(order.begin(), order.end(), std::string::npos), 0) << top.output;
}

// The spellings of earlier releases still work for one release, hidden from
// --help, and say their new name.
TEST(Cli, OldSpellingsStillWorkAndNameTheNewOne) {
  const auto old_params = run("params --model mlp --count --options '{\"hidden\": 8, \"layers\": 1}'");
  EXPECT_EQ(old_params.status, 0) << old_params.output;
  EXPECT_NE(old_params.output.find("--options is now spelled --model-options"), std::string::npos) << old_params.output;
  EXPECT_NE(old_params.output.find("51\n"), std::string::npos) << old_params.output;
  EXPECT_EQ(run("params --help").output.find("--options "), std::string::npos);
  const auto old_batch = run("lm cache-size --layers 2 --heads 2 --dk 4 --dv 4 --seq 8 --batch 3 --json");
  EXPECT_EQ(old_batch.status, 0) << old_batch.output;
  EXPECT_NE(old_batch.output.find("--batch is now spelled --batch-size"), std::string::npos);
  const auto new_batch = run("lm cache-size --layers 2 --heads 2 --dk 4 --dv 4 --seq 8 --batch-size 3 --json");
  EXPECT_EQ(qkv::testing::trailing_json(old_batch.output), qkv::testing::trailing_json(new_batch.output));
  EXPECT_EQ(run("lm cache-size --help").output.find("--batch "), std::string::npos);
  // An old spelling is checked as its new name is: the same range, named in one line.
  expect_clean_failure(run("lm cache-size --layers 2 --heads 2 --dk 4 --dv 4 --seq 8 --batch 0"), 2, "--batch: ");
  const auto parts = fresh_dir("old_spelling_parts");
  expect_clean_failure(run("data synth-parts --train-per-category 0 --out " + parts), 2,
                       "qkv data synth-parts: error: --train-per-category: value 0 must be in [1, 100000]");
  EXPECT_FALSE(std::filesystem::exists(parts));
  EXPECT_EQ(run("seg train --help").output.find("--max-per-category"), std::string::npos);
  EXPECT_NE(run("seg train --help").output.find("--max-per-class"), std::string::npos);
}

TEST(Cli, ParamsPrintsTheCount) {
  auto r = run("params --model mlp --count");
  EXPECT_EQ(r.status, 0);
  // 2*64+64 + 64*64+64 + 64*3+3
  EXPECT_EQ(r.output, "4547\n");
  EXPECT_EQ(run("params --model mlp --count --model-options '{\"hidden\": 8, \"layers\": 1}'").output, "51\n");
}

// The value column of `qkv params` for `key`: the text after the key on the
// line "  key  value  help", up to the help (two spaces), or "" if no such line.
std::string option_value(const std::string& output, const std::string& key) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  " + key + " ", 0) != 0) continue;
    const auto start = line.find_first_not_of(' ', 2 + key.size());
    return line.substr(start, line.find("  ", start) - start);
  }
  return "";
}

TEST(Cli, ParamsShowsTaskInputsAndEveryOptionWithItsDefault) {
  const auto r = run("params --model vnt");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto defaults = qkv::models::find_model("vnt").resolve(nlohmann::json::object());
  ASSERT_GE(defaults.size(), 15u);
  for (const auto& item : defaults.items())
    EXPECT_EQ(option_value(r.output, item.key()), item.value().dump()) << item.key() << " in\n" << r.output;
  EXPECT_EQ(option_value(r.output, "k"), "20");
  EXPECT_EQ(option_value(r.output, "pooling"), "\"max+mean\"");
  EXPECT_EQ(option_value(r.output, "head_hidden"), "[512,256]");
  for (const char* s : {"task        classification", "inputs      points\n", "the paper", "parameters  542560\n"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << " in\n" << r.output;

  const auto changed = run("params --model vnt+n --model-options '{\"k\": 16}'");
  ASSERT_EQ(changed.status, 0) << changed.output;
  EXPECT_EQ(option_value(changed.output, "k"), "16 (default 20)");
  EXPECT_EQ(option_value(changed.output, "normals"), "true");
  EXPECT_NE(changed.output.find("inputs      points, normals\n"), std::string::npos) << changed.output;
}

TEST(Cli, ParamsJsonAndList) {
  const auto r = run("params --model vnt-seg --json --model-options '{\"normals\": true}'");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("model"), "vnt-seg");
  EXPECT_EQ(j.at("task"), "segmentation");
  EXPECT_EQ(j.at("inputs").get<std::vector<std::string>>(),
            (std::vector<std::string>{"points", "normals", "category"}));
  const auto defaults = qkv::models::find_model("vnt-seg").resolve(nlohmann::json::object());
  ASSERT_EQ(j.at("options").size(), defaults.size());
  for (const auto& item : defaults.items()) {
    EXPECT_EQ(j.at("options").at(item.key()).at("default"), item.value()) << item.key();
    EXPECT_FALSE(j.at("options").at(item.key()).at("help").get<std::string>().empty()) << item.key();
  }
  EXPECT_EQ(j.at("options").at("normals").at("value"), true);
  EXPECT_EQ(j.at("options").at("linear_dim").at("source"), "the paper (segmentation)");
  EXPECT_EQ(std::to_string(j.at("parameters").get<int64_t>()) + "\n",
            run("params --model vnt-seg --count --model-options '{\"normals\": true}'").output);

  const auto list = run("params --list");
  ASSERT_EQ(list.status, 0) << list.output;
  const auto classification = list.output.find("classification: ");
  const auto segmentation = list.output.find("\nsegmentation: ");
  ASSERT_NE(classification, std::string::npos) << list.output;
  ASSERT_NE(segmentation, std::string::npos) << list.output;
  for (const char* m : {"\n  vnt ", "\n  vnt+n ", "\n  vn-dgcnn ", "\n  xyz-transformer "}) {
    const auto at = list.output.find(m);
    EXPECT_TRUE(at > classification && at < segmentation) << m << " in\n" << list.output;
  }
  expect_clean_failure(run("params --model vnt --count --json"), 2, "--json");

  // XGBoost is an entry of the mhca task: its options, no parameter count.
  EXPECT_NE(list.output.find("\n  xgboost "), std::string::npos) << list.output;
  const auto xgboost = run("params --model xgboost --json");
  ASSERT_EQ(xgboost.status, 0) << xgboost.output;
  const auto card = nlohmann::json::parse(xgboost.output);
  EXPECT_EQ(card.at("task"), "mhca");
  EXPECT_EQ(card.at("inputs"), nlohmann::json::array({"methylation"}));
  EXPECT_EQ(card.at("options").at("max_depth").at("default"), 6);
  EXPECT_EQ(card.at("options").at("max_depth").at("source"), "the paper");
  EXPECT_TRUE(card.at("parameters").is_null());
  EXPECT_NE(run("params --model xgboost").output.find("parameters  none: not a network"), std::string::npos);
  expect_clean_failure(run("params --model xgboost --count"), 2, "xgboost is not a network");
  expect_clean_failure(run("params --model xgboost --model-options '{\"max_depth\": 0}'"), 2, "max_depth");
}

TEST(Cli, TrainEvalExportAndInitWeights) {
  const auto dir = fresh_dir("run");
  auto r = run("spirals train --epochs 3 --out " + dir + kFast);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* f : {"config.json", "metrics.jsonl", "summary.json", "report.html", "checkpoints/best.ckpt"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  std::ifstream config_file(dir + "/config.json");
  auto config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config.at("threads"), 1);
  EXPECT_TRUE(config.at("blas").contains("library"));
  EXPECT_TRUE(config.contains("qkv_version"));
  EXPECT_EQ(config.at("train").at("epochs"), 3);

  auto eval = run("spirals eval --threads 1 --checkpoint " + dir + "/checkpoints/best.ckpt");
  ASSERT_EQ(eval.status, 0) << eval.output;
  // The run folder stands for its best checkpoint; a folder without one is refused by name.
  const auto from_folder = run("spirals eval --threads 1 --checkpoint " + dir);
  ASSERT_EQ(from_folder.status, 0) << from_folder.output;
  EXPECT_EQ(from_folder.output, eval.output);
  const auto no_run = fresh_dir("no_run");
  std::filesystem::create_directories(no_run);
  expect_clean_failure(run("spirals eval --checkpoint " + no_run), 2,
                       no_run + " is a folder without checkpoints/best.ckpt");
  auto metrics = nlohmann::json::parse(eval.output);
  EXPECT_EQ(metrics.at("split"), "test");
  std::ifstream summary_file(dir + "/summary.json");
  auto summary = nlohmann::json::parse(summary_file);
  EXPECT_DOUBLE_EQ(metrics.at("accuracy").get<double>(), summary.at("test").at("accuracy").get<double>());

  const auto weights = dir + "/w.pt";
  auto ex = run("export-weights --checkpoint " + dir + " --output " + weights);
  ASSERT_EQ(ex.status, 0) << ex.output;
  // The positional form of earlier releases writes the same file and says its new spelling.
  const auto old_form = run("export-weights " + dir + "/checkpoints/best.ckpt " + dir + "/w_old.pt");
  ASSERT_EQ(old_form.status, 0) << old_form.output;
  EXPECT_NE(old_form.output.find("is now spelled --checkpoint CKPT --output OUT"), std::string::npos)
      << old_form.output;
  EXPECT_EQ(fs::file_size(dir + "/w_old.pt"), fs::file_size(weights));
  expect_clean_failure(run("export-weights " + dir + "/checkpoints/best.ckpt"), 2,
                       "(use --checkpoint CKPT --output FILE)");
  auto init = run("spirals train --epochs 1 --out " + dir + "_init --init-weights " + weights + kFast);
  EXPECT_EQ(init.status, 0) << init.output;
  expect_clean_failure(
      run("spirals train --epochs 1 --hidden 8 --out " + dir + "_bad --init-weights " + weights + kFast), 1,
      "net.0.weight [64, 2] vs model [8, 2]");
  // A file that is no weights file is refused before the run folder (or synthetic data) is written.
  const auto junk = dir + "/junk.txt";
  qkv::testing::write_text_file(junk, "not weights\n");
  expect_clean_failure(run("vnt train --synth-classes box,sphere --out " + dir + "_junk --init-weights " + junk), 1,
                       junk + ": not a weights file");
  EXPECT_FALSE(fs::exists(dir + "_junk"));
}

TEST(Cli, BrokenCheckpointIsExit1NamingTheFile) {
  const auto dir = fresh_dir("broken");
  ASSERT_EQ(run("spirals train --epochs 1 --out " + dir + kFast).status, 0);
  const auto ckpt = dir + "/checkpoints/best.ckpt";
  fs::resize_file(ckpt, fs::file_size(ckpt) / 2);
  expect_clean_failure(run("spirals eval --checkpoint " + ckpt), 1, ckpt + ": checkpoint is truncated");
  expect_clean_failure(run("export-weights --checkpoint " + ckpt + " --output " + dir + "/x.pt"), 1, "truncated");
  EXPECT_FALSE(fs::exists(dir + "/x.pt"));
}

TEST(Cli, CtrlCWritesACheckpointExits130AndResumes) {
  const auto dir = fresh_dir("sigint");
  const pid_t pid = qkv::testing::start_qkv_quietly(
      {"spirals", "train", "--epochs", "100000", "--points-per-arm", "2000", "--threads", "1", "--out", dir});
  ASSERT_GE(pid, 0);
  // Wait for the first finished epoch, then interrupt mid-run.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(dir + "/metrics.jsonl") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(dir + "/metrics.jsonl"));
  kill(pid, SIGINT);
  int raw = 0;
  waitpid(pid, &raw, 0);
  ASSERT_TRUE(WIFEXITED(raw)) << "killed by signal " << WTERMSIG(raw);
  EXPECT_EQ(WEXITSTATUS(raw), 130);
  ASSERT_TRUE(fs::exists(dir + "/checkpoints/last.ckpt"));
  std::ifstream m(dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(m, line)) last = line;
  const int64_t done = nlohmann::json::parse(last).at("epoch");
  auto resumed = run("spirals train --resume " + dir + " --epochs " + std::to_string(done + 1) + " --threads 1");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming"), std::string::npos) << resumed.output;
  std::ifstream s(dir + "/summary.json");
  EXPECT_EQ(nlohmann::json::parse(s).at("epochs"), done + 1);
}

TEST(Cli, LmCacheSizeReproducesTheArticle) {
  auto r = run("lm cache-size --layers 50 --heads 20 --dk 1000 --dv 1000 --seq 5000 --dtype f16 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("key_bytes"), 10000000000LL);
  EXPECT_EQ(j.at("value_bytes"), 10000000000LL);
  EXPECT_EQ(j.at("total_bytes"), 20000000000LL);
  auto small =
      nlohmann::json::parse(run("lm cache-size --layers 50 --heads 20 --dk 200 --dv 200 --seq 5000 --json").output);
  EXPECT_EQ(small.at("key_bytes"), 2000000000LL);
  // Binary units in the table: 2^30 bytes is 1 GiB (not "1.07 GB").
  auto gib = run("lm cache-size --layers 32 --heads 32 --dk 128 --dv 128 --seq 4096");
  ASSERT_EQ(gib.status, 0) << gib.output;
  EXPECT_NE(gib.output.find("1073741824 bytes  (1 GiB)"), std::string::npos) << gib.output;
  EXPECT_NE(gib.output.find("2147483648 bytes  (2 GiB)"), std::string::npos) << gib.output;
  expect_clean_failure(run("lm cache-size --layers 2 --heads 2 --dk 4 --dv 4 --seq 8 --dtype f8"), 2, "--dtype");
}

TEST(Cli, LmTrainGenerateAndBadText) {
  const auto dir = fresh_dir("lm");
  auto r =
      run("lm train --task copy --samples 200 --epochs 1 --d-model 16 --heads 2 --layers 1 --threads 1 --out " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto ckpt = dir + "/checkpoints/best.ckpt";
  auto cached =
      run("lm generate --checkpoint " + ckpt + " --prompt 'abc|' --max-new 12 --temperature 0.7 --seed 4 --json");
  auto plain = run("lm generate --checkpoint " + ckpt +
                   " --prompt 'abc|' --max-new 12 --temperature 0.7 --seed 4 --json --no-cache");
  ASSERT_EQ(cached.status, 0) << cached.output;
  EXPECT_EQ(nlohmann::json::parse(cached.output).at("tokens"), nlohmann::json::parse(plain.output).at("tokens"));
  EXPECT_EQ(nlohmann::json::parse(cached.output).at("tokens").size(), 12u);
  auto eval = run("lm eval --threads 1 --checkpoint " + ckpt);
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_TRUE(nlohmann::json::parse(eval.output).contains("generated_exact_match"));
  expect_clean_failure(run("spirals eval --checkpoint " + ckpt), 1,
                       "not by 'spirals train' (read it with 'qkv lm ...')");

  const auto empty = dir + "/empty.txt";
  std::ofstream(empty).close();
  expect_clean_failure(run("lm train --text " + empty + " --out " + dir + "_e"), 1, empty + ": the text file is empty");
  const auto binary = dir + "/binary.txt";
  std::ofstream(binary) << "ok\xff\xfe";
  expect_clean_failure(run("lm train --text " + binary + " --out " + dir + "_b"), 1, binary + ": not valid UTF-8");
  expect_clean_failure(run("lm train --task sorting --out " + dir + "_s"), 2,
                       "--task: sorting not in {copy,reverse,addition,induction}");
  // Induction's letters are distinct: 26 at most (27 was taken and cut to 26).
  expect_clean_failure(run("lm train --task induction --min-length 3 --max-length 27 --out " + dir + "_i"), 2,
                       "--max-length must be at most 26 for induction");
  expect_clean_failure(run("lm inspect-mlp --checkpoint " + ckpt + " --block 3 --text " + binary), 1,
                       "not valid UTF-8");
}

// With a learning rate too small to move a float32 weight, the validation
// loss never improves after epoch 1,
// so --patience 2 stops after epoch 3 and keeps epoch 1's weights.
TEST(Cli, PatienceStopsTrainingEarly) {
  const std::string out = qkv::testing::fresh_dir("patience");
  auto r =
      run(std::string("spirals train --epochs 30 --patience 2 --lr 1e-30 --select-metric loss --out ") + out + kFast);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto summary = qkv::testing::read_json(out + "/summary.json");
  EXPECT_EQ(summary.at("epochs"), 3);
  EXPECT_EQ(summary.at("selected_epoch"), 1);
  EXPECT_TRUE(summary.value("stopped_early", false));
  expect_clean_failure(run("spirals train --patience -1 --out " + qkv::testing::fresh_dir("p-1")), 2, "--patience");
}

TEST(Cli, AnUnknownSelectionMetricIsRefusedBeforeTheRunFolderIsMade) {
  // With a validation split or without (where no epoch would ever be scored by it).
  for (const char* val : {"0.2", "0"}) {
    const std::string out = qkv::testing::fresh_dir("select_bogus");
    expect_clean_failure(
        run(std::string("spirals train --select-metric bogus --val-fraction ") + val + " --out " + out + kFast), 2,
        "--select-metric bogus: the validation metrics have no 'bogus'; this run's are accuracy");
    EXPECT_FALSE(std::filesystem::exists(out)) << val;
  }
}
