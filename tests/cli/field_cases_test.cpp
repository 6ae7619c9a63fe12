// Cases a hostile-input run found in the field, each at the CLI with the
// user's files compared byte for byte before and after: an output that is an
// input, inputs that are not regular files, a polygon of millions of corners,
// NaN where a number must be, thread counts from the environment, class names
// that are not UTF-8, and an interrupted `mhca train` resumed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "qkv/core/crc32.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/nifti.h"
#include "qkv/runtime/sanitizers.h"
#include "support/build_parts.h"
#include "support/cli_run.h"
#include "support/file_tree.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using qkv::testing::changes;
using qkv::testing::expect_clean_failure;
using qkv::testing::fresh_dir;
using qkv::testing::read_json;
using qkv::testing::read_text;
using qkv::testing::run_qkv;
using qkv::testing::snapshot;
using qkv::testing::write_text_file;

// The cohort and the tiny LM run several cases read, made once and removed
// with the suite.
class FieldCases : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    for (const auto* dir : {&cohort_root_, &lm_root_})
      if (!dir->empty()) fs::remove_all(*dir);
  }
  // A small synthetic cohort.
  static std::string cohort() {
    if (cohort_root_.empty()) {
      cohort_root_ = fresh_dir("field_cohort");
      const auto r = run_qkv("mhca synth --out " + cohort_root_ +
                             "/cohort --subjects 24 --pd-fraction 0.5 --cpg 60 --shape 24,28,24 --atlas none --seed 5");
      EXPECT_EQ(r.status, 0) << r.output;
    }
    return cohort_root_ + "/cohort";
  }
  static std::string cohort_args(const std::string& dir = cohort()) {
    return "--manifest " + dir + "/manifest.csv --methylation " + dir + "/methylation.csv";
  }
  // A tiny byte-level LM run (seconds), for the commands that read a checkpoint.
  static std::string tiny_lm_run() {
    if (lm_root_.empty()) {
      lm_root_ = fresh_dir("field_lm");
      const auto r = run_qkv(
          "lm train --task copy --samples 32 --epochs 1 --d-model 16 --heads 2 --layers 1 "
          "--threads 1 --out " +
          lm_root_);
      EXPECT_EQ(r.status, 0) << r.output;
    }
    return lm_root_;
  }
  static std::string cohort_root_, lm_root_;
};
std::string FieldCases::cohort_root_;
std::string FieldCases::lm_root_;

TEST_F(FieldCases, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
  QKV_SKIP_WITHOUT(qkv::Part::Nifti);
  QKV_SKIP_WITHOUT(qkv::Part::XGBoost);
  const auto before = snapshot(cohort());
  // The run folder is the cohort's own folder: refused before anything is deleted.
  expect_clean_failure(run_qkv("mhca train " + cohort_args() + " --model xgboost --out " + cohort() + " --overwrite"),
                       2, "holds --manifest");
  // The predictions CSV would replace the manifest it is computed from.
  const std::string dummy = fresh_dir("field_dummy") + ".ckpt";
  write_text_file(dummy, "not read");
  expect_clean_failure(run_qkv("mhca predict " + cohort_args() + " --checkpoint " + dummy + " --output " + cohort() +
                               "/manifest.csv --overwrite"),
                       2, "is --manifest");
  expect_clean_failure(
      run_qkv("mhca select " + cohort_args() + " --output " + cohort() + "/methylation.csv --overwrite --n-features 5"),
      2, "is --methylation");
  EXPECT_EQ(changes(before, snapshot(cohort())), "");
  // A CpG list that `mhca select` wrote, given to a run into the same folder.
  const std::string selected = fresh_dir("field_select");
  ASSERT_EQ(run_qkv("mhca select " + cohort_args() + " --output " + selected +
                    "/cpgs.txt --n-features 5 --xgb-estimators 5 --threads 1")
                .status,
            0);
  const auto list_before = snapshot(selected);
  expect_clean_failure(run_qkv("mhca train " + cohort_args() + " --model xgboost --cpg-list " + selected +
                               "/cpgs.txt --out " + selected + " --overwrite"),
                       2, "--cpg-list");
  EXPECT_EQ(changes(list_before, snapshot(selected)), "");
  fs::remove_all(selected);
  fs::remove(dummy);
}

