// The cross-modal benchmark: a cohort where neither modality alone says
// anything (statistical tests with a fixed seed), the oracle check it prints,
// mhca-x and its ablations doing what their options say, gradients that
// reach the score weights, and explain's scoring at token resolution.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/core/json_file.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/medical/nifti.h"
#include "qkv/models/mhca.h"
#include "qkv/models/mhca_x.h"
#include "qkv/synth_cohort/synth_cohort.h"
#include "qkv/tasks/mhca_explain.h"
#include "support/cli_run.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

// Two-sample Kolmogorov-Smirnov statistic.
double ks_statistic(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const double x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] <= x) ++i;
    while (j < b.size() && b[j] <= x) ++j;
    d = std::max(d, std::abs(static_cast<double>(i) / a.size() - static_cast<double>(j) / b.size()));
  }
  return d;
}

// Welch's t of a against b.
double welch_t(const std::vector<double>& a, const std::vector<double>& b) {
  auto moments = [](const std::vector<double>& v, double& mean, double& var) {
    mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    var /= static_cast<double>(v.size() - 1);
  };
  double ma, va, mb, vb;
  moments(a, ma, va);
  moments(b, mb, vb);
  return (ma - mb) / std::sqrt(va / static_cast<double>(a.size()) + vb / static_cast<double>(b.size()));
}

class CrossModalCohort : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(fresh_dir("cross_modal_cohort"));
    medical::SynthCohortOptions o;
    o.subjects = 400;
    o.cpg = 60;
    o.shape = {12, 14, 12};
    o.atlas = "none";
    o.planted_class_sites = 0;
    o.planted_putamen_sites = 0;
    o.cross_modal_sites = 8;
    o.missing_fraction = 0;
    o.seed = 3;
    o.threads = 2;
    summary_ = new medical::SynthCohortSummary(medical::write_synth_cohort(*dir_, o));
    truth_ = new nlohmann::json(read_json_file(*dir_ + "/ground_truth.json"));
  }
  static void TearDownTestSuite() {
    delete summary_;
    delete truth_;
    delete dir_;
  }
  static std::string* dir_;
  static medical::SynthCohortSummary* summary_;
  static nlohmann::json* truth_;
};
std::string* CrossModalCohort::dir_ = nullptr;
medical::SynthCohortSummary* CrossModalCohort::summary_ = nullptr;
nlohmann::json* CrossModalCohort::truth_ = nullptr;

TEST_F(CrossModalCohort, EachModalityAloneIsTheSameInPdAndControlsButTheirProductIsNot) {
  const auto table = medical::read_methylation_table(*dir_ + "/methylation.csv");
  const auto& subjects = truth_->at("subjects");
  int sites = 0;
  for (const auto& site : truth_->at("informative_sites")) {
    if (site.at("kind") != "cross_modal") continue;
    ++sites;
    const auto column = site.at("column").get<int64_t>();
    const auto region = site.at("cross_modal_mask_label").get<int64_t>() - 1;
    std::vector<double> beta_pd, beta_control, product_pd, product_control, z_pd, z_control;
    for (size_t r = 0; r < subjects.size(); ++r) {
      const double beta = table.at(static_cast<int64_t>(r), column);
      const double logit = std::log(beta / (1 - beta));
      const double z = subjects[r].at("cross_modal_z").at(region);
      const bool pd = subjects[r].at("label") == 1;
      (pd ? beta_pd : beta_control).push_back(beta);
      (pd ? z_pd : z_control).push_back(z);
      (pd ? product_pd : product_control)
          .push_back((logit - std::log(site.at("reference_beta").get<double>() /
                                       (1 - site.at("reference_beta").get<double>()))) *
                     z);
    }
    // KS at alpha = 0.001: c = 1.95 sqrt((n + m) / (n m)).
    const double n = static_cast<double>(beta_pd.size()), m = static_cast<double>(beta_control.size());
    const double critical = 1.95 * std::sqrt((n + m) / (n * m));
    SCOPED_TRACE(site.at("id").get<std::string>());
    EXPECT_LT(ks_statistic(beta_pd, beta_control), critical);
    EXPECT_LT(ks_statistic(z_pd, z_control), critical);
    // The coupling's sign flips with the class: (logit - mu) x z differs by far.
    const double sign = site.at("nominal_correlation_within_class").get<double>() > 0 ? 1 : -1;
    EXPECT_GT(sign * welch_t(product_pd, product_control), 5.0);
  }
  EXPECT_EQ(sites, 8);
}

