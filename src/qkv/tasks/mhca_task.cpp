#include "qkv/tasks/mhca_task.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "qkv/data/folds.h"
#include "qkv/medical/orientation.h"
#include "qkv/models/presets.h"
#include "qkv/runtime/build_parts.h"

namespace qkv::tasks {

void validate_selection(const tasks::FeatureSelection& s) {
  check_field_ranges(s);
  if (s.mode == "list" && s.list_path.empty()) throw ConfigError("select", "list needs {cpg_list} FILE");
  s.xgboost.validate();
}

void check_xgboost_is_built(const tasks::FeatureSelection& s, const std::vector<std::string>& models) {
  if (built_with(Part::XGBoost)) return;
  // Not "{select}": mhca select has no such option, it always runs RFE.
  if (s.mode == "rfe") refuse_without(Part::XGBoost, "RFE feature selection");
  for (const auto& m : models)
    if (m == "xgboost") refuse_without(Part::XGBoost, "{model} xgboost");
}

void validate_augmentation(const medical::Augmentation& a) { check_field_ranges(a); }

std::vector<InputPath> cohort_input_paths(const std::string& manifest, const std::string& methylation) {
  std::vector<InputPath> inputs{{"manifest", manifest}, {"methylation", methylation}};
  if (manifest.empty()) return inputs;
  for (const auto& subject : medical::read_manifest(manifest, /*labels_optional=*/true).subjects)
    inputs.push_back({"manifest", subject.spect_path, manifest});
  return inputs;
}

void set_mhca_paper_defaults(train::TrainConfig& c) {
  c.epochs = 200;
  c.batch_size = 16;
  c.optim.optimizer = "adam";
  c.optim.lr = 3e-5;
  c.select_metric = "loss";
  c.patience = 20;
}

void MhcaTrainData::validate() const {
  if (manifest.empty()) throw ConfigError("manifest", "must name the cohort CSV");
  if (methylation.empty()) throw ConfigError("methylation", "must name the methylation table");
  check_field_ranges(*this);  // the selection's and augmentation's fields too
  if (val_fraction + test_fraction >= 0.8) throw ConfigError("val_fraction", "and {test_fraction} must sum below 0.8");
  validate_selection(selection);
}

data::Splits MhcaTrainRun::splits() const {
  return {medical::make_dataset(cohort, train_rows, prep), medical::make_dataset(cohort, val_rows, prep),
          medical::make_dataset(cohort, test_rows, prep)};
}

nlohmann::json MhcaTrainRun::network_options(const std::string& model, const nlohmann::json& user_options) const {
  return tasks::network_options(model, user_options, cohort.volume_shape(), static_cast<int64_t>(cpgs.size()));
}

medical::Augmentation MhcaTrainRun::augmentation(const medical::Augmentation& settings) const {
  medical::Augmentation a = settings;
  a.cpg_std = medical::cpg_std(cohort, train_rows, prep);
  return a;
}

nlohmann::json MhcaTrainRun::fit_xgboost(const medical::XGBoostParams& params, const std::string& dir) const {
  std::vector<int64_t> fit_rows = train_rows;
  fit_rows.insert(fit_rows.end(), val_rows.begin(), val_rows.end());  // no early stopping: validation rows train too
  const auto classifier = tasks::fit_xgboost(cohort, fit_rows, prep, params);
  write_file_atomic(dir + "/xgboost.json", classifier.save());
  // A cohort too small for a test split (2 subjects) is fitted, as a network's is, and scored on nothing.
  if (test_rows.empty()) return {{"features", cpgs.size()}};
  const auto tx = medical::methylation_matrix(cohort, test_rows, prep);
  const auto metrics = tasks::binary_metrics(
      classifier.predict_proba(tx.data(), static_cast<int64_t>(test_rows.size()), static_cast<int64_t>(cpgs.size())),
      cohort.labels_of(test_rows));
  return {{"test", metrics}, {"features", cpgs.size()}};
}

namespace {

class BinaryMetric : public train::MetricAccumulator {
 public:
  void add(const at::Tensor& logits, const at::Tensor& target) override {
    accuracy_.add(logits, target);
    const auto p = torch::softmax(logits.detach().to(torch::kCPU, torch::kDouble), -1).select(-1, 1).contiguous();
    const auto t = target.to(torch::kCPU, torch::kLong).contiguous();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.data_ptr<int64_t>()[i] == train::kIgnoreIndex) continue;
      probabilities_.push_back(p.data_ptr<double>()[i]);
      labels_.push_back(t.data_ptr<int64_t>()[i]);
    }
  }
  nlohmann::json result() const override {
    nlohmann::json j = accuracy_.result();
    if (labels_.empty()) return j;
    const nlohmann::json binary = tasks::binary_metrics(probabilities_, labels_);
    for (const auto& item : binary.items())
      if (item.key() != "accuracy") j[item.key()] = item.value();
    return j;
  }
  std::vector<double> totals() const override {
    throw std::logic_error("mhca binary metrics need every score: evaluate in one process");
  }
  void load_totals(const std::vector<double>&) override {
    throw std::logic_error("mhca binary metrics need every score: evaluate in one process");
  }