TEST_F(FieldCases, InputsThatAreNotRegularFilesAreRefusedAtOnce) {
  const std::string dir = fresh_dir("field_fifo");
  fs::create_directories(dir);
  const std::string fifo = dir + "/pipe.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", dir + "/zero.txt");
  // Each of these hung (FIFO) or grew past 3.5 GB (/dev/zero).
  expect_clean_failure(run_qkv("lm train --text " + fifo + " --epochs 1 --out " + dir + "/run"), 1,
                       "is not a regular file");
  expect_clean_failure(run_qkv("lm train --text " + dir + "/zero.txt --epochs 1 --out " + dir + "/run"), 1,
                       "is not a regular file");
  const std::string ckpt = tiny_lm_run() + "/checkpoints/last.ckpt";
  expect_clean_failure(run_qkv("lm generate --checkpoint " + ckpt + " --prompt ab --load-cache " + fifo), 1,
                       "is not a regular file");
  expect_clean_failure(run_qkv("lm generate --checkpoint " + ckpt + " --prompt ab --load-cache " + dir + "/zero.txt"),
                       1, "is not a regular file");
  expect_clean_failure(run_qkv("lm inspect-mlp --checkpoint " + ckpt + " --text " + fifo), 1, "is not a regular file");
  // A data folder that is a FIFO was "no such folder".
  for (const char* command : {"vnt train", "seg train"})
    expect_clean_failure(run_qkv(std::string(command) + " --data " + fifo + " --epochs 1 --out " + dir + "/run"), 1,
                         fifo + ": not a folder (a FIFO, device or socket)");
  EXPECT_FALSE(fs::exists(dir + "/run"));
  fs::remove_all(dir);
}

TEST_F(FieldCases, APromptCacheHoldingNaNIsRefusedNamingTheFile) {
  const std::string ckpt = tiny_lm_run() + "/checkpoints/last.ckpt";
  const std::string file = tiny_lm_run() + "/nan.kvc";
  ASSERT_EQ(
      run_qkv("lm generate --checkpoint " + ckpt + " --prompt 'abc|' --max-new 2 --save-cache " + file + " --overwrite")
          .status,
      0);
  // A NaN written into the first float32 keys tensor, the checksum made good.
  std::string bytes = read_text(file);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data() + 8, 8);
  const auto header = nlohmann::json::parse(bytes.substr(16, header_length));
  bool poisoned = false;
  for (const auto& sec : header.at("sections"))
    if (sec.at("role") == "keys" && sec.at("dtype") == "Float") {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(&bytes[16 + header_length + sec.at("offset").get<size_t>()], &nan, 4);
      poisoned = true;
      break;
    }
  ASSERT_TRUE(poisoned) << header.dump();
  const uint32_t crc = qkv::crc32(bytes.data(), bytes.size() - 4);
  std::memcpy(&bytes[bytes.size() - 4], &crc, 4);
  write_text_file(file, bytes);
  expect_clean_failure(run_qkv("lm generate --checkpoint " + ckpt + " --prompt 'abc|d' --load-cache " + file), 1,
                       file + ": its keys of layer 0 hold NaN or an infinity");
}