TEST_F(CrossModalCohort, TheOracleCheckShowsTheGainIsInTheProductsAlone) {
  const auto& oracle = truth_->at("oracle_check");
  EXPECT_EQ(oracle, summary_->oracle);
  const double additive = oracle.at("additive_gain"), product = oracle.at("product_gain");
  EXPECT_GT(product, 0.02) << oracle.dump();
  EXPECT_LT(std::abs(additive), product / 2) << oracle.dump();
  EXPECT_NE(summary_->oracle_check.find("products"), std::string::npos) << summary_->oracle_check;
}

TEST_F(CrossModalCohort, RegionsAreBrainTissueLeftAndRightOfTheMidline) {
  const auto mask = medical::read_nifti(*dir_ + "/cross_modal_mask.nii.gz");
  const auto affine = mask.geometry.affine();
  for (int label = 1; label <= 4; ++label) {
    double x_sum = 0;
    int64_t count = 0;
    for (int64_t k = 0; k < mask.dims[2]; ++k)
      for (int64_t j = 0; j < mask.dims[1]; ++j)
        for (int64_t i = 0; i < mask.dims[0]; ++i)
          if (mask.at(i, j, k) == static_cast<float>(label)) {
            x_sum += affine[0] * i + affine[1] * j + affine[2] * k + affine[3];
            ++count;
          }
    ASSERT_GT(count, 0) << label;
    // Labels 1 and 3 are left (world x < 0), 2 and 4 right.
    EXPECT_EQ(x_sum / static_cast<double>(count) < 0, label % 2 == 1) << label;
  }
}

// Small networks on 8^3 volumes: a 4 x 4 x 4 grid of 64 tokens.
nlohmann::json small_net(nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json j = {{"volume_shape", {8, 8, 8}},
                      {"channels", {4, 4}},
                      {"padding", 1},
                      {"features", 64},
                      {"embedding", 8},
                      {"heads", 2},
                      {"width", 8}};
  j.update(extra);
  return j;
}

data::Batch random_batch(int64_t b) {
  data::Batch batch;
  batch.inputs["spect"] = torch::rand({b, 1, 8, 8, 8});
  batch.inputs["methylation"] = torch::rand({b, 64});
  batch.target = torch::randint(0, 2, {b}, torch::kLong);
  return batch;
}

TEST(MhcaX, UniformAblationWeighsEveryTokenAlike) {
  torch::manual_seed(0);
  auto model =
      std::dynamic_pointer_cast<models::CoAttentionModel>(models::find_model("mhca-x-uniform").make(small_net()));
  ASSERT_TRUE(model);
  model->eval();
  const auto ex = model->forward_explained(random_batch(3));
  EXPECT_TRUE(torch::equal(ex.attention.alpha_v, torch::full_like(ex.attention.alpha_v, 1.0 / 64)));
  // The learned one does not.
  auto learned = std::dynamic_pointer_cast<models::CoAttentionModel>(models::find_model("mhca-x").make(small_net()));
  learned->eval();
  const auto alpha = learned->forward_explained(random_batch(3)).attention.alpha_v;
  EXPECT_GT((alpha - 1.0 / 64).abs().max().item<double>(), 1e-3);
  EXPECT_TRUE(torch::allclose(alpha.sum(-1), torch::ones_like(alpha.sum(-1)), 1e-5, 1e-5));
}

// Sets every site weight (zero at the start) to random values.
void randomise_site_weights(torch::nn::Module& model, double scale) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters())
    if (p.key().rfind("site_", 0) == 0) p.value().normal_(0, scale);
}

