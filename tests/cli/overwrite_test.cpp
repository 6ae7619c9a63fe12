// Every command that writes, against the overwrite policy
// (core/output_policy.h), as a user meets it: a fresh output is written; the
// same command again is refused with one line naming --overwrite and leaves
// every byte as it was; with --overwrite qkv's own files are written again and
// a user's files next to them are kept; a file qkv did not write is never
// replaced, not even with --overwrite; a synthetic-data folder holding a
// user's file is refused, and one qkv made the same way is reused.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "support/build_parts.h"
#include "support/cli_run.h"
#include "support/file_tree.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;

const std::string kUserBytes = "the user's own notes, not qkv's\n";

void put_user_file(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << kUserBytes;
}

// The first regular file in `dir` (sorted by name), or "".
std::string first_file_in(const std::string& dir) {
  std::vector<std::string> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files.empty() ? "" : files.front();
}

// (b) `cmd` into an output that exists: exit 2, one line naming --overwrite,
// nothing below `root` added, removed or rewritten.
void expect_refused_untouched(const std::string& cmd, const std::string& root) {
  const Tree before = snapshot(root);
  ASSERT_FALSE(before.empty()) << root;
  expect_clean_failure(run_qkv(cmd), 2, "--overwrite");
  EXPECT_EQ(changes(before, snapshot(root)), "") << cmd;
}

// (c) `cmd --overwrite` with a user's files in `dir` next to qkv's outputs:
// exit 0, the user's files kept byte for byte, each of `outputs` written again.
CliResult expect_overwrite_keeps_user_files(const std::string& cmd, const std::string& dir,
                                            const std::vector<std::string>& outputs) {
  put_user_file(dir + "/notes.txt");
  put_user_file(dir + "/mine/data.txt");  // and a folder of the user's
  const Tree before = snapshot(dir);
  const auto r = run_qkv(cmd + " --overwrite");
  EXPECT_EQ(r.status, 0) << cmd << " --overwrite\n" << r.output;
  EXPECT_EQ(read_text(dir + "/notes.txt"), kUserBytes);
  EXPECT_EQ(read_text(dir + "/mine/data.txt"), kUserBytes);
  const Tree after = snapshot(dir);
  for (const auto& o : outputs) {
    const auto it = after.find(o);
    EXPECT_TRUE(it != after.end()) << o << " missing after " << cmd << " --overwrite";
    if (it != after.end() && before.count(o)) {
      EXPECT_NE(it->second.mtime, before.at(o).mtime) << o << " was not written again";
    }
  }
  return r;
}

// (a), (b) and (c) for a command whose output is the folder `dir`; returns the
// first run's result.
CliResult exercise_folder_output(const std::string& cmd, const std::string& dir,
                                 const std::vector<std::string>& outputs) {
  const auto first = run_qkv(cmd);
  EXPECT_EQ(first.status, 0) << cmd << "\n" << first.output;
  if (first.status != 0) return first;
  for (const auto& o : outputs) EXPECT_TRUE(fs::exists(dir + "/" + o)) << o;
  expect_refused_untouched(cmd, dir);
  expect_overwrite_keeps_user_files(cmd, dir, outputs);
  return first;
}

// (a), (b) and (c) for a command writing one file: `cmd(path)` writes `path`
// (and `companions(path)`, other files it writes next to it). `dir` is a fresh
// folder; the output is dir/name. Then a file the user wrote at dir/foreign is
// refused, with and without --overwrite, and stays as it was.
void exercise_file_output(const std::function<std::string(const std::string&)>& cmd, const std::string& dir,
                          const std::string& name, const std::string& foreign,
                          const std::vector<std::string>& companions = {}) {
  const std::string out = dir + "/" + name;
  const auto first = run_qkv(cmd(out));
  ASSERT_EQ(first.status, 0) << cmd(out) << "\n" << first.output;
  ASSERT_TRUE(fs::is_regular_file(out)) << out;
  for (const auto& c : companions) EXPECT_TRUE(fs::is_regular_file(dir + "/" + c)) << c;
  expect_refused_untouched(cmd(out), dir);
  std::vector<std::string> outputs{name};
  outputs.insert(outputs.end(), companions.begin(), companions.end());
  expect_overwrite_keeps_user_files(cmd(out), dir, outputs);

  const std::string theirs = dir + "/" + foreign;
  put_user_file(theirs);
  const Tree before = snapshot(dir);
  expect_clean_failure(run_qkv(cmd(theirs)), 2, theirs);
  expect_clean_failure(run_qkv(cmd(theirs) + " --overwrite"), 2, theirs);
  EXPECT_EQ(changes(before, snapshot(dir)), "");
  EXPECT_EQ(read_text(theirs), kUserBytes);
}