TEST_F(FieldCases, OnePolygonOfMillionsOfCornersTakesMemoryInProportionToTheFile) {
  // 4 vertices and one face of 3,000,000 corners: a 6 MB file. The reader
  // and the sampler took about 55x the file before; now the triangles are
  // stored once, exactly (24 bytes each, from 2 bytes a corner), and the
  // sampler's 8 bytes a triangle come on top: 17x, bounded here by 24x.
  const std::string dir = fresh_dir("field_fan");
  fs::create_directories(dir);
  const std::string off = dir + "/fan.off";
  {
    const int64_t corners = 3000000;
    std::string text = "OFF\n4 1 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n" + std::to_string(corners);
    text.reserve(static_cast<size_t>(corners) * 2 + 64);
    for (int64_t i = 0; i < corners; ++i) text += i == 0 ? " 0" : i % 2 ? " 1" : " 3";
    text += "\n";
    write_text_file(off, text);
  }
  const long file_kib = static_cast<long>(fs::file_size(off) / 1024);
  auto peak_kib = [](const std::vector<std::string>& args) {
    return qkv::testing::qkv_status_and_peak_kib(args).second;
  };
  const std::string run = dir + "/run";
  ASSERT_EQ(run_qkv("vnt train --synth-classes box,sphere --synth-train-per-class 4 --synth-test-per-class 1 "
                    "--points-per-shape 64 --points 32 --epochs 1 --batch-size 4 --linear-dim 4 --heads 2 "
                    "--head-dim 4 --model-options '{\"k\":4}' --threads 1 --out " +
                    run)
                .status,
            0);
  const std::string ckpt = run + "/checkpoints/best.ckpt";
  const long baseline = peak_kib({"vnt", "predict", "--checkpoint", ckpt, "--input", dir + "/missing.off"});
  const long peak = peak_kib({"vnt", "predict", "--checkpoint", ckpt, "--input", off});
  EXPECT_LT(peak - baseline, 24 * file_kib)
      << "peak " << peak << " KiB, baseline " << baseline << ", file " << file_kib;
  fs::remove_all(dir);
}

TEST_F(FieldCases, ThreadCountsFromTheEnvironmentAreCappedAsTheOptionIs) {
  const std::string dir = fresh_dir("field_threads");
  const auto r = qkv::testing::run_shell("OMP_NUM_THREADS=100000 " + std::string(qkv::testing::qkv_binary()) +
                                         " spirals train --points-per-arm 20 --epochs 1 --out " + dir + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto threads = read_json(dir + "/config.json").at("threads").get<int64_t>();
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, 4 * static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency())));
  fs::remove_all(dir);
}

TEST_F(FieldCases, AClassFolderWhoseNameIsNotUtf8IsRefusedNotMerged) {
  const std::string dir = fresh_dir("field_names");
  const std::string cube = "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3\n";
  for (const std::string& name : {std::string("caf\xe9"), std::string("caf\xe8")})
    for (const char* shape : {"a.off", "b.off"}) write_text_file(fs::path(dir) / name / shape, cube);
  expect_clean_failure(run_qkv("vnt train --data " + dir + " --epochs 1 --out " + dir + "-run"), 1,
                       "class folder's name must be UTF-8");
  EXPECT_FALSE(fs::exists(dir + "-run"));
  fs::remove_all(dir);
}

