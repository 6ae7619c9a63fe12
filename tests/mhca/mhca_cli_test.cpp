// `qkv mhca` end to end on a small synthetic cohort (reduced volumes), as a
// user runs it: synth, select, cv, train, predict, explain, and the errors a
// bad cohort gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "qkv/core/npy.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/nifti.h"
#include "qkv/models/mhca.h"
#include "qkv/picture/png.h"
#include "qkv/tasks/mhca_explain.h"
#include "support/cli_run.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {
namespace fs = std::filesystem;

// 24x28x24 volumes with padding-1 convolutions give a 3x3x3 token grid.
const char* kNetOptions = "--model-options '{\"channels\":[4,8,8,8],\"padding\":1}'";

// subject -> P(PD) from a predictions CSV: `predict`'s (subject_id,label,p_pd,...)
// or, for one run, fold and model, `cv`'s (run,fold,model,subject_id,label,p_pd).
std::map<std::string, double> probabilities(const std::string& csv, const std::string& cv_prefix = "") {
  std::map<std::string, double> p;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    if (!cv_prefix.empty()) {
      if (line.rfind(cv_prefix, 0) != 0) continue;
      line = line.substr(cv_prefix.size());
    }
    std::vector<std::string> f;
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) f.push_back(cell);
    p[f.at(0)] = std::stod(f.at(2));
  }
  return p;
}

class MhcaCli : public ::testing::Test {
 protected:
  static std::string root_;
  static std::string cohort_;

  static void SetUpTestSuite() {
    root_ = fresh_dir("mhca_cli");
    cohort_ = root_ + "/cohort";
    const auto r = run_qkv("mhca synth --out " + cohort_ +
                           " --subjects 40 --pd-fraction 0.6 --cpg 300 --shape 24,28,24 --atlas none --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
  }
  static std::string manifest() { return cohort_ + "/manifest.csv"; }
  static std::string methylation() { return cohort_ + "/methylation.csv"; }
  static std::string cohort_args() { return "--manifest " + manifest() + " --methylation " + methylation(); }
};
std::string MhcaCli::root_;
std::string MhcaCli::cohort_;

TEST(MhcaParams, PrintsThePapersCounts) {
  for (const auto& [model, count] : std::vector<std::pair<std::string, std::string>>{
           {"mhca", "2020883"}, {"concatnet", "3824066"}, {"spectnet", "3793378"}}) {
    const auto r = run_qkv("params --count --model " + model);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, count + "\n");
  }
}

TEST_F(MhcaCli, SynthWritesTheCohortInPublicFormats) {
  const auto m = medical::read_manifest(manifest());
  EXPECT_EQ(m.subjects.size(), 40u);
  int pd = 0;
  for (const auto& s : m.subjects) pd += static_cast<int>(s.label);
  EXPECT_EQ(pd, 24);
  const auto v = medical::read_nifti(m.subjects[0].spect_path);
  EXPECT_EQ(v.dims, (std::array<int64_t, 3>{24, 28, 24}));
  EXPECT_EQ(medical::read_methylation_table(methylation()).cols(), 300);
  // Writing into a non-empty folder is refused rather than mixing cohorts.
  expect_clean_failure(run_qkv("mhca synth --out " + cohort_ + " --subjects 10"), 2, "--out");
}

TEST_F(MhcaCli, SelectKeepsExactlyNFeatures) {
  const std::string out = root_ + "/selected.txt";
  // The old spelling --out still works for one release, and says the new one.
  const auto r = run_qkv("mhca select " + cohort_args() + " --out " + out + " --n-features 20 --xgb-estimators 20");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--out is now spelled --output"), std::string::npos) << r.output;
  const auto ids = medical::read_cpg_list(out);
  EXPECT_EQ(ids.size(), 20u);
  const auto table = medical::read_methylation_table(methylation());
  const std::set<std::string> known(table.cpg_ids.begin(), table.cpg_ids.end());
  for (const auto& id : ids) EXPECT_TRUE(known.count(id)) << id;
  // RFE prefers the planted informative sites: at least twice their share of the table.
  std::set<std::string> planted;
  const auto truth = read_json(cohort_ + "/ground_truth.json");  // a named json: a temporary's .at() would dangle
  for (const auto& site : truth.at("informative_sites")) planted.insert(site.at("id"));
  int hits = 0;
  for (const auto& id : ids) hits += static_cast<int>(planted.count(id));
  EXPECT_GE(hits, 2.0 * 20 * static_cast<double>(planted.size()) / 300) << hits << " planted of 20";
}

