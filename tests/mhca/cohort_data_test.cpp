// What reaches the MHCA networks: preprocessing fitted on training rows only,
// missing values imputed with those rows' means, augmentation that changes
// only what it should.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/tasks/mhca_cv.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

medical::CohortData small_cohort() {
  medical::CohortData c;
  c.subject_ids = {"a", "b", "c", "d"};
  c.labels = {0, 1, 0, 1};
  c.methylation.subject_ids = c.subject_ids;
  c.methylation.cpg_ids = {"cg1", "cg2"};
  const float nan = std::nanf("");
  c.methylation.values = {0.1f, 0.5f,  //
                          0.3f, nan,   //
                          0.9f, 0.7f,  //
                          nan,  0.2f};
  c.methylation.path = "table.csv";
  c.volumes = torch::zeros({4, 4, 5, 6});
  for (int64_t i = 0; i < 4; ++i) c.volumes[i].fill_(static_cast<double>(i));
  c.volumes[3][0][0][0] = 100;  // a test subject's outlier must not set the scale
  return c;
}

TEST(CohortData, ACpgSiteWithNoValueForAnySubjectIsNamed) {
  // Imputed as 0.5 for everyone (no mean to take): it says nothing, and the user hears so.
  const auto dir = fresh_dir("cohort_empty_site");
  write_text_file(dir + "/manifest.csv", "subject_id,label,spect\ns1,0,a.nii.gz\ns2,1,b.nii.gz\n");
  write_text_file(dir + "/meth.csv", "subject_id,cg1,cg2,cg3\ns1,0.1,,0.3\ns2,0.4,,\n");
  std::vector<std::string> said;
  {
    const ScopedLineSink capture([&](const std::string& line) { said.push_back(line); });
    medical::load_cohort(dir + "/manifest.csv", dir + "/meth.csv", /*load_volumes=*/false, 1);
  }
  std::string all;
  for (const auto& line : said) all += line + "\n";
  EXPECT_NE(all.find("warning: 1 CpG site has no value for any subject in " + dir + "/meth.csv: cg2 "),
            std::string::npos)
      << all;
}

TEST(CohortData, PreprocessingSeesTrainingRowsOnly) {
  const auto c = small_cohort();
  const std::vector<int64_t> train{0, 1, 2};
  const auto prep = medical::fit_preprocessing(c, train, {"cg2", "cg1"}, "global");
  EXPECT_DOUBLE_EQ(prep.volume_min, 0);
  EXPECT_DOUBLE_EQ(prep.volume_max, 2);
  ASSERT_EQ(prep.cpg_means.size(), 2u);
  EXPECT_FLOAT_EQ(prep.cpg_means[0], 0.6f);                      // cg2 over a, c (b missing)
  EXPECT_FLOAT_EQ(prep.cpg_means[1], (0.1f + 0.3f + 0.9f) / 3);  // cg1 over a, b, c
  auto ds = medical::make_dataset(c, {1, 3}, prep);
  auto batch = ds->get({0, 1});
  auto m = batch.input("methylation");
  EXPECT_FLOAT_EQ(m[0][0].item<float>(), 0.6f);  // b's missing cg2 -> the training mean
  EXPECT_FLOAT_EQ(m[1][1].item<float>(), prep.cpg_means[1]);
  EXPECT_EQ(batch.input("spect").sizes(), (std::vector<int64_t>{2, 1, 4, 5, 6}));
  EXPECT_FLOAT_EQ(batch.input("spect")[0][0][1][1][1].item<float>(), 0.5f);  // (1 - 0) / (2 - 0)
  EXPECT_EQ(batch.target[1].item<int64_t>(), 1);
  // Per-subject normalisation scales each volume by its own range.
  auto subject = medical::make_dataset(c, {3}, medical::fit_preprocessing(c, train, {"cg1"}, "subject"))->get({0});
  EXPECT_FLOAT_EQ(subject.input("spect").max().item<float>(), 1.0f);
  EXPECT_THROW(medical::fit_preprocessing(c, train, {"cg1"}, "zscore"), UsageError);
  EXPECT_THROW(medical::fit_preprocessing(c, train, {"cg9"}, "global"), DataError);
}

TEST(CohortData, PreprocessingRoundTripsThroughJson) {
  const auto c = small_cohort();
  const auto prep = medical::fit_preprocessing(c, {0, 2}, {"cg1", "cg2"}, "global");
  const auto back = medical::Preprocessing::from_json(prep.to_json());
  EXPECT_EQ(back.cpg_ids, prep.cpg_ids);
  EXPECT_EQ(back.cpg_means, prep.cpg_means);
  EXPECT_DOUBLE_EQ(back.volume_max, prep.volume_max);
  EXPECT_THROW(medical::Preprocessing::from_json({{"normalisation", "global"}}), DataError);
}