TEST(MhcaX, NoValuesAblationCutsTheVolumeFromTheSites) {
  torch::manual_seed(1);
  auto model =
      std::dynamic_pointer_cast<models::CoAttentionModel>(models::find_model("mhca-x-no-values").make(small_net()));
  auto randomise_but_the_bias = [](torch::nn::Module& m, double scale) {
    randomise_site_weights(m, scale);
    torch::NoGradGuard no_grad;
    for (auto& p : m.named_parameters())
      if (p.key() == "site_bias") p.value().zero_();
  };
  randomise_but_the_bias(*model, 1.0);
  model->eval();
  auto batch = random_batch(4);
  const auto ex = model->forward_explained(batch);
  EXPECT_EQ(ex.attention.values_out.abs().max().item<double>(), 0.0);
  // Its sites' terms are then 0 whatever their weights: the output is the SPECT head's.
  const auto before = ex.log_probs;
  randomise_but_the_bias(*model, 3.0);
  const auto after = model->forward_explained(batch).log_probs;
  EXPECT_TRUE(torch::allclose(before, after, 1e-6, 1e-6));
  // With values, the same change moves the output.
  auto full = std::dynamic_pointer_cast<models::CoAttentionModel>(models::find_model("mhca-x").make(small_net()));
  randomise_site_weights(*full, 1.0);
  full->eval();
  const auto a = full->forward_explained(batch).log_probs;
  randomise_site_weights(*full, 3.0);
  EXPECT_FALSE(torch::allclose(a, full->forward_explained(batch).log_probs, 1e-3, 1e-3));
}

TEST(MhcaX, CosineScoresAreSignedAndBoundedByTheTemperature) {
  torch::manual_seed(2);
  auto model = std::dynamic_pointer_cast<models::CoAttentionModel>(models::find_model("mhca-x").make(small_net()));
  model->eval();
  const auto scores = model->forward_explained(random_batch(2)).attention.scores;
  EXPECT_LE(scores.abs().max().item<double>(), 4.0 + 1e-4);  // temperature_init
  EXPECT_LT(scores.min().item<double>(), -0.5);              // no ReLU: negative scores exist
  EXPECT_GT(scores.max().item<double>(), 0.5);
  // Any CpG count: 10 sites on 64 tokens.
  auto ten = models::find_model("mhca-x").make(small_net({{"features", 10}}));
  data::Batch b = random_batch(2);
  b.inputs["methylation"] = torch::rand({2, 10});
  EXPECT_EQ(ten->forward(b).sizes(), (std::vector<int64_t>{2, 2}));
}

// Gradient norm of the score weights (the keys' projection) against the
// classifier's, one backward pass on a random batch: in mhca the ReLU'd,
// unnormalised scores and the bypass leave the keys a tiny share.
double key_to_classifier_ratio(models::Model& model, const std::string& key_weight,
                               const std::string& classifier_weight) {
  torch::manual_seed(5);
  auto batch = random_batch(8);
  model.train();
  model.zero_grad();
  torch::nll_loss(model.forward(batch), batch.target).backward();
  double key = 0, classifier = 0;
  for (const auto& p : model.named_parameters()) {
    if (p.key() == key_weight) key = p.value().grad().norm().item<double>();
    if (p.key() == classifier_weight) classifier = p.value().grad().norm().item<double>();
  }
  EXPECT_GT(classifier, 0) << classifier_weight;
  return key / classifier;
}

TEST(MhcaX, GradientsReachTheScoreWeights) {
  torch::manual_seed(3);
  auto x = models::find_model("mhca-x").make(small_net());
  randomise_site_weights(*x, 0.1);  // as after the first steps (they start at zero)
  auto paper = models::find_model("mhca").make(small_net({{"width", 8}, {"hidden", 16}}));
  const double ratio_x = key_to_classifier_ratio(*x, "k.weight", "site_bilinear");
  const double ratio_paper = key_to_classifier_ratio(*paper, "co_attention.k.weight", "h1.weight");
  std::printf("key / classifier gradient norm: mhca-x %.3g, mhca %.3g\n", ratio_x, ratio_paper);
  EXPECT_GT(ratio_x, 0.01);
  EXPECT_GT(ratio_x, 10 * ratio_paper) << "mhca-x " << ratio_x << ", mhca " << ratio_paper;
}

TEST(MhcaExplain, TheSliceGoesThroughThePeakInsideTheBrain) {
  // A brain block of ones in a zero background, and a map whose largest value
  // lies outside it (as an edge-clamped token map can).
  auto anatomy = torch::zeros({10, 10, 10});
  anatomy.slice(0, 3, 7).slice(1, 3, 7).slice(2, 3, 7).fill_(1.0);
  auto map = torch::zeros({10, 10, 10});
  map[0][0][0] = 5.0;
  map[5][4][6] = 2.0;
  const auto mask = tasks::brain_mask(anatomy);
  EXPECT_EQ(mask.sum().item<int64_t>(), 64);
  EXPECT_EQ(tasks::peak_voxel_in(map, mask), (std::array<int64_t, 3>{5, 4, 6}));
}