TEST_F(FieldCases, MhcaTrainResumesFromItsFolderAlone) {
  QKV_SKIP_WITHOUT(qkv::Part::Nifti);
  QKV_SKIP_WITHOUT(qkv::Part::XGBoost);
  const std::string dir = fresh_dir("field_mhca_resume");
  const std::string net = " --model mhca --model-options '{\"channels\":[4,8,8,8],\"padding\":1}' --batch-size 8";
  const auto first = run_qkv("mhca train " + cohort_args() + net + " --epochs 1 --threads 1 --out " + dir);
  ASSERT_EQ(first.status, 0) << first.output;
  // Neither --manifest nor the other data settings are asked for again.
  const auto resumed = run_qkv("mhca train --resume " + dir + " --epochs 2 --threads 1");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(read_json(dir + "/summary.json").at("epochs").get<int64_t>(), 2);
  // A new run still needs its cohort, said by the option's name.
  expect_clean_failure(run_qkv("mhca train --model xgboost --out " + dir + "-new"), 2, "--manifest");

  // The same cohort mirrored in x (the sform's first column negated, the
  // voxels as they were): the checkpoint's grid matches, its orientation not.
  const std::string mirrored = dir + "-mirrored";
  fs::copy(cohort(), mirrored, fs::copy_options::recursive);
  const std::string turned = dir + "-turned";
  fs::copy(cohort(), turned, fs::copy_options::recursive);
  for (const auto& subject : qkv::medical::read_manifest(mirrored + "/manifest.csv").subjects) {
    auto v = qkv::medical::read_nifti(subject.spect_path);
    v.geometry.qform_code = 0;
    for (int r = 0; r < 3; ++r) v.geometry.sform[static_cast<size_t>(4 * r)] *= -1;
    fs::remove(subject.spect_path);
    qkv::medical::write_nifti(subject.spect_path, v);
  }
  // And turned 30 degrees about z: --reorient cannot straighten it.
  for (const auto& subject : qkv::medical::read_manifest(turned + "/manifest.csv").subjects) {
    auto v = qkv::medical::read_nifti(subject.spect_path);
    v.geometry.qform_code = 0;
    const double c = std::cos(M_PI / 6), s = std::sin(M_PI / 6);
    auto& m = v.geometry.sform;
    const std::array<double, 4> x{m[0], m[1], m[2], m[3]}, y{m[4], m[5], m[6], m[7]};
    for (size_t k = 0; k < 3; ++k) {
      m[k] = c * x[k] - s * y[k];
      m[4 + k] = s * x[k] + c * y[k];
    }
    fs::remove(subject.spect_path);
    qkv::medical::write_nifti(subject.spect_path, v);
  }
  // And with voxels twice as large (the grid the same).
  const std::string coarse = dir + "-coarse";
  fs::copy(cohort(), coarse, fs::copy_options::recursive);
  for (const auto& subject : qkv::medical::read_manifest(coarse + "/manifest.csv").subjects) {
    auto v = qkv::medical::read_nifti(subject.spect_path);
    v.geometry.qform_code = 0;
    for (size_t e = 0; e < 12; ++e)
      if (e % 4 != 3) v.geometry.sform[e] *= 2;
    for (auto& s : v.geometry.spacing) s *= 2;
    fs::remove(subject.spect_path);
    qkv::medical::write_nifti(subject.spect_path, v);
  }
  const std::string ckpt = dir + "/checkpoints/best.ckpt";
  expect_clean_failure(
      run_qkv("mhca predict " + cohort_args(coarse) + " --checkpoint " + ckpt + " --output " + dir + "-out/pred.csv"),
      1, "its voxels are 15.1667x15.5714x15.1667 mm, " + ckpt + " was trained on voxels of 7.58333x7.78571x7.58333 mm");
  expect_clean_failure(
      run_qkv("mhca predict " + cohort_args(mirrored) + " --checkpoint " + ckpt + " --output " + dir + "-out/pred.csv"),
      1, "was trained on volumes oriented LAS+");
  EXPECT_FALSE(fs::exists(dir + "-out"));
  expect_clean_failure(run_qkv("mhca predict " + cohort_args(turned) + " --checkpoint " + ckpt + " --output " + dir +
                               "-out/pred.csv --reorient"),
                       1, "turned 30.0 degrees from the world axes");
  // The training cohort itself is predicted as before.
  EXPECT_EQ(
      run_qkv("mhca predict " + cohort_args() + " --checkpoint " + ckpt + " --output " + dir + "-out/pred.csv").status,
      0);
  for (const auto& d : {dir, mirrored, turned, coarse, dir + "-out"}) fs::remove_all(d);
}

TEST_F(FieldCases, SegPredictWritesOnlyIntoItsOwnOrAnEmptyFolder) {
  const std::string dir = fresh_dir("field_seg");
  write_text_file(dir + "/notes.txt", "mine");
  write_text_file(dir + "/cloud.xyz", "0 0 0\n1 0 0\n0 1 0\n");
  write_text_file(dir + "/run.ckpt", "not read");
  const std::string user = dir + "-user";
  write_text_file(user + "/mine.txt", "mine");
  const auto before = snapshot(dir);
  const std::string predict =
      "seg predict --checkpoint " + dir + "/run.ckpt --input " + dir + "/cloud.xyz --class airplane --out ";
  // The folder holding the input, and a folder of the user's: refused before the checkpoint is read.
  expect_clean_failure(run_qkv(predict + dir), 2, "holds --input");
  expect_clean_failure(run_qkv(predict + user), 2, "holds nothing qkv wrote");
  EXPECT_EQ(read_text(user + "/mine.txt"), "mine");
  fs::remove_all(user);
  EXPECT_EQ(changes(before, snapshot(dir)), "");
  fs::remove_all(dir);
}

