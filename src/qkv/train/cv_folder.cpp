#include "qkv/train/cv_folder.h"

#include <filesystem>
#include <set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"

namespace qkv::train {
namespace fs = std::filesystem;

namespace {

// The first setting that differs, as "folds: 2 there, 3 now" (values
// shortened), for a resume refused because of it.
// The first setting that differs, by its path through nested objects
// ("train.epochs: 2 there, 3 now"): a whole object cut to a few dozen
// characters would show the same text twice.
std::string settings_difference(const nlohmann::json& stored, const nlohmann::json& now, const std::string& path = "") {
  auto shown = [](const nlohmann::json& j, const std::string& key) {
    return j.contains(key) ? shortened(j.at(key).dump(), 60) : std::string("none");
  };
  std::set<std::string> keys;
  for (const auto& item : stored.items()) keys.insert(item.key());
  for (const auto& item : now.items()) keys.insert(item.key());
  for (const auto& key : keys) {
    const bool same = stored.contains(key) && now.contains(key) && stored.at(key) == now.at(key);
    if (same) continue;
    if (stored.contains(key) && now.contains(key) && stored.at(key).is_object() && now.at(key).is_object())
      return settings_difference(stored.at(key), now.at(key), path + key + ".");
    return path + key + ": " + shown(stored, key) + " there, " + shown(now, key) + " now";
  }
  return "none";
}

}  // namespace

FoldSeeds fold_seeds(uint64_t seed, const data::CVFold& fold, int64_t folds) {
  constexpr uint64_t k63Bits = 0x7fffffffffffffffULL;
  const auto index = static_cast<uint64_t>(fold.run * folds + fold.fold);
  return {(seed + 1000003ULL * index) & k63Bits, (seed + index) & k63Bits};
}

std::string fold_name(const data::CVFold& fold) {
  return "run" + std::to_string(fold.run + 1) + "_fold" + std::to_string(fold.fold + 1);
}

void CVFolder::claim_settings(const nlohmann::json& settings) const {
  const std::string settings_file = dir_ + "/cv_settings.json";
  if (!fs::exists(settings_file)) {
    write_file_atomic(settings_file, json_text(settings) + "\n");
    return;
  }
  auto stored = read_json_file(settings_file);
  auto now = settings;
  stored.erase("recipe");  // a recipe's values are compared as the options they set
  now.erase("recipe");
  if (stored != now) {
    // A setting that differs is named before the data's digest, which says less ("models: ... there").
    auto stored_settings = stored, now_settings = now;
    for (auto* j : {&stored_settings, &now_settings})
      if (j->contains("cohort") && j->at("cohort").is_object()) j->at("cohort").erase("data_crc32");
    const std::string what = stored_settings != now_settings
                                 ? settings_difference(stored_settings, now_settings)
                                 : settings_difference(stored, now) + ": the cohort's files hold other data";
    throw ConfigError("out", dir_ + " holds a cross validation with other settings (" + what + "; " + settings_file +
                                 "); use another {out}, or the same options to continue it (nothing was changed)");
  }
}

std::string CVFolder::fold_dir(const data::CVFold& fold) const { return dir_ + "/folds/" + fold_name(fold); }

std::string CVFolder::model_dir(const data::CVFold& fold, const std::string& model) const {
  return fold_dir(fold) + "/" + model;
}

std::string CVFolder::finished_file(const data::CVFold& fold, const std::string& model) const {
  return model_dir(fold, model) + "/fold_predictions.json";
}

bool CVFolder::is_finished(const data::CVFold& fold, const std::string& model) const {
  return fs::exists(finished_file(fold, model));
}

std::optional<nlohmann::json> CVFolder::finished(const data::CVFold& fold, const std::string& model) const {
  if (!is_finished(fold, model)) return std::nullopt;
  return read_json_file(finished_file(fold, model));
}

void CVFolder::record_finished(const data::CVFold& fold, const std::string& model, const nlohmann::json& record) const {
  write_file_atomic(finished_file(fold, model), record.dump() + "\n");
}

}  // namespace qkv::train
