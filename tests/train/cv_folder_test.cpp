// train::CVFolder keeps what makes a cross validation resumable: its settings,
// written once and compared on every later call, and each model's finished
// folds; train::fold_seeds derives every fold's seeds in one place.
#include "qkv/train/cv_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;

data::CVFold fold_of(int64_t run, int64_t fold) {
  data::CVFold f;
  f.run = run;
  f.fold = fold;
  return f;
}

TEST(CVFolder, SettingsAreWrittenOnceAndAnotherCallMustBringTheSame) {
  const std::string dir = fresh_dir("cv_folder_settings");
  make_directories(dir);
  const train::CVFolder folder(dir);
  const nlohmann::json settings = {{"folds", 2}, {"runs", 1}, {"recipe", "mhca-paper"}};
  folder.claim_settings(settings);
  const auto written = read_file_bytes(dir + "/cv_settings.json");
  auto same = settings;
  same["recipe"] = nullptr;  // a recipe is compared as the options it set
  EXPECT_NO_THROW(folder.claim_settings(same));
  auto other = settings;
  other["folds"] = 3;
  try {
    folder.claim_settings(other);
    ADD_FAILURE() << "other settings were accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "out");
    EXPECT_NE(std::string(e.what()).find("folds: 2 there, 3 now"), std::string::npos) << e.what();
  }
  // A setting inside a long object is named by its path, not by the object
  // cut short (which showed the same text twice).
  auto nested = settings;
  nested["train"] = {
      {"batch_size", 4}, {"bn_momentum", 0.1}, {"clip", "none of these fit in sixty characters"}, {"epochs", 2}};
  const std::string nested_dir = fresh_dir("cv_folder_nested");
  make_directories(nested_dir);
  const train::CVFolder second(nested_dir);
  second.claim_settings(nested);
  nested["train"]["epochs"] = 3;
  try {
    second.claim_settings(nested);
    ADD_FAILURE() << "other settings were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.epochs: 2 there, 3 now"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file_bytes(dir + "/cv_settings.json"), written);  // nothing changed
}

TEST(CVFolder, AFoldIsFinishedForAModelOnceItsRecordIsWritten) {
  const std::string dir = fresh_dir("cv_folder_records");
  const train::CVFolder folder(dir);
  const auto fold = fold_of(1, 2);
  EXPECT_EQ(folder.fold_dir(fold), dir + "/folds/run2_fold3");
  EXPECT_EQ(folder.model_dir(fold, "mhca"), dir + "/folds/run2_fold3/mhca");
  EXPECT_FALSE(folder.is_finished(fold, "mhca"));
  EXPECT_FALSE(folder.finished(fold, "mhca").has_value());
  make_directories(folder.model_dir(fold, "mhca"));
  const nlohmann::json record = {{"probabilities", {0.25, 0.75}}, {"info", {{"epochs", 3}}}};
  folder.record_finished(fold, "mhca", record);
  EXPECT_TRUE(folder.is_finished(fold, "mhca"));
  EXPECT_EQ(folder.finished(fold, "mhca").value(), record);
  EXPECT_FALSE(folder.is_finished(fold, "xgboost"));  // per model
  EXPECT_FALSE(folder.is_finished(fold_of(0, 2), "mhca"));
}

TEST(FoldSeeds, EveryFoldOfEveryRunHasItsOwnSeedsWithin63Bits) {
  std::set<uint64_t> network, xgboost;
  for (int64_t run = 0; run < 3; ++run)
    for (int64_t fold = 0; fold < 5; ++fold) {
      const auto s = train::fold_seeds(7, fold_of(run, fold), 5);
      network.insert(s.network);
      xgboost.insert(s.xgboost);
    }
  EXPECT_EQ(network.size(), 15u);
  EXPECT_EQ(xgboost.size(), 15u);
  // The derivations the cross validations in docs/ were measured with.
  EXPECT_EQ(train::fold_seeds(7, fold_of(1, 2), 5).network, 7u + 1000003u * 7u);
  EXPECT_EQ(train::fold_seeds(7, fold_of(1, 2), 5).xgboost, 7u + 7u);
  const auto top = train::fold_seeds(~uint64_t{0}, fold_of(0, 0), 5);
  EXPECT_LT(top.network, uint64_t{1} << 63);
  EXPECT_LT(top.xgboost, uint64_t{1} << 63);
}

}  // namespace
}  // namespace qkv::testing