TEST_F(FieldCases, AFolderAnotherCommandWroteIntoIsRefusedBeforeTheRun) {
  // A folder export-weights made, where the user keeps a report.html: a train
  // command's --overwrite is refused before anything changes, not after the
  // training when it writes its report (a user's report.html in a folder of
  // the same command: OutputPolicy.ANameTheRunWillWriteIsCheckedBeforeTheRun).
  const std::string root = fresh_dir("field_user_report");
  const std::string run = root + "/run", dir = root + "/shared";
  ASSERT_EQ(run_qkv("spirals train --points-per-arm 20 --epochs 1 --threads 1 --out " + run).status, 0);
  ASSERT_EQ(run_qkv("export-weights --checkpoint " + run + " --output " + dir + "/weights.pt").status, 0);
  write_text_file(dir + "/report.html", "<p>my notes</p>");
  const auto before = snapshot(dir);
  expect_clean_failure(run_qkv("spirals train --points-per-arm 20 --epochs 1 --threads 1 --overwrite --out " + dir), 2,
                       dir + ": made by 'qkv export-weights', not by 'qkv spirals train'");
  EXPECT_EQ(changes(before, snapshot(dir)), "");
  fs::remove_all(root);
}

TEST_F(FieldCases, ThousandsOfClassesCostLinearlyInTheRunsFilesAndMemory) {
  // 3,000 classes of 2 shapes each: the n x n confusion matrices made a
  // 298 MB summary.json and a report past 3.5 GB to build.
  const std::string root = fresh_dir("field_classes");
  const std::string tetra = "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3\n";
  for (int c = 0; c < 3000; ++c) {
    char name[16];
    std::snprintf(name, sizeof name, "c%04d", c);
    for (const char* shape : {"a.off", "b.off"}) write_text_file(fs::path(root) / "data" / name / shape, tetra);
  }
  const std::string run = root + "/run";
  const std::vector<std::string> args = {"vnt",
                                         "train",
                                         "--data",
                                         root + "/data",
                                         "--epochs",
                                         "1",
                                         "--points",
                                         "32",
                                         "--points-per-shape",
                                         "64",
                                         "--batch-size",
                                         "32",
                                         "--linear-dim",
                                         "4",
                                         "--heads",
                                         "2",
                                         "--head-dim",
                                         "4",
                                         "--model-options",
                                         "{\"k\":4}",
                                         "--threads",
                                         "1",
                                         "--out",
                                         run};
  const auto [status, peak] = qkv::testing::qkv_status_and_peak_kib(args);
  ASSERT_EQ(status, 0);
  // 269 MB here, 94 MB above qkv's start-up. Under AddressSanitizer freed
  // memory waits in its quarantine (256 MB): the peak is the sanitizer's.
  if (!qkv::kAddressSanitizer) {
    EXPECT_LT(peak - qkv::testing::qkv_baseline_peak_kib(), 400L * 1024) << "KiB";
  }
  EXPECT_LT(fs::file_size(run + "/summary.json"), 3u << 20);
  EXPECT_LT(fs::file_size(run + "/report.html"), 3u << 20);
  const auto test = read_json(run + "/summary.json").at("test");
  EXPECT_FALSE(test.contains("confusion"));
  EXPECT_EQ(test.at("classes").size(), 3000u);
  EXPECT_GT(test.at("per_class").size(), 0u);  // the classes in the test split or predicted
  EXPECT_LE(test.at("per_class").size(), 3000u);
  ASSERT_TRUE(test.at("top_confusions").is_array());
  EXPECT_LE(test.at("top_confusions").size(), 20u);
  EXPECT_NE(read_text(run + "/report.html").find("most frequent confusions of 3,000 classes"), std::string::npos);
  fs::remove_all(root);
}

