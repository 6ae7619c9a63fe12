#pragma once
// A cross validation's folder (`mhca cv`), whose records make it resumable:
// the settings it was started with (cv_settings.json), written once and
// compared on every later call; below folds/run<r>_fold<k>/, each model's
// finished fold (<model>/fold_predictions.json) and whatever a fold shares
// (the selected CpG list). A call finds what an interrupted one finished and
// goes on from there. The folder itself is claimed as a train::RunFolder.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "qkv/data/folds.h"

namespace qkv::train {

// The seeds of one fold of a cross validation with `folds` folds per run,
// from the fold's index i = run x folds + fold, in this one place: a
// network's initial weights and augmentation draw from seed + 1000003 i (a
// prime above any fold count keeps neighbouring folds far apart); the
// XGBoost baseline's subsampling from seed + i, as every cross validation in
// docs/ was measured (one formula for both would change their XGBoost rows).
// Both within the 63 bits XGBoost takes.
struct FoldSeeds {
  uint64_t network = 0;
  uint64_t xgboost = 0;
};
FoldSeeds fold_seeds(uint64_t seed, const data::CVFold& fold, int64_t folds);

// "run2_fold3" (1-based).
std::string fold_name(const data::CVFold& fold);

class CVFolder {
 public:
  explicit CVFolder(std::string dir) : dir_(std::move(dir)) {}

  // The settings written into a new folder, or compared with those there;
  // ConfigError naming "out" with the first difference ("folds: 2 there, 3
  // now") when they differ, and nothing is changed. "recipe" is not
  // compared: a recipe's values are compared as the options it set.
  void claim_settings(const nlohmann::json& settings) const;

  const std::string& dir() const { return dir_; }
  std::string fold_dir(const data::CVFold& fold) const;                             // DIR/folds/run1_fold2
  std::string model_dir(const data::CVFold& fold, const std::string& model) const;  // .../run1_fold2/mhca

  // A model's record of a fold it finished, or nothing (not finished yet).
  std::optional<nlohmann::json> finished(const data::CVFold& fold, const std::string& model) const;
  bool is_finished(const data::CVFold& fold, const std::string& model) const;
  // Marks the fold finished for the model, with its record (written last, so
  // that an interrupted fold is trained again, never read back half done).
  void record_finished(const data::CVFold& fold, const std::string& model, const nlohmann::json& record) const;

 private:
  std::string finished_file(const data::CVFold& fold, const std::string& model) const;
  std::string dir_;
};

}  // namespace qkv::train