// ---- fast settings of each command (one thread) ----

const std::string kSpirals = "spirals train --epochs 1 --points-per-arm 30 --batch-size 16 --threads 1";
const std::string kLm =
    "lm train --task copy --samples 100 --epochs 1 --d-model 16 --heads 2 --layers 1 --batch-size 16 --threads 1";
// A VNT-Net small enough to train an epoch in about a second.
const std::string kVntModel =
    "--points-per-shape 128 --points 64 --val-fraction 0.25 --linear-dim 8 --heads 2 --head-dim 4 "
    "--model-options '{\"k\":8}' --epochs 1 --batch-size 4 --threads 1 --seed 5";
const std::string kVntData = "--synth-classes box,sphere --synth-train-per-class 4 --synth-test-per-class 2";
const std::string kSegTrain =
    "seg train --synth-classes Table --synth-train-per-class 4 --synth-val-per-class 2 "
    "--synth-test-per-class 2 --synth-points-per-shape 200 --points-per-shape 128 --points 64 --linear-dim 8 "
    "--heads 2 --head-dim 4 --model-options '{\"k\":8}' --epochs 1 --batch-size 4 --threads 1 --seed 5";
const char* kTableSynset = "04379243";
// 24x28x24 volumes with padding-1 convolutions give 27 SPECT tokens.
const std::string kMhcaNet = "--model-options '{\"channels\":[4,8,8,8],\"padding\":1}'";

const std::vector<std::string> kRunFiles = {"config.json", "metrics.jsonl", "summary.json", "report.html",
                                            "checkpoints/best.ckpt"};

}  // namespace

TEST(Overwrite, SpiralsTrainAndExportWeights) {
  const std::string root = fresh_dir("ow_spirals");
  const std::string run = root + "/run";
  exercise_folder_output(kSpirals + " --out " + run, run, kRunFiles);

  // A folder qkv never wrote into is refused even with --overwrite.
  const std::string foreign = root + "/foreign";
  put_user_file(foreign + "/notes.txt");
  const Tree before = snapshot(foreign);
  expect_clean_failure(run_qkv(kSpirals + " --out " + foreign), 2, foreign);
  expect_clean_failure(run_qkv(kSpirals + " --out " + foreign + " --overwrite"), 2, foreign);
  EXPECT_EQ(changes(before, snapshot(foreign)), "");

  const std::string ckpt = run + "/checkpoints/best.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  exercise_file_output(
      [&](const std::string& out) { return "export-weights --checkpoint " + ckpt + " --output " + out; },
      root + "/weights", "w.pt", "mine.pt");
  fs::remove_all(root);
}