// The whole path from the command line: synth with cross-modal sites, mhca-x
// trained briefly, explain scoring each planted site at token resolution and
// drawing each region's sites.
TEST(MhcaXCli, ExplainScoresCrossModalSitesAtTokenResolution) {
  const std::string root = fresh_dir("mhca_x_cli");
  const std::string cohort = root + "/cohort";
  const auto synth = run_qkv("mhca synth --out " + cohort +
                             " --subjects 24 --cpg 40 --shape 24,28,24 --atlas none --seed 5"
                             " --planted-class-sites 0 --planted-putamen-sites 0 --cross-modal-sites 8");
  ASSERT_EQ(synth.status, 0) << synth.output;
  EXPECT_NE(synth.output.find("oracle check"), std::string::npos) << synth.output;
  const std::string args = "--manifest " + cohort + "/manifest.csv --methylation " + cohort + "/methylation.csv";
  const auto train = run_qkv("mhca train " + args +
                             " --model mhca-x --select all --model-options '{\"channels\":[4,8,8],\"padding\":1}'"
                             " --epochs 1 --lr 1e-3 --threads 2 --out " +
                             root + "/run");
  ASSERT_EQ(train.status, 0) << train.output;
  const auto e = run_qkv("mhca explain " + args + " --checkpoint " + root + "/run/checkpoints/best.ckpt --all --out " +
                         root + "/explain");
  ASSERT_EQ(e.status, 0) << e.output;
  const auto j = read_json(root + "/explain/explain.json");
  const auto& t = j.at("token_resolution").at("cross_modal");
  EXPECT_EQ(t.at("planted_sites"), 8);
  EXPECT_EQ(t.at("sites_scored"), 8);
  EXPECT_EQ(t.at("unplanted_sites"), 40 - 8);
  EXPECT_GT(t.at("unplanted_alpha_v_region_enrichment").get<double>(), 0);
  for (const auto& site : t.at("sites")) {
    EXPECT_GE(site.at("own_tokens").size(), 1u);
    const double own = site.at("alpha_v_own");
    EXPECT_GT(own, 0);
    EXPECT_LT(own, 1);
    EXPECT_NEAR(site.at("alpha_v_own_enrichment").get<double>(), own / site.at("alpha_v_own_chance").get<double>(),
                1e-9);
  }
  // Uniform attention is chance by construction: every enrichment is 1, the
  // unplanted sites' control included.
  const auto uniform = run_qkv("mhca train " + args +
                               " --model mhca-x-uniform --select all --model-options "
                               "'{\"channels\":[4,8,8],\"padding\":1}' --epochs 1 --threads 2 --out " +
                               root + "/uniform");
  ASSERT_EQ(uniform.status, 0) << uniform.output;
  ASSERT_EQ(
      run_qkv("mhca explain " + args + " --checkpoint " + root + "/uniform --all --out " + root + "/ex_uniform").status,
      0);
  const auto uniform_explained = read_json(root + "/ex_uniform/explain.json");
  const auto& u = uniform_explained.at("token_resolution").at("cross_modal");
  EXPECT_NEAR(u.at("mean_alpha_v_own_enrichment").get<double>(), 1, 1e-5);
  EXPECT_NEAR(u.at("mean_alpha_v_mirror_enrichment").get<double>(), 1, 1e-5);
  EXPECT_NEAR(u.at("unplanted_alpha_v_region_enrichment").get<double>(), 1, 1e-5);
  for (const char* region : {"left_frontal", "right_frontal", "left_parietal", "right_parietal"})
    EXPECT_TRUE(std::filesystem::exists(root + "/explain/planted_" + std::string(region) + "_axial.png")) << region;
  // Every subject's slices go through a voxel inside its brain.
  const auto subjects = medical::read_manifest(cohort + "/manifest.csv").subjects;
  for (size_t s = 0; s < 4; ++s) {
    const auto volume = medical::volume_to_tensor(medical::read_nifti(subjects[s].spect_path));
    const auto peak = j.at("subjects").at(s).at("peak_voxel").get<std::array<int64_t, 3>>();
    EXPECT_TRUE(tasks::brain_mask(volume)[peak[0]][peak[1]][peak[2]].item<bool>()) << subjects[s].id;
  }
}

}  // namespace
}  // namespace qkv::testing