TEST_F(MhcaCli, CrossValidationThenExplainEndToEnd) {
  const std::string out = root_ + "/cv";
  const auto r = run_qkv("mhca cv " + cohort_args() + " --out " + out + " " + kNetOptions +
                         " --runs 1 --folds 2 --epochs 2 --lr 1e-3 --xgb-estimators 10 --threads 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto summary = read_json(out + "/summary.json");
  for (const char* model : {"mhca", "concatnet", "spectnet", "xgboost"}) {
    ASSERT_TRUE(summary.at("models").contains(model)) << model;
    const auto& m = summary.at("models").at(model);
    const double accuracy = m.at("accuracy").at("mean");
    EXPECT_GE(accuracy, 0.0);
    EXPECT_LE(accuracy, 1.0);
    EXPECT_EQ(m.at("per_fold").size(), 2u);
    EXPECT_EQ(m.at("per_fold")[0].at("features"), 27);  // RFE to the token count
  }
  EXPECT_TRUE(summary.at("models").at("xgboost").at("parameters").is_null());
  EXPECT_GT(summary.at("models").at("mhca").at("parameters").get<int64_t>(), 0);
  // Every subject is predicted once per model in the run, from a fold that did not train on it.
  const auto csv = read_text(out + "/predictions.csv");
  EXPECT_EQ(count_lines(csv), 1 + 4 * 40);
  const auto report = read_text(out + "/report.html");
  EXPECT_NE(report.find("<svg"), std::string::npos);
  EXPECT_NE(report.find("AUROC"), std::string::npos);
  // The folds' selected CpG lists differ from each other's test subjects by construction; each holds 27 ids.
  EXPECT_EQ(medical::read_cpg_list(out + "/folds/run1_fold1/selected_cpgs.txt").size(), 27u);

  // Run again (--resume): finished folds are read back, the summary is the same.
  const auto again = run_qkv("mhca cv " + cohort_args() + " --out " + out + " " + kNetOptions +
                             " --runs 1 --folds 2 --epochs 2 --lr 1e-3 --xgb-estimators 10 --threads 2 --resume");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(read_json(out + "/summary.json").at("models"), summary.at("models"));
  // Other settings into the same folder are refused, not mixed with its folds.
  const auto other = run_qkv("mhca cv " + cohort_args() + " --out " + out + " " + kNetOptions +
                             " --runs 1 --folds 2 --epochs 3 --lr 1e-3 --xgb-estimators 10 --threads 2 --resume");
  EXPECT_EQ(other.status, 2) << other.output;
  EXPECT_NE(other.output.find("other settings"), std::string::npos) << other.output;

  // Explain every subject with fold 1's MHCA.
  const std::string ckpt = out + "/folds/run1_fold1/mhca/checkpoints/best.ckpt";
  const std::string ex = root_ + "/explain";
  const auto e = run_qkv("mhca explain " + cohort_args() + " --checkpoint " + ckpt + " --all --out " + ex);
  ASSERT_EQ(e.status, 0) << e.output;
  const auto j = read_json(ex + "/explain.json");
  EXPECT_EQ(j.at("subjects").size(), 40u);
  EXPECT_TRUE(j.contains("cpg"));    // the ground truth next to the manifest was found
  EXPECT_TRUE(j.contains("spect"));  // and its striatum mask
  const double p10 = j.at("cpg").at("precision_at_10");
  EXPECT_GE(p10, 0.0);
  EXPECT_LE(p10, 1.0);
  const double fraction = j.at("spect").at("striatal_attention_fraction");
  EXPECT_GT(fraction, 0.0);
  EXPECT_LT(fraction, 1.0);
  const auto subject = medical::read_manifest(manifest()).subjects[0];
  const auto map = medical::read_nifti(ex + "/" + subject.id + "/spect_attention.nii.gz");
  const auto input = medical::read_nifti(subject.spect_path);
  EXPECT_EQ(map.dims, input.dims);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(map.geometry.affine()[i], input.geometry.affine()[i], 1e-5);
  int64_t w = 0, h = 0;
  EXPECT_EQ(map.geometry.description.rfind("qkv mhca explain: SPECT attention", 0), 0u) << map.geometry.description;
  const auto png = picture::read_png_rgb(ex + "/" + subject.id + "/spect_attention_axial.png", w, h);
  EXPECT_EQ(png.size(), static_cast<size_t>(w * h * 3));
  // 13 px per voxel brings the 28-voxel side to 364 >= 360; title, letters,
  // colour bar and notes around the slice.
  EXPECT_GT(w, 24 * 13 + 60);
  EXPECT_GT(h, 28 * 13 + 40);
  EXPECT_EQ(count_lines(read_text(ex + "/cpg_attention.csv")), 1 + 27);
  for (const char* npy : {"scores.npy", "alpha_v.npy", "alpha_q.npy"})
    EXPECT_TRUE(fs::exists(ex + "/" + subject.id + "/" + npy)) << npy;

  // Predict with the same checkpoint.
  const auto p =
      run_qkv("mhca predict " + cohort_args() + " --checkpoint " + ckpt + " --output " + root_ + "/pred.csv");
  ASSERT_EQ(p.status, 0) << p.output;
  EXPECT_EQ(count_lines(read_text(root_ + "/pred.csv")), 41);
  // predict reproduces what cv recorded for that fold's test subjects.
  auto check_reproduces = [&](const std::string& predicted, const std::string& prefix) {
    const auto recorded = probabilities(csv, prefix);
    const auto now = probabilities(read_text(predicted));
    ASSERT_EQ(recorded.size(), 20u);
    for (const auto& [id, p] : recorded) EXPECT_NEAR(now.at(id), p, 2e-6) << id;
  };
  check_reproduces(root_ + "/pred.csv", "1,1,mhca,");
  const auto px = run_qkv("mhca predict " + cohort_args() + " --checkpoint " + out +
                          "/folds/run1_fold2/xgboost/xgboost.json --output " + root_ + "/pred_xgb.csv");
  ASSERT_EQ(px.status, 0) << px.output;
  EXPECT_EQ(count_lines(read_text(root_ + "/pred_xgb.csv")), 41);
  check_reproduces(root_ + "/pred_xgb.csv", "1,2,xgboost,");

  // explain needs an MHCA model.
  expect_clean_failure(run_qkv("mhca explain " + cohort_args() + " --checkpoint " + out +
                               "/folds/run1_fold1/spectnet/checkpoints/best.ckpt --all --out " + root_ + "/ex2"),
                       2, "needs a co-attention model");
  // Another cohort's ground truth (here: one subject's label turned) is
  // refused by name, not scored against this cohort's attention.
  auto other_truth = read_json(cohort_ + "/ground_truth.json");
  auto& turned = other_truth.at("subjects").at(0);
  turned["label"] = 1 - turned.at("label").get<int64_t>();
  write_file_atomic(root_ + "/other_truth.json", other_truth.dump());
  const auto wrong_truth = run_qkv("mhca explain " + cohort_args() + " --checkpoint " + ckpt + " --subject " +
                                   turned.at("id").get<std::string>() + " --ground-truth " + root_ +
                                   "/other_truth.json --out " + root_ + "/ex3");
  EXPECT_EQ(wrong_truth.status, 1) << wrong_truth.output;
  EXPECT_NE(wrong_truth.output.find("other_truth.json: the ground truth of another cohort: subject " +
                                    turned.at("id").get<std::string>() + " is "),
            std::string::npos)
      << wrong_truth.output;
  EXPECT_FALSE(fs::exists(root_ + "/ex3"));
  // Refused before --overwrite empties an earlier explanation.
  const auto over = run_qkv("mhca explain " + cohort_args() + " --checkpoint " + ckpt + " --subject " +
                            turned.at("id").get<std::string>() + " --ground-truth " + root_ +
                            "/other_truth.json --overwrite --out " + ex);
  EXPECT_EQ(over.status, 1) << over.output;
  EXPECT_TRUE(fs::exists(ex + "/explain.json"));
  // A mask read from inside the output it would replace: refused, as every input is (it had been deleted).
  const std::string mask_inside = ex + "/" + subject.id + "/spect_attention.nii.gz";
  const auto read_from_output = run_qkv("mhca explain " + cohort_args() + " --checkpoint " + ckpt + " --subject " +
                                        subject.id + " --striatum-mask " + mask_inside + " --overwrite --out " + ex);
  expect_clean_failure(read_from_output, 2, "holds --striatum-mask " + mask_inside + ", which this command reads");
  EXPECT_TRUE(fs::exists(mask_inside));
  // A subject given twice would weigh twice in the mean map.
  const std::string id = turned.at("id").get<std::string>();
  expect_clean_failure(run_qkv("mhca explain " + cohort_args() + " --checkpoint " + ckpt + " --subject " + id + "," +
                               id + " --out " + root_ + "/ex4"),
                       2, "--subject " + id + ": given twice");
  EXPECT_FALSE(fs::exists(root_ + "/ex4"));
  // Each subject's maps go into a folder named by its id: '..' would have put
  // them (and over a user's cpg_attention.csv) beside the output.
  const std::string dots = root_ + "/dots";
  make_directories(dots);
  auto m = medical::read_manifest(manifest());
  const std::string renamed = m.subjects[0].id;
  m.subjects[0].id = "..";
  medical::write_manifest(dots + "/manifest.csv", m);
  std::string table = read_text(methylation());
  table.replace(table.find("\n" + renamed + ",") + 1, renamed.size(), "..");
  write_file_atomic(dots + "/methylation.csv", table);
  write_file_atomic(dots + "/cpg_attention.csv", std::string("the user's own"));
  const auto escaped = run_qkv("mhca explain --manifest " + dots + "/manifest.csv --methylation " + dots +
                               "/methylation.csv --checkpoint " + ckpt + " --subject .. --out " + dots + "/ex");
  EXPECT_EQ(escaped.status, 1) << escaped.output;  // after the cohort's note on its missing values
  EXPECT_NE(escaped.output.find("error: subject '..': explain writes each subject's maps into a folder"),
            std::string::npos)
      << escaped.output;
  EXPECT_EQ(read_text(dots + "/cpg_attention.csv"), "the user's own");
  EXPECT_FALSE(fs::exists(dots + "/ex"));
}

// The cross-modal benchmark's scoring: explain.json's share of each planted
// site's attention inside its region equals what the written alpha_v.npy maps
// give when placed on the grid (token_map_to_volume) and summed over the mask.
TEST(MhcaExplainInteractions, EachPlantedPairIsScoredFromTheMapsItWrote) {
  const std::string root = fresh_dir("mhca_interactions");
  const std::string cohort = root + "/cohort";
  const auto synth = run_qkv("mhca synth --out " + cohort +
                             " --subjects 16 --pd-fraction 0.5 --cpg 100 --shape 24,28,24 --atlas none --seed 7"
                             " --planted-interaction-sites 6");
  ASSERT_EQ(synth.status, 0) << synth.output;
  const auto truth = read_json(cohort + "/ground_truth.json");
  std::vector<std::string> ids;
  for (const auto& site : truth.at("informative_sites"))
    if (site.at("kind") == "interaction") ids.push_back(site.at("id"));
  ASSERT_EQ(ids.size(), 6u);
  const auto table = medical::read_methylation_table(cohort + "/methylation.csv");
  for (const auto& id : table.cpg_ids)
    if (ids.size() < 27 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  std::string list;
  for (const auto& id : ids) list += id + "\n";
  write_file_atomic(root + "/cpgs.txt", list);
  const std::string args = "--manifest " + cohort + "/manifest.csv --methylation " + cohort + "/methylation.csv";
  const auto train = run_qkv("mhca train " + args + " --cpg-list " + root + "/cpgs.txt --model mhca " + kNetOptions +
                             " --epochs 1 --lr 1e-3 --threads 2 --out " + root + "/run");
  ASSERT_EQ(train.status, 0) << train.output;
  const auto e = run_qkv("mhca explain " + args + " --checkpoint " + root + "/run/checkpoints/best.ckpt --all --out " +
                         root + "/explain");
  ASSERT_EQ(e.status, 0) << e.output;
  const auto j = read_json(root + "/explain/explain.json").at("interactions");
  EXPECT_EQ(j.at("planted_pairs"), 6);
  ASSERT_EQ(j.at("pairs_among_features"), 6);

  const auto config = read_json(root + "/run/config.json");
  const auto encoder = models::MHCAOptions::from_json(config.at("model").at("options")).spect;
  const auto features = config.at("data").at("preprocessing").at("cpg_ids").get<std::vector<std::string>>();
  const auto mask = medical::read_nifti(cohort + "/striatum_mask.nii.gz");
  const auto labels = medical::volume_to_tensor(mask);  // [X, Y, Z]
  const auto subjects = medical::read_manifest(cohort + "/manifest.csv").subjects;
  double enrichment_sum = 0;
  for (const auto& pair : j.at("pairs")) {
    const std::string id = pair.at("cpg");
    const int64_t f = std::find(features.begin(), features.end(), id) - features.begin();
    ASSERT_LT(f, static_cast<int64_t>(features.size())) << id;
    int64_t label = 0;
    for (const auto& site : truth.at("informative_sites"))
      if (site.at("id") == id) label = site.at("striatum_mask_label");
    const auto region = (labels == static_cast<double>(label)).to(torch::kFloat32);
    double share = 0;
    for (const auto& subject : subjects) {
      std::vector<int64_t> shape;
      auto values = read_npy_float32(root + "/explain/" + subject.id + "/alpha_v.npy", shape);
      ASSERT_EQ(shape, (std::vector<int64_t>{4, 27, 27}));
      auto alpha_v = torch::from_blob(values.data(), {4, 27, 27}, torch::kFloat32);
      const auto map = tasks::token_map_to_volume(alpha_v.mean(0)[f], encoder);
      share += (map * region).sum().item<double>() / map.sum().item<double>();
    }
    share /= static_cast<double>(subjects.size());
    EXPECT_NEAR(pair.at("region_attention_fraction").get<double>(), share, 1e-5) << id;
    const double chance = region.mean().item<double>();
    EXPECT_NEAR(pair.at("region_volume_fraction").get<double>(), chance, 1e-9) << id;
    EXPECT_NEAR(pair.at("enrichment").get<double>(), share / chance, 1e-3) << id;
    enrichment_sum += share / chance;
  }
  EXPECT_NEAR(j.at("mean_enrichment").get<double>(), enrichment_sum / 6, 1e-3);
  fs::remove_all(root);
}

// A fold trains for hours at the paper's settings: stderr says which fold,
// each epoch, the fold's result and the time left; stdout holds only the table.
TEST_F(MhcaCli, CrossValidationShowsProgressOnStderr) {
  const std::string out = root_ + "/cv_progress", err = root_ + "/cv_progress_stderr.txt";
  const std::string args = "mhca cv " + cohort_args() + " --out " + out + " " + kNetOptions +
                           " --model mhca,xgboost --runs 1 --folds 2 --epochs 2 --lr 1e-3 --xgb-estimators 10"
                           " --threads 2";
  const auto r = run_qkv_stderr_to(args, err);
  const std::string log = read_text(err);
  ASSERT_EQ(r.status, 0) << r.output << log;
  // Two tables, labelled: pooled per run, then the paper's fold average;
  // then a line for each warning summary.json lists (2 epochs can leave a
  // network predicting PD for everyone).
  const auto warnings = read_json(out + "/summary.json").at("warnings");
  EXPECT_EQ(count_lines(r.output), 6 + static_cast<int>(warnings.size())) << r.output;
  for (const auto& w : warnings)
    EXPECT_NE(r.output.find("\nwarning: " + w.get<std::string>() + "\n"), std::string::npos);
  EXPECT_EQ(r.output.rfind("pooled per run", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("\n  mhca "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  xgboost "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nfold-averaged, population std"), std::string::npos) << r.output;

  std::vector<std::string> fold_lines, epoch_lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("fold ", 0) == 0) fold_lines.push_back(line);
    if (line.rfind("epoch ", 0) == 0) epoch_lines.push_back(line);
  }
  // Per fold: feature selection, mhca starts, mhca's result, xgboost's result.
  ASSERT_EQ(fold_lines.size(), 8u) << log;
  EXPECT_EQ(fold_lines[0].rfind("fold 1/2 (run 1, fold 1): selecting 27 CpG sites (rfe)", 0), 0u) << log;
  EXPECT_TRUE(
      std::regex_match(fold_lines[1], std::regex(R"(fold 1/2 \(run 1, fold 1\) mhca: 16 train / 4 val / 20 test)")))
      << fold_lines[1];
  EXPECT_TRUE(std::regex_match(
      fold_lines[2],
      std::regex(
          R"(fold 1/2 \(run 1, fold 1\) mhca: test accuracy [0-9.]+  AUROC [0-9.]+  in [0-9.]+ s; ETA > [0-9:]+)")))
      << fold_lines[2] << " (xgboost has folds left and no time yet: a lower bound)";
  EXPECT_TRUE(
      std::regex_match(fold_lines[3], std::regex(R"(fold 1/2 \(run 1, fold 1\) xgboost: 20 train / 20 test, )"
                                                 R"(test accuracy [0-9.]+  AUROC [0-9.]+  in [0-9.]+ s; ETA [0-9:]+)")))
      << fold_lines[3];
  EXPECT_EQ(fold_lines[4].rfind("fold 2/2 (run 1, fold 2): selecting", 0), 0u) << log;
  EXPECT_EQ(fold_lines[7].rfind("fold 2/2 (run 1, fold 2) xgboost: ", 0), 0u) << log;
  EXPECT_EQ(fold_lines[7].find("ETA"), std::string::npos) << "nothing left: " << fold_lines[7];
  // The trainer's line per epoch, for each of mhca's folds.
  ASSERT_EQ(epoch_lines.size(), 4u) << log;
  EXPECT_EQ(epoch_lines[0].rfind("epoch 1/2 ", 0), 0u) << log;
  EXPECT_NE(epoch_lines[1].find(" val_loss "), std::string::npos) << log;
  EXPECT_EQ(epoch_lines[3].rfind("epoch 2/2 ", 0), 0u) << log;

  // Continued (--resume) with the model folds all done: one line says so, nothing is timed.
  const auto again = run_qkv_stderr_to(args + " --resume", err);
  const std::string log2 = read_text(err);
  ASSERT_EQ(again.status, 0) << again.output << log2;
  EXPECT_NE(log2.find("4 of 4 model folds already done"), std::string::npos) << log2;
  for (const char* absent : {"fold 1/2", "epoch ", "ETA"}) EXPECT_EQ(log2.find(absent), std::string::npos) << log2;
}

TEST_F(MhcaCli, RecipeMhcaCodeIsTheAuthorsTraining) {
  auto train_size = [](const std::string& output) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(output, m, std::regex(R"(, (\d+) train / \d+ val / \d+ test)"))) << output;
    return m.empty() ? -1 : std::stoi(m[1]);
  };
  const std::string plain = root_ + "/recipe_plain", code = root_ + "/recipe_code";
  auto r = run_qkv("mhca train " + cohort_args() + " --out " + plain + " " + kNetOptions +
                   " --model concatnet --select all --epochs 1");
  ASSERT_EQ(r.status, 0) << r.output;
  const int n = train_size(r.output);
  r = run_qkv("mhca train " + cohort_args() + " --out " + code + " " + kNetOptions +
              " --model concatnet --select all --recipe mhca-code --epochs 1");
  ASSERT_EQ(r.status, 0) << r.output;
  // MultiAug's OneOf, once: floor(n x 0.1) augmented copies join the training set.
  EXPECT_EQ(train_size(r.output), n + n / 10) << r.output;
  const auto config = read_json(code + "/config.json");
  const auto& t = config.at("train");
  EXPECT_EQ(t.at("optimizer"), "adam");
  EXPECT_DOUBLE_EQ(t.at("lr").get<double>(), 3e-5);
  EXPECT_DOUBLE_EQ(t.at("weight_decay").get<double>(), 5e-3);
  EXPECT_EQ(t.at("schedule"), "constant");  // the authors' cosine scheduler is never stepped
  EXPECT_EQ(t.at("batch_size"), 16);
  EXPECT_EQ(t.at("patience"), 20);
  EXPECT_EQ(t.at("select_metric"), "loss");
  EXPECT_EQ(t.at("epochs"), 1);  // given: kept
  const auto& d = config.at("data");
  EXPECT_EQ(d.at("augment_mode"), "enlarge");
  EXPECT_DOUBLE_EQ(d.at("augment").get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(d.at("augment_degrees").get<double>(), 5);
  EXPECT_DOUBLE_EQ(d.at("augment_noise").get<double>(), 0.05);
  EXPECT_EQ(config.at("recipe").at("name"), "mhca-code");
  EXPECT_FALSE(config.at("recipe").at("set").contains("folds"));  // an option 'mhca train' does not have
}