TEST(Overwrite, NothingIsWrittenOrDeletedThroughALink) {
  // A run folder whose checkpoints/ is a link to a user's folder holding files
  // of the names qkv writes there (and one named like a qkv temporary):
  // --overwrite and --resume are refused naming the link, and the user's
  // folder keeps every byte.
  const std::string root = fresh_dir("ow_links");
  const std::string run = root + "/run", mine = root + "/mine";
  ASSERT_EQ(run_qkv(kSpirals + " --out " + run).status, 0);
  for (const char* name : {"best.ckpt", "last.ckpt", ".notes.tmp.abc123"}) put_user_file(mine + "/" + name);
  fs::remove_all(run + "/checkpoints");
  fs::create_directory_symlink(mine, run + "/checkpoints");
  const Tree before = snapshot(mine);
  const auto overwrite = run_qkv(kSpirals + " --out " + run + " --overwrite");
  EXPECT_NE(overwrite.status, 0) << overwrite.output;
  EXPECT_NE(overwrite.output.find("checkpoints: is a symbolic link"), std::string::npos) << overwrite.output;
  EXPECT_EQ(count_lines(overwrite.output), 1) << overwrite.output;
  EXPECT_EQ(changes(before, snapshot(mine)), "");
  const auto resume = run_qkv("spirals train --resume " + run + " --epochs 3 --threads 1");
  EXPECT_NE(resume.status, 0) << resume.output;
  EXPECT_NE(resume.output.find("checkpoints: is a symbolic link"), std::string::npos) << resume.output;
  EXPECT_EQ(changes(before, snapshot(mine)), "");

  // A synthetic-data class folder that is a link: regenerating is refused.
  const std::string shapes = root + "/shapes", box = root + "/box";
  const std::string synth =
      "data synth-shapes --classes box,torus --train-per-class 2 --test-per-class 1 --out " + shapes;
  ASSERT_EQ(run_qkv(synth).status, 0);
  fs::rename(shapes + "/box", box);
  fs::create_directory_symlink(box, shapes + "/box");
  const Tree box_before = snapshot(box);
  const auto regenerate = run_qkv(synth + " --seed 7 --overwrite");
  EXPECT_NE(regenerate.status, 0) << regenerate.output;
  EXPECT_NE(regenerate.output.find("box: is a symbolic link"), std::string::npos) << regenerate.output;
  EXPECT_EQ(changes(box_before, snapshot(box)), "");
  fs::remove_all(root);
}

TEST(Overwrite, ALedgerThatCannotBeTrustedIsRefused) {
  // An empty ledger, one listing a name outside its folder, one replaced by
  // a link, one listing a user's file, and a file replaced since qkv wrote
  // it: --overwrite refuses naming the ledger or the file, and nothing
  // changes (the run, the user's files, the ledger itself).
  const std::string root = fresh_dir("ow_ledgers");
  const std::string run = root + "/run", ledger = run + "/.qkv-written";
  ASSERT_EQ(run_qkv(kSpirals + " --out " + run).status, 0);
  put_user_file(root + "/notes.txt");
  const std::string original = read_text(ledger);
  const auto refused = [&](const std::string& needle) {
    const Tree before = snapshot(root);
    const auto r = run_qkv(kSpirals + " --out " + run + " --overwrite");
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_EQ(count_lines(r.output), 1) << r.output;
    EXPECT_EQ(changes(before, snapshot(root)), "");
  };
  write_text_file(ledger, "");
  refused(".qkv-written: qkv's ledger is empty or damaged");
  write_text_file(ledger, original + "\"../notes.txt\"\n");
  refused("lists ../notes.txt, which is not a file below its folder");
  fs::remove(ledger);
  write_text_file(root + "/elsewhere.txt", original);
  fs::create_symlink(root + "/elsewhere.txt", ledger);
  refused(".qkv-written: is a symbolic link");
  // A user's file added to the ledger, and a file of qkv's replaced since.
  fs::remove(ledger);
  write_text_file(ledger, original + "\"user_notes.txt\"\n");
  put_user_file(run + "/user_notes.txt");
  refused("user_notes.txt: listed in qkv's ledger without a record of what qkv wrote");
  write_text_file(ledger, original);
  write_text_file(run + "/summary.json", "{\"mine\": 1}");
  refused("summary.json: changed since qkv wrote it");
  fs::remove_all(root);
}

TEST(Overwrite, LmTrain) {
  const std::string run = fresh_dir("ow_lm");
  exercise_folder_output(kLm + " --out " + run, run, kRunFiles);
  fs::remove_all(run);
}