TEST(CohortData, AugmentationTouchesOnlyChosenSamples) {
  torch::manual_seed(0);
  auto spect = torch::rand({32, 1, 8, 9, 10});
  auto meth = torch::rand({32, 5});
  data::Batch batch{{{"spect", spect}, {"methylation", meth}}, torch::zeros({32}, torch::kLong)};
  medical::Augmentation none;
  none.fraction = 0;
  auto same = none(batch);
  EXPECT_TRUE(torch::equal(same.input("spect"), spect));
  medical::Augmentation all;
  all.fraction = 1;
  all.cpg_std = torch::full({5}, 0.1);
  auto changed = all(batch);
  EXPECT_EQ(changed.input("spect").sizes(), spect.sizes());
  EXPECT_FALSE(torch::equal(changed.input("spect"), spect));
  EXPECT_TRUE(torch::equal(batch.input("spect"), spect));  // the input batch is left alone
  auto noise = (changed.input("methylation") - meth).abs();
  EXPECT_GT(noise.max().item<double>(), 0);
  EXPECT_LT(noise.max().item<double>(), 0.1 * 0.05 * 6);  // 6 sigma of 5 % of the std
  EXPECT_GE(changed.input("methylation").min().item<double>(), 0);
  EXPECT_LE(changed.input("methylation").max().item<double>(), 1);
  // A rotation by 0 degrees is the identity up to resampling round-off.
  medical::Augmentation still;
  still.fraction = 1;
  still.max_degrees = 0;
  still.noise = 0;
  EXPECT_TRUE(torch::allclose(still(batch).input("spect"), spect, 1e-5, 1e-5));
}

TEST(CohortData, EnlargeAppendsAugmentedCopiesOnceAsTheAuthorsCodeDoes) {
  torch::manual_seed(0);
  auto spect = torch::rand({25, 1, 8, 9, 10});
  auto meth = torch::rand({25, 5});
  auto labels = torch::arange(25, torch::kLong) % 2;
  auto train = std::make_shared<data::TensorDataset>(
      std::map<std::string, at::Tensor>{{"spect", spect}, {"methylation", meth}}, labels);
  medical::Augmentation a;
  a.mode = "enlarge";
  a.fraction = 0.1;
  a.noise = 2.0;  // large: unclamped noise leaves [0, 1]
  a.cpg_std = torch::full({5}, 0.5);
  const auto enlarged = medical::enlarge_training_set(train, a, 7);
  ASSERT_EQ(enlarged->size(), 27);  // floor(25 x 0.1) copies
  // The original rows come first, untouched; the same seed gives the same copies.
  const auto head = enlarged->get({0, 3, 24});
  EXPECT_TRUE(torch::equal(head.input("spect"), spect.index_select(0, torch::tensor({0, 3, 24}))));
  const auto copies = enlarged->get({25, 26});
  EXPECT_TRUE(torch::equal(copies.input("methylation"),
                           medical::enlarge_training_set(train, a, 7)->get({25, 26}).input("methylation")));
  EXPECT_FALSE(torch::equal(copies.input("methylation"),
                            medical::enlarge_training_set(train, a, 8)->get({25, 26}).input("methylation")));
  const auto m = copies.input("methylation");
  EXPECT_TRUE((m < 0).any().item<bool>() || (m > 1).any().item<bool>()) << m;
  // Each copy is a rotated original with that original's label: a copy's
  // labels are among the originals', and its volume is no original's.
  for (int64_t k = 0; k < 2; ++k) {
    const auto v = copies.input("spect")[k];
    EXPECT_GT((spect - v.unsqueeze(0)).abs().flatten(1).amax(1).min().item<double>(), 1e-4);
  }
  // Mixed requests keep their order.
  const auto mixed = enlarged->get({26, 1, 25});
  EXPECT_TRUE(torch::equal(mixed.input("methylation")[1], meth[1]));
  EXPECT_TRUE(torch::equal(mixed.input("methylation")[0], copies.input("methylation")[1]));
  EXPECT_TRUE(torch::equal(mixed.input("methylation")[2], copies.input("methylation")[0]));
  // Mode "batch" leaves the set alone and augments batches instead.
  a.mode = "batch";
  const auto batch_mode = medical::augmented_training(train, a, 7);
  EXPECT_EQ(batch_mode.train->size(), 25);
  EXPECT_TRUE(static_cast<bool>(batch_mode.augment));
  a.mode = "enlarge";
  EXPECT_FALSE(static_cast<bool>(medical::augmented_training(train, a, 7).augment));
}

TEST(CohortData, BinaryMetricsSayWhyAurocIsMissing) {
  auto j = tasks::binary_metrics({0.9, 0.8, 0.7}, {1, 1, 1});
  EXPECT_TRUE(j.at("auroc").is_null());
  EXPECT_NE(j.at("note").get<std::string>().find("all 3 samples are class 1"), std::string::npos) << j.dump();
  EXPECT_DOUBLE_EQ(j.at("accuracy").get<double>(), 1.0);
  auto k = tasks::binary_metrics({0.9, 0.2, 0.6, 0.4}, {1, 0, 0, 1});
  EXPECT_DOUBLE_EQ(k.at("auroc").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(k.at("sensitivity").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(k.at("specificity").get<double>(), 0.5);
  // From labels (the authors' AUROC): the balanced accuracy.
  EXPECT_DOUBLE_EQ(k.at("auroc_hard").get<double>(), 0.5);
}

}  // namespace
}  // namespace qkv::testing