TEST_F(MhcaCli, TrainWritesARunFolder) {
  const std::string out = root_ + "/train";
  const auto r = run_qkv("mhca train " + cohort_args() + " --out " + out + " " + kNetOptions +
                         " --model concatnet --select all --epochs 2 --lr 1e-3");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto summary = read_json(out + "/summary.json");
  ASSERT_TRUE(summary.contains("test"));
  EXPECT_EQ(read_json(out + "/config.json").at("model").at("options").at("features"), 300);
  // The metrics cv and predict report, from the test subjects' P(PD).
  const auto& test = summary.at("test");
  const auto subjects = read_json(out + "/config.json").at("data").at("test_subjects").size();
  const int64_t tp = test.at("tp"), fp = test.at("fp"), tn = test.at("tn"), fn = test.at("fn");
  EXPECT_EQ(static_cast<size_t>(tp + fp + tn + fn), subjects);
  EXPECT_EQ(test.at("n"), subjects);
  EXPECT_DOUBLE_EQ(test.at("sensitivity").get<double>(), static_cast<double>(tp) / static_cast<double>(tp + fn));
  EXPECT_DOUBLE_EQ(test.at("specificity").get<double>(), static_cast<double>(tn) / static_cast<double>(tn + fp));
  EXPECT_DOUBLE_EQ(test.at("accuracy").get<double>(), static_cast<double>(tp + tn) / static_cast<double>(subjects));
  EXPECT_GE(test.at("auroc").get<double>(), 0.0);
  EXPECT_LE(test.at("auroc").get<double>(), 1.0);
  EXPECT_TRUE(summary.at("val").contains("auroc"));
  EXPECT_NE(r.output.find("auroc"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("specificity"), std::string::npos) << r.output;

  // Predict on the whole cohort: the subjects that trained or validated the
  // checkpoint are counted and the others scored apart.
  const auto fit = read_json(out + "/config.json").at("data").at("fit_subjects");
  EXPECT_EQ(fit.size() + subjects, 40u);
  const auto p = run_qkv_stderr_to("mhca predict " + cohort_args() + " --checkpoint " + out +
                                       "/checkpoints/best.ckpt --output " + root_ + "/train_pred.csv",
                                   root_ + "/train_pred.err");
  ASSERT_EQ(p.status, 0) << p.output;
  const auto metrics = trailing_json(p.output);
  EXPECT_EQ(metrics.at("seen_in_training"), fit.size());
  EXPECT_EQ(metrics.at("unseen").at("n"), subjects);
  EXPECT_EQ(metrics.at("n"), 40);
  EXPECT_NE(read_text(root_ + "/train_pred.err")
                .find("note: " + std::to_string(fit.size()) + " of 40 subjects trained or validated this checkpoint"),
            std::string::npos)
      << read_text(root_ + "/train_pred.err");
  const auto csv = read_text(root_ + "/train_pred.csv");
  EXPECT_EQ(csv.rfind("subject_id,label,p_pd,predicted,seen_in_training\n", 0), 0u);
  size_t seen_rows = 0;
  for (size_t at = csv.find(",1\n"); at != std::string::npos; at = csv.find(",1\n", at + 1)) ++seen_rows;
  EXPECT_EQ(seen_rows, fit.size());
}

// A network that is not trained at all (learning rate 1e-12) puts every
// subject of a fold on one side (the side can differ from fold to fold, so
// the pooled predictions may look balanced): cross validation says so on the
// terminal and in report.html.
TEST_F(MhcaCli, CrossValidationWarnsWhereAModelPredictsOneClass) {
  const std::string out = root_ + "/cv_untrained";
  const auto r = run_qkv("mhca cv " + cohort_args() + " --out " + out + " " + kNetOptions +
                         " --model concatnet --select all --runs 1 --folds 2 --epochs 1 --lr 1e-12 --threads 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto summary = read_json(out + "/summary.json");
  ASSERT_FALSE(summary.at("warnings").empty()) << summary.dump();
  const std::string warning = summary.at("warnings").back();
  EXPECT_EQ(warning.rfind("concatnet: 2 of 2 folds are degenerate, e.g. run 1 fold 1 predicts the ", 0), 0u) << warning;
  EXPECT_NE(r.output.find("warning: " + warning), std::string::npos) << r.output;
  EXPECT_NE(read_text(out + "/report.html").find("<div class=\"warn\">"), std::string::npos);
  // --select all: every one of the table's 300 sites, as the folds see them.
  EXPECT_EQ(summary.at("settings").at("n_features"), 300);
  EXPECT_NE(r.output.find("selecting 300 CpG sites (all)"), std::string::npos) << r.output;
}

TEST_F(MhcaCli, PredictScoresNewPatientsWithoutLabels) {
  const std::string dir = root_ + "/unlabelled";
  make_directories(dir);
  const auto run =
      run_qkv("mhca train " + cohort_args() + " --out " + dir + "/run --model xgboost --select all --xgb-estimators 5");
  ASSERT_EQ(run.status, 0) << run.output;
  // No label column at all: every subject gets P(PD), and no metric is made up.
  auto m = medical::read_manifest(manifest());
  std::string csv = "subject_id,spect\n";
  for (size_t i = 0; i < 6; ++i) csv += m.subjects[i].id + "," + m.subjects[i].spect_path + "\n";
  write_text_file(dir + "/new.csv", csv);
  const auto files = " --methylation " + methylation() + " --checkpoint " + dir + "/run";
  auto r = run_qkv_stderr_to("mhca predict --manifest " + dir + "/new.csv" + files + " --output " + dir + "/new_p.csv",
                             dir + "/new.err");
  ASSERT_EQ(r.status, 0) << r.output << read_text(dir + "/new.err");
  const auto metrics = trailing_json(r.output);
  EXPECT_EQ(metrics.at("labelled"), 0);
  EXPECT_FALSE(metrics.contains("auroc"));
  const auto rows = read_text(dir + "/new_p.csv");
  EXPECT_EQ(count_lines(rows), 7);
  EXPECT_NE(rows.find("\n" + m.subjects[0].id + ",,"), std::string::npos) << rows;  // an empty label cell
  // Some labelled, some not: the metrics score the labelled alone.
  csv = "subject_id,label,spect\n";
  for (size_t i = 0; i < 6; ++i)
    csv += m.subjects[i].id + "," + (i < 4 ? std::to_string(m.subjects[i].label) : "") + "," +
           m.subjects[i].spect_path + "\n";
  write_text_file(dir + "/mixed.csv", csv);
  r = run_qkv_stderr_to("mhca predict --manifest " + dir + "/mixed.csv" + files + " --output " + dir + "/mixed_p.csv",
                        dir + "/mixed.err");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(trailing_json(r.output).at("n"), 4);
  EXPECT_NE(read_text(dir + "/mixed.err").find("metrics score the 4 labelled subjects of 6"), std::string::npos);
  // Training still needs every label.
  expect_clean_failure(run_qkv("mhca train --manifest " + dir + "/new.csv --methylation " + methylation() + " --out " +
                               dir + "/run2 --model xgboost --select all"),
                       1, "no 'label' column");
}

TEST_F(MhcaCli, ARunResumesFromAnyFolderOnTheCohortItBeganWithAlone) {
  // The cohort's files are recorded absolute: the run resumes from another
  // folder, its files typed relative at first.
  const std::string dir = root_ + "/resume";
  make_directories(dir);
  fs::copy(cohort_, dir + "/cohort", fs::copy_options::recursive);
  const std::string out = dir + "/run";
  auto r = run_shell("cd " + dir + " && " + qkv_command() +
                     " mhca train --manifest cohort/manifest.csv --methylation cohort/methylation.csv --out run " +
                     kNetOptions + " --model spectnet --select all --epochs 1 --lr 1e-3 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_json(out + "/config.json").at("data").at("manifest"),
            fs::absolute(dir + "/cohort/manifest.csv").lexically_normal().string());
  r = run_shell("cd / && " + std::string(qkv_command()) + " mhca train --resume " + out + " --epochs 2 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  // A cohort changed since would be split anew, test subjects into training:
  // refused, the run's record left as it was.
  auto m = medical::read_manifest(dir + "/cohort/manifest.csv");
  m.subjects.resize(m.subjects.size() - 4);
  fs::remove(dir + "/cohort/manifest.csv");
  medical::write_manifest(dir + "/cohort/manifest.csv", m);
  const auto before = read_text(out + "/config.json");
  r = run_qkv("mhca train --resume " + out + " --epochs 3");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("the cohort is not the one this run began with"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(out + "/config.json"), before);

  // One subject is enough to predict (it was refused as too few to fit).
  auto one = medical::read_manifest(manifest());
  one.subjects.resize(1);
  medical::write_manifest(dir + "/one.csv", one);
  const auto single = "--manifest " + dir + "/one.csv --methylation " + methylation() + " --checkpoint " + out;
  r = run_qkv("mhca predict " + single + " --output " + dir + "/one_pred.csv");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count_lines(read_text(dir + "/one_pred.csv")), 2);
}

TEST_F(MhcaCli, PredictRefusesAVolumeOffTheCheckpointsGridFromItsHeader) {
  // The issue's case: a small .nii.gz declaring 1024x1024x512 used to be read
  // (2 GiB) and stacked (n x 2 GiB) before anything compared it with the model.
  const std::string out = root_ + "/grid_train";
  const auto r = run_qkv("mhca train " + cohort_args() + " --out " + out + " " + kNetOptions +
                         " --model spectnet --select all --epochs 1 --lr 1e-3");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string dir = root_ + "/grid";
  make_directories(dir);
  // A header alone: dims 1024 x 1024 x 512 uint8, no voxels.
  std::vector<char> header(352, 0);
  const int32_t sizeof_hdr = 348;
  const int16_t dim[8] = {3, 1024, 1024, 512, 1, 1, 1, 1};
  const int16_t datatype = 2, bitpix = 8;
  const float vox_offset = 352, one = 1;
  std::memcpy(header.data(), &sizeof_hdr, 4);
  std::memcpy(header.data() + 40, dim, sizeof dim);
  std::memcpy(header.data() + 70, &datatype, 2);
  std::memcpy(header.data() + 72, &bitpix, 2);
  for (int d = 0; d < 8; ++d) std::memcpy(header.data() + 76 + 4 * d, &one, 4);
  std::memcpy(header.data() + 108, &vox_offset, 4);
  std::memcpy(header.data() + 344, "n+1", 4);
  const std::string hostile = dir + "/hostile.nii";
  write_file_atomic(hostile, header);
  auto m = medical::read_manifest(manifest());
  m.subjects[3].spect_path = hostile;
  medical::write_manifest(dir + "/manifest.csv", m);
  const auto p = run_qkv("mhca predict --manifest " + dir + "/manifest.csv --methylation " + methylation() +
                         " --checkpoint " + out + "/checkpoints/best.ckpt --output " + dir + "/pred.csv");
  expect_clean_failure(p, 1, "hostile.nii: grid 1024x1024x512 differs from the checkpoint's 24x28x24");
}

TEST_F(MhcaCli, BadCohortsGetOneLineErrors) {
  const std::string dir = root_ + "/bad";
  make_directories(dir);
  const auto good = medical::read_manifest(manifest());  // spect paths resolved, so they work from any folder
  auto with_first_volume = [&](const std::string& name, const std::string& path) {
    auto m = good;
    m.subjects[0].spect_path = path;
    medical::write_manifest(dir + "/" + name, m);
    return "--manifest " + dir + "/" + name + " --methylation " + methylation();
  };
  // A volume that is not there, and a truncated one, are named.
  expect_clean_failure(run_qkv("mhca cv " + with_first_volume("missing.csv", dir + "/missing.nii.gz") + " --out " +
                               dir + "/cv --model spectnet"),
                       1, "missing.nii.gz");
  const auto bytes = read_file_bytes(good.subjects[0].spect_path);
  write_file_atomic(dir + "/cut.nii.gz", bytes.data(), bytes.size() / 2);
  expect_clean_failure(run_qkv("mhca cv " + with_first_volume("cut.csv", dir + "/cut.nii.gz") + " --out " + dir +
                               "/cv --model spectnet"),
                       1, "cut.nii.gz");
  // An unknown model is a usage error naming it.
  expect_clean_failure(run_qkv("mhca cv " + cohort_args() + " --model resnet --out " + dir + "/cv2"), 2, "resnet");
  // RFE's default target, where nothing reads the volumes, is the paper's 441
  // sites: more than this table holds, said as a default, not as if typed.
  const auto xgb = run_qkv("mhca train " + cohort_args() + " --model xgboost --xgb-estimators 5 --out " + dir + "/xgb");
  EXPECT_EQ(xgb.status, 2) << xgb.output;
  EXPECT_NE(xgb.output.find("--n-features not given, so RFE's target is 441"), std::string::npos) << xgb.output;
  EXPECT_NE(xgb.output.find("; give --n-features"), std::string::npos) << xgb.output;
  // A network's training options do nothing for gradient boosting: refused.
  expect_clean_failure(
      run_qkv("mhca train " + cohort_args() + " --model xgboost --n-features 20 --lr 0.1 --out " + dir + "/xgb2"), 2,
      "--lr trains a network; --model xgboost trains by its --xgb-* options");
  EXPECT_FALSE(fs::exists(dir + "/xgb2"));
  // A model named twice would train and count its folds twice.
  expect_clean_failure(run_qkv("mhca cv " + cohort_args() + " --model xgboost,spectnet,xgboost --out " + dir + "/cv2"),
                       2, "--model xgboost is named twice");
  // A network that cannot take this cohort (mhca needs as many CpG sites as
  // SPECT tokens) is refused before any fold trains and before the folder is made.
  // (The cohort reader's note on missing beta-values comes first.)
  const auto mismatch = run_qkv("mhca cv " + cohort_args() +
                                " --model spectnet,mhca --select all --model-options "
                                "'{\"channels\":[8,16,32],\"padding\":1}' --out " +
                                dir + "/cv3");
  EXPECT_EQ(mismatch.status, 2) << mismatch.output;
  EXPECT_NE(mismatch.output.find("qkv mhca cv: error: mhca: features = 300 must equal the SPECT token count 252"),
            std::string::npos)
      << mismatch.output;
  EXPECT_EQ(mismatch.output.find("mhca cv: 40 subjects"), std::string::npos) << mismatch.output;
  EXPECT_FALSE(fs::exists(dir + "/cv3"));
  expect_clean_failure(
      run_qkv("mhca explain " + cohort_args() + " --checkpoint " + manifest() + " --out " + dir + "/ex"), 2,
      "--subject");
  // One class alone is refused before anything trains, whatever the model.
  auto controls = good;
  for (auto& subject : controls.subjects) subject.label = 0;
  medical::write_manifest(dir + "/controls.csv", controls);
  const auto one_class = run_qkv("mhca train --manifest " + dir + "/controls.csv --methylation " + methylation() +
                                 " --model spectnet --out " + dir + "/one_class");
  EXPECT_EQ(one_class.status, 1) << one_class.output;
  EXPECT_NE(one_class.output.find("is labelled 0 (control); a classifier needs both classes"), std::string::npos)
      << one_class.output;
  EXPECT_FALSE(fs::exists(dir + "/one_class/checkpoints"));
  // Subjects in one modality only are reported, not silently dropped.
  auto extra = good;
  extra.subjects.push_back(good.subjects[0]);
  extra.subjects.back().id = "sub-9999";
  medical::write_manifest(dir + "/extra.csv", extra);
  const auto s = run_qkv("mhca select --manifest " + dir + "/extra.csv --methylation " + methylation() + " --out " +
                         dir + "/sel.txt --n-features 5 --xgb-estimators 5");
  EXPECT_EQ(s.status, 0) << s.output;
  EXPECT_NE(s.output.find("1 only in the manifest (sub-9999)"), std::string::npos) << s.output;
}

}  // namespace
}  // namespace qkv::testing