TEST(Overwrite, DataSynthShapesAndSynthParts) {
  const std::string shapes = fresh_dir("ow_synth_shapes");
  exercise_folder_output("data synth-shapes --classes box,torus --train-per-class 2 --test-per-class 1 --out " + shapes,
                         shapes, {"README.txt", "box/train/box_0001.off", "torus/test/torus_0003.off"});
  fs::remove_all(shapes);

  const std::string parts = fresh_dir("ow_synth_parts");
  const std::string cmd =
      "data synth-parts --classes Table --train-per-class 1 --val-per-class 1 --test-per-class 1 "
      "--points-per-shape 100 --out " +
      parts;
  const auto r = run_qkv(cmd);
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string shape = first_file_in(parts + "/" + kTableSynset);
  ASSERT_FALSE(shape.empty());
  const std::string shape_rel = fs::relative(shape, parts).generic_string();
  fs::remove_all(parts);
  exercise_folder_output(cmd, parts, {"README.txt", shape_rel});
  fs::remove_all(parts);
}

TEST(Overwrite, VntTrainAndAttention) {
  const std::string root = fresh_dir("ow_vnt");
  const std::string run = root + "/run";
  const std::string train = "vnt train " + kVntData + " " + kVntModel + " --out " + run;
  const auto first = exercise_folder_output(train, run, kRunFiles);
  EXPECT_NE(first.output.find("synthetic shapes:"), std::string::npos) << first.output;
  EXPECT_TRUE(fs::exists(run + "/synthetic/box/test"));

  // A bad synthetic count is refused before the run folder (and the synthetic
  // tree in it) is touched, with --overwrite too.
  const Tree before = snapshot(run);
  const std::string bad = "vnt train --synth-classes box,sphere --synth-train-per-class -2 --synth-test-per-class 2 " +
                          kVntModel + " --out " + run;
  expect_clean_failure(run_qkv(bad), 2, "--synth-train-per-class");
  expect_clean_failure(run_qkv(bad + " --overwrite"), 2, "--synth-train-per-class");
  EXPECT_EQ(changes(before, snapshot(run)), "");
  // Data that cannot be read are found after the run folder is claimed, and
  // before the run writes: --overwrite then leaves the earlier run as it was
  // (it had emptied it, the ledger too).
  const std::string missing = root + "/no_such_shapes";
  expect_clean_failure(run_qkv("vnt train --data " + missing + " " + kVntModel + " --out " + run + " --overwrite"), 1,
                       missing);
  EXPECT_EQ(changes(before, snapshot(run)), "");

  const std::string shape = first_file_in(run + "/synthetic/box/test");
  ASSERT_FALSE(shape.empty());
  const std::string out = root + "/attention";
  exercise_folder_output(
      "vnt attention --threads 1 --checkpoint " + run + "/checkpoints/best.ckpt --input " + shape + " --out " + out,
      out, {"shape.ply", "rotated.ply", "shape.png", "rotated.png"});
  fs::remove_all(root);
}

TEST(Overwrite, SegTrainAndPredict) {
  const std::string root = fresh_dir("ow_seg");
  const std::string run = root + "/run";
  exercise_folder_output(kSegTrain + " --out " + run, run, kRunFiles);

  const std::string shape = first_file_in(run + "/synthetic/" + kTableSynset);
  ASSERT_FALSE(shape.empty());
  const std::string predict =
      "seg predict --threads 1 --checkpoint " + run + "/checkpoints/best.ckpt --input " + shape + " --class Table";
  // --out is a folder: <input name>.parts.ply and .png in it.
  const std::string dir = root + "/predicted";
  const std::string stem = fs::path(shape).stem().string();
  const std::vector<std::string> outputs = {stem + ".parts.ply", stem + ".parts.png"};
  exercise_folder_output(predict + " --out " + dir, dir, outputs);
  // A user's PLY or PNG of that name is never replaced, and neither file is
  // written: a folder of the user's is refused whole, naming it.
  for (const auto& theirs : outputs) {
    const std::string other = root + "/theirs_" + theirs.substr(theirs.size() - 3);
    put_user_file(other + "/" + theirs);
    const Tree before = snapshot(other);
    expect_clean_failure(run_qkv(predict + " --out " + other + " --overwrite"), 2,
                         other + ": not empty and holds nothing qkv wrote");
    EXPECT_EQ(changes(before, snapshot(other)), "");
  }
  fs::remove_all(root);
}