TEST_F(FieldCases, TwoRunsIntoOneFolderOneIsRefusedNamingTheOther) {
  // Both ran; config.json was one run's, the checkpoints the other's.
  const std::string dir = fresh_dir("field_two_runs");
  const pid_t first = qkv::testing::start_qkv_quietly(
      {"spirals", "train", "--points-per-arm", "20", "--epochs", "1000000", "--threads", "1", "--out", dir});
  ASSERT_GT(first, 0);
  for (int i = 0; i < 200 && !fs::exists(dir + "/config.json"); ++i) ::usleep(50 * 1000);
  ASSERT_TRUE(fs::exists(dir + "/config.json"));
  const auto second =
      run_qkv("spirals train --points-per-arm 20 --epochs 1 --lr 0.002 --threads 1 --overwrite --out " + dir);
  expect_clean_failure(
      second, 2, "another qkv command is writing there (process " + std::to_string(first) + ": qkv spirals train");
  EXPECT_EQ(read_json(dir + "/config.json").at("train").at("lr").get<double>(), 0.01);  // the first run's, untouched
  // The holder killed: its folder is taken over by the next command.
  ::kill(first, SIGKILL);
  int status = 0;
  ::waitpid(first, &status, 0);
  const auto next =
      run_qkv("spirals train --points-per-arm 20 --epochs 1 --lr 0.002 --threads 1 --overwrite --out " + dir);
  EXPECT_EQ(next.status, 0) << next.output;
  EXPECT_EQ(read_json(dir + "/config.json").at("train").at("lr").get<double>(), 0.002);
  fs::remove_all(dir);
}

// A folder of clouds: vnt+n reads normals that .xyz files without them do
// not hold (LibTorch's "Expected a proper Tensor but got None" named no
// file), and one class is the data's problem, not the model option
// 'classes' the user never gave. Neither leaves a run folder.
TEST_F(FieldCases, VntTrainNamesACloudWithoutNormalsAndAFolderOfOneClass) {
  const std::string dir = fresh_dir("fc_vnt_clouds");
  for (const std::string cls : {"ball", "rod"})
    for (int s = 0; s < 5; ++s) {
      std::string text;
      for (int i = 0; i < 64; ++i) {
        const double t = 0.1 * i + s, r = cls == "ball" ? 1.0 : 0.1;
        text += std::to_string(r * std::cos(t)) + " " + std::to_string(r * std::sin(t)) + " " +
                std::to_string(cls == "ball" ? std::sin(3 * t) : 0.05 * i) + "\n";
      }
      write_text_file(dir + "/two/" + cls + "/" + std::to_string(s) + ".xyz", text);
      if (cls == "ball") write_text_file(dir + "/one/" + cls + "/" + std::to_string(s) + ".xyz", text);
    }
  const std::string train = "vnt train --points 32 --epochs 1 --batch-size 2 --threads 1 ";
  expect_clean_failure(run_qkv(train + "--model vnt+n --data " + dir + "/two --out " + dir + "/run"), 1,
                       "/two/ball/0.xyz: the point cloud has no normals");
  const auto one = run_qkv(train + "--data " + dir + "/one --out " + dir + "/run");  // after the data's summary
  EXPECT_EQ(one.status, 1) << one.output;
  EXPECT_NE(one.output.find("error: " + dir + "/one: holds 1 class (ball); a classifier is trained on at least 2"),
            std::string::npos)
      << one.output;
  EXPECT_FALSE(fs::exists(dir + "/run"));
  fs::remove_all(dir);
}

// A run's synthetic shapes kept apart from the run: --synth-dir naming the run
// folder made a run that was "made by 'qkv data synth-shapes'" to --resume and
// --overwrite, and one inside checkpoints/ mixed shapes with best.ckpt.
TEST_F(FieldCases, SyntheticShapesAreKeptApartFromTheirRun) {
  const std::string dir = fresh_dir("fc_synth_apart");
  const std::string train =
      "vnt train --synth-classes box,sphere --synth-train-per-class 2 --synth-test-per-class 1 --points 32 "
      "--epochs 1 --threads 1 --out " +
      dir + "/run --synth-dir ";
  expect_clean_failure(run_qkv(train + dir + "/run"), 2, "--synth-dir " + dir + "/run: is or holds the run folder");
  expect_clean_failure(run_qkv(train + dir), 2, "--synth-dir " + dir + ": is or holds the run folder");
  expect_clean_failure(run_qkv(train + dir + "/run/checkpoints/shapes"), 2,
                       "lies in the files of the run folder --out " + dir + "/run");
  EXPECT_FALSE(fs::exists(dir + "/run"));
  // seg train reads ShapeNet-part's val list: synth-parts makes one, as seg train's own option does.
  expect_clean_failure(run_qkv("data synth-parts --val-per-class 0 --out " + dir + "/parts"), 2, "--val-per-class");
  fs::remove_all(dir);
}