 private:
  train::AccuracyMetric accuracy_;
  std::vector<double> probabilities_;
  std::vector<int64_t> labels_;
};

}  // namespace

train::MetricFactory binary_metric_factory() {
  return [] { return std::make_unique<BinaryMetric>(); };
}

MhcaTrainRun prepare_mhca_train(MhcaTrainData& d, bool volumes, uint64_t seed) {
  MhcaTrainRun run;
  run.cohort = medical::load_cohort(d.manifest, d.methylation, volumes, at::get_num_threads(), false, {}, d.max_missing,
                                    d.reorient);
  // A stratified test part, then a stratified validation part of the rest.
  std::vector<int64_t> all(run.cohort.labels.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  auto [rest, test_rows] = data::stratified_split(all, run.cohort.labels, d.test_fraction, seed);
  const double val_share = d.val_fraction / std::max(1e-9, 1.0 - d.test_fraction);
  auto [train_rows, val_rows] = data::stratified_split(rest, run.cohort.labels, val_share, seed + 1);
  run.train_rows = train_rows;
  run.val_rows = val_rows;
  run.test_rows = test_rows;
  std::vector<int64_t> fit_rows = run.train_rows;
  fit_rows.insert(fit_rows.end(), run.val_rows.begin(), run.val_rows.end());
  tasks::FeatureSelection selection = d.selection;
  selection.xgboost.threads = at::get_num_threads();
  const int64_t n_features = tasks::rfe_target(selection, d.model_options, run.cohort.volume_shape());
  run.cpgs = tasks::select_features(run.cohort, fit_rows, selection, n_features, false);
  run.prep = medical::fit_preprocessing(run.cohort, run.train_rows, run.cpgs, d.normalisation);
  d.preprocessing = run.prep.to_json();
  d.test_subjects.clear();
  for (auto r : run.test_rows) d.test_subjects.push_back(run.cohort.subject_ids[static_cast<size_t>(r)]);
  d.fit_subjects.clear();
  for (auto r : fit_rows) d.fit_subjects.push_back(run.cohort.subject_ids[static_cast<size_t>(r)]);
  std::sort(d.fit_subjects.begin(), d.fit_subjects.end());
  d.orientation = volumes ? medical::orientation_code(run.cohort.geometry) : "";
  const auto& spacing = run.cohort.geometry.spacing;
  d.voxel_size = volumes ? std::vector<double>(spacing.begin(), spacing.end()) : std::vector<double>{};
  return run;
}

TrainTask mhca_train_task(std::shared_ptr<MhcaTrainSettings> s) {
  TrainTask task;
  task.command = kMhcaTrainCommand;
  task.description = "train one model (or XGBoost) on a cohort; writes a run folder";
  task.default_out = "runs/mhca";
  set_mhca_paper_defaults(task.defaults);
  task.model_options_from_data = true;
  task.batch_norm = false;
  task.data_parallel = false;
  task.prepare = [s](const GivenSetting& given, train::RunRequest& r, const std::string&) {
    MhcaTrainData d = s->data;
    // Gradient boosting trains by its --xgb-* settings: a network's training
    // and augmentation options typed with it were taken and ignored without a
    // word (a recipe's are its own business: it sets them for every model).
    if (!models::find_model(s->model).network) {
      const auto recipe_set =
          r.recipe.is_object() ? r.recipe.value("set", nlohmann::json::object()) : nlohmann::json::object();
      auto typed = [&](const std::string& key) { return given(key) && !recipe_set.contains(key); };
      auto refuse_network_option = [&](const Field& f, auto&) {
        if ((f.option == nullptr || *f.option != '\0') && typed(f.key))
          throw ConfigError(f.key, "trains a network; --model " + s->model + " trains by its --xgb-* options");
      };
      train::TrainConfig network_training;
      visit_fields(network_training, refuse_network_option);
      medical::Augmentation network_augmentation;
      visit_fields(network_augmentation, refuse_network_option);
      if (typed("model_options"))
        throw ConfigError("model_options", "are a network's; --model " + s->model + " takes its --xgb-* options");
    }
    if (!d.selection.list_path.empty()) d.selection.mode = "list";
    d.model_options = models::parse_model_options(s->model_options);
    d.validate();
    // Recorded absolute, so that --resume reads the same files from anywhere.
    for (std::string* path : {&d.manifest, &d.methylation, &d.selection.list_path})
      if (!path->empty()) *path = absolute_normal_path(*path);
    check_xgboost_is_built(d.selection, {s->model});
    r.model_name = s->model;
    // XGBoost's options are its --xgb-* settings; a network's, --model-options.
    r.model_options = models::find_model(s->model).network ? d.model_options : d.selection.xgboost.to_json();
    r.data = d.to_json();
  };
  task.set_setting = [s](const std::string& key, const std::string& value, const std::string& what) {
    if (key != "model") return set_field_from_text(s->data, key, value, what);
    s->model = value;
    return true;
  };
  task.inputs = [](const train::RunRequest& r) {
    const auto d = MhcaTrainData::from_json(r.data);
    auto inputs = cohort_input_paths(d.manifest, d.methylation);
    inputs.push_back({"cpg_list", d.selection.list_path});
    return inputs;
  };
  task.load = [](train::RunRequest& r, const LoadContext&) {
    auto d = MhcaTrainData::from_json(r.data);
    const MhcaTrainData recorded = d;  // a resumed run's split and preprocessing; empty for a new run
    const bool xgboost = !models::find_model(r.model_name).network;
    auto prepared = std::make_shared<MhcaTrainRun>(prepare_mhca_train(d, !xgboost, r.seed));
    // A resumed run goes on with the subjects and CpG sites it began with: a
    // cohort file changed since would split it anew, putting test subjects
    // into training under the same weights.
    if (!recorded.fit_subjects.empty() &&
        (recorded.test_subjects != d.test_subjects || recorded.fit_subjects != d.fit_subjects ||
         recorded.preprocessing != d.preprocessing))
      throw DataError(d.manifest + ", " + d.methylation +
                      ": the cohort is not the one this run began with (its split, CpG sites or normalisation "
                      "differ); resume with the same files, or train a new run");
    r.data = d.to_json();
    TaskRun run;
    if (xgboost) {
      medical::XGBoostParams params = d.selection.xgboost;
      params.threads = at::get_num_threads();
      run.fit = [prepared, params](const std::string& dir) { return prepared->fit_xgboost(params, dir); };
      return run;
    }
    r.model_options = prepared->network_options(r.model_name, d.model_options);
    run.splits = prepared->splits();
    auto training = medical::augmented_training(run.splits.train, prepared->augmentation(d.augmentation), r.seed);
    run.splits.train = training.train;
    run.hooks.augment = training.augment;
    run.hooks.final_metrics = binary_metric_factory();
    return run;
  };
  return task;
}

}  // namespace qkv::tasks