// The synthetic tree of `qkv data synth-shapes` is what `vnt train` reads when
// made with the same settings; a file of the user's in it is refused (a
// loader would take it for data) and nothing is deleted.
TEST(Overwrite, SynthDirWithAUserFileIsRefusedAndReusedWithout) {
  const std::string root = fresh_dir("ow_synth_dir");
  const std::string synth = root + "/shapes";
  const auto made = run_qkv(
      "data synth-shapes --classes box,sphere --train-per-class 4 --test-per-class 2 --seed 5 "
      "--out " +
      synth);
  ASSERT_EQ(made.status, 0) << made.output;
  put_user_file(synth + "/notes.txt");
  const Tree with_notes = snapshot(synth);
  const std::string run = root + "/run";
  const std::string train = "vnt train --synth-dir " + synth + " " + kVntData + " " + kVntModel + " --out " + run;
  expect_clean_failure(run_qkv(train), 2, "notes.txt");
  EXPECT_EQ(changes(with_notes, snapshot(synth)), "");
  expect_clean_failure(run_qkv(train + " --overwrite"), 2, "notes.txt");
  EXPECT_EQ(changes(with_notes, snapshot(synth)), "");
  EXPECT_FALSE(fs::exists(run)) << "the run folder was created before the refusal";

  // Without it, the tree is reused as it is: not generated again.
  fs::remove(synth + "/notes.txt");
  const Tree clean = snapshot(synth);
  const auto r = run_qkv(train);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("synthetic shapes:"), std::string::npos) << r.output;
  EXPECT_EQ(changes(clean, snapshot(synth)), "");
  EXPECT_TRUE(fs::exists(run + "/summary.json"));

  // A bad count with an existing synthetic tree: refused, the tree unchanged.
  for (const std::string extra : {"", " --overwrite"}) {
    expect_clean_failure(run_qkv("vnt train --synth-dir " + synth +
                                 " --synth-classes box,sphere --synth-train-per-class -2 --synth-test-per-class 2 " +
                                 kVntModel + " --out " + root + "/run2" + extra),
                         2, "--synth-train-per-class");
    EXPECT_EQ(changes(clean, snapshot(synth)), "") << extra;
  }
  EXPECT_FALSE(fs::exists(root + "/run2"));
  fs::remove_all(root);
}

// mhca on a small synthetic cohort: one MHCA run shared by select, predict and explain.
class OverwriteMhca : public ::testing::Test {
 protected:
  // Without NIfTI or XGBoost there is no cohort or run to make: each test
  // skips (a skip in SetUpTestSuite would not stop the tests).
  static bool buildable() { return qkv::built_with(qkv::Part::Nifti) && qkv::built_with(qkv::Part::XGBoost); }
  void SetUp() override {
    QKV_SKIP_WITHOUT(qkv::Part::Nifti);
    QKV_SKIP_WITHOUT(qkv::Part::XGBoost);
  }
  static void SetUpTestSuite() {
    if (!buildable()) return;
    root_ = fresh_dir("ow_mhca");
    cohort_ = root_ + "/cohort";
    const auto s = run_qkv("mhca synth --out " + cohort_ +
                           " --subjects 20 --pd-fraction 0.5 --cpg 80 --shape 24,28,24 --atlas none --seed 3 "
                           "--threads 1");
    ASSERT_EQ(s.status, 0) << s.output;
    run_ = root_ + "/mhca_run";
    const auto t = run_qkv(train_command(run_));
    ASSERT_EQ(t.status, 0) << t.output;
  }
  static void TearDownTestSuite() {
    if (!root_.empty()) fs::remove_all(root_);
  }
  static std::string cohort_args() {
    return "--manifest " + cohort_ + "/manifest.csv --methylation " + cohort_ + "/methylation.csv";
  }
  // MHCA with RFE to the 27 SPECT tokens, one epoch.
  static std::string train_command(const std::string& out) {
    return "mhca train " + cohort_args() + " " + kMhcaNet +
           " --model mhca --xgb-estimators 5 --epochs 1 --threads 1 --out " + out;
  }
  static std::string root_, cohort_, run_;
};
std::string OverwriteMhca::root_, OverwriteMhca::cohort_, OverwriteMhca::run_;

TEST_F(OverwriteMhca, Synth) {
  const std::string out = root_ + "/small_cohort";
  exercise_folder_output(
      "mhca synth --subjects 4 --pd-fraction 0.5 --cpg 50 --shape 24,28,24 --atlas none --seed 1 "
      "--threads 1 --out " +
          out,
      out, {"manifest.csv", "methylation.csv", "ground_truth.json"});
}

TEST_F(OverwriteMhca, TrainAndCrossValidation) {
  const std::string run = root_ + "/train";
  exercise_folder_output(train_command(run), run, {"config.json", "summary.json", "checkpoints/best.ckpt"});
  const std::string cv = root_ + "/cv";
  exercise_folder_output("mhca cv " + cohort_args() +
                             " --model xgboost --select all --runs 1 --folds 2 --xgb-estimators 5 --threads 1 --out " +
                             cv,
                         cv, {"summary.json", "predictions.csv", "report.html"});
}

TEST_F(OverwriteMhca, SelectPredictExplain) {
  exercise_file_output(
      [&](const std::string& out) {
        return "mhca select " + cohort_args() + " --n-features 10 --xgb-estimators 5 --threads 1 --output " + out;
      },
      root_ + "/selected", "cpgs.txt", "mine.txt");
  const std::string ckpt = run_ + "/checkpoints/best.ckpt";
  ASSERT_TRUE(fs::exists(ckpt)) << "the shared mhca run failed";
  exercise_file_output(
      [&](const std::string& out) {
        return "mhca predict " + cohort_args() + " --checkpoint " + ckpt + " --threads 1 --output " + out;
      },
      root_ + "/predicted", "pred.csv", "mine.csv");
  const std::string ex = root_ + "/explain";
  exercise_folder_output("mhca explain " + cohort_args() + " --checkpoint " + ckpt + " --all --threads 1 --out " + ex,
                         ex, {"explain.json", "cpg_attention.csv"});
}

TEST_F(OverwriteMhca, AVolumeTheManifestListsIsAnInputToo) {
  // A manifest naming a volume inside --out: --overwrite would empty the
  // folder before the volume is read (an earlier explanation's map, say).
  const std::string out = root_ + "/listed_out", manifest = root_ + "/listed_manifest.csv";
  fs::create_directories(out);
  std::string text = read_text(cohort_ + "/manifest.csv");
  const auto first_row = text.find('\n') + 1;
  const auto spect = text.find("spect/", first_row);
  const auto end = text.find(".nii.gz", spect) + 7;
  fs::copy_file(cohort_ + "/" + text.substr(spect, end - spect), out + "/volume.nii.gz");
  text.replace(spect, end - spect, "listed_out/volume.nii.gz");
  write_text_file(manifest, text);
  const Tree before = snapshot(out);
  const std::string ckpt = run_ + "/checkpoints/best.ckpt";
  for (const auto& command :
       {"mhca explain --manifest " + manifest + " --methylation " + cohort_ + "/methylation.csv --checkpoint " + ckpt +
            " --all --threads 1 --overwrite --out " + out,
        "mhca train --manifest " + manifest + " --methylation " + cohort_ + "/methylation.csv " + kMhcaNet +
            " --model mhca --epochs 1 --threads 1 --overwrite --out " + out})
    expect_clean_failure(run_qkv(command), 2,
                         out + ": holds " + out + "/volume.nii.gz (listed in --manifest " + manifest + ")");
  EXPECT_EQ(changes(before, snapshot(out)), "");
}

TEST_F(OverwriteMhca, SynthNeverWritesThroughALinkedSpectFolder) {
  const std::string out = root_ + "/linked_cohort", mine = root_ + "/my_spect";
  const std::string synth =
      "mhca synth --subjects 4 --pd-fraction 0.5 --cpg 50 --shape 24,28,24 --atlas none "
      "--threads 1 --out " +
      out;
  ASSERT_EQ(run_qkv(synth + " --seed 1").status, 0);
  fs::rename(out + "/spect", mine);
  fs::create_directory_symlink(mine, out + "/spect");
  put_user_file(mine + "/notes.txt");
  const Tree before = snapshot(mine);
  const auto r = run_qkv(synth + " --seed 2 --overwrite");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("spect: is a symbolic link"), std::string::npos) << r.output;
  EXPECT_EQ(changes(before, snapshot(mine)), "");
}

TEST_F(OverwriteMhca, CrossValidationResumesOnlyItsOwnFolderWithItsOwnSettings) {
  const std::string cv = root_ + "/cv_resume";
  const std::string base =
      "mhca cv " + cohort_args() + " " + kMhcaNet + " --select all --xgb-estimators 5 --threads 1 --runs 1";
  ASSERT_EQ(run_qkv(base + " --model xgboost --folds 2 --out " + cv).status, 0);
  const Tree cv_before = snapshot(cv), run_before = snapshot(run_);
  // Another command's run, another model set, other folds, no folder at all.
  expect_clean_failure(run_qkv(base + " --model xgboost --folds 2 --resume --out " + run_), 2,
                       "made by 'qkv mhca train', not by 'qkv mhca cv'");
  EXPECT_EQ(changes(run_before, snapshot(run_)), "");
  // (These are found once the cohort is read, after its one-line summaries.)
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {" --model spectnet --folds 2", "models: [\"xgboost\"] there, [\"spectnet\"] now"},
           {" --model xgboost --folds 3", "folds: 2 there, 3 now"}}) {
    const auto r = run_qkv(base + args + " --resume --out " + cv);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(
        r.output.find("qkv mhca cv: error: --out " + cv + " holds a cross validation with other settings (" + needle),
        std::string::npos)
        << r.output;
  }
  EXPECT_EQ(changes(cv_before, snapshot(cv)), "");
  expect_clean_failure(run_qkv(base + " --model xgboost --folds 2 --resume --out " + root_ + "/no_such_cv"), 2,
                       "no_such_cv: no such folder");
  EXPECT_FALSE(fs::exists(root_ + "/no_such_cv"));
  // The same settings continue (all folds done: nothing trained again).
  const auto same = run_qkv(base + " --model xgboost --folds 2 --resume --out " + cv);
  EXPECT_EQ(same.status, 0) << same.output;
  {  // The same files holding other values: the finished folds are of the old ones.
    const std::string table = root_ + "/cv_resume_methylation.csv", changed_cv = root_ + "/cv_changed";
    fs::copy_file(cohort_ + "/methylation.csv", table);
    const std::string args = "mhca cv --manifest " + cohort_ + "/manifest.csv --methylation " + table +
                             " --select all --xgb-estimators 5 --threads 1 --runs 1 --model xgboost --folds 2 --out " +
                             changed_cv;
    ASSERT_EQ(run_qkv(args).status, 0);
    std::string text = read_text(table);
    const auto cell = text.find(",0.", text.find('\n'));  // the first value of the first subject
    ASSERT_NE(cell, std::string::npos);
    text[cell + 3] = text[cell + 3] == '9' ? '1' : '9';
    std::ofstream(table, std::ios::trunc) << text;
    const Tree before = snapshot(changed_cv);
    const auto r = run_qkv(args + " --resume");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("holds a cross validation with other settings (cohort.data_crc32: "), std::string::npos)
        << r.output;
    EXPECT_EQ(changes(before, snapshot(changed_cv)), "");
  }
}

}  // namespace qkv::testing
