#include "qkv/tasks/mhca_cv.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "qkv/core/atomic_file.h"
#include "qkv/core/csv.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/data/folds.h"
#include "qkv/models/mhca.h"
#include "qkv/models/options.h"
#include "qkv/train/binary_metrics.h"
#include "qkv/train/cv_folder.h"
#include "qkv/train/cv_report.h"
#include "qkv/train/progress.h"
#include "qkv/train/result_warnings.h"
#include "qkv/train/run.h"

namespace qkv::tasks {
namespace fs = std::filesystem;

const std::vector<std::string>& cv_model_names() {
  static const std::vector<std::string> names = models::models_for_task("mhca");
  return names;
}

namespace {

bool is_network(const std::string& model) { return models::find_model(model).network; }

bool entry_has_option(const models::ModelEntry& entry, const std::string& key) {
  return std::any_of(entry.options.begin(), entry.options.end(),
                     [&](const models::ModelOption& o) { return o.key == key; });
}

nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

// "4.2 s" under a minute, else "1:02:03".
std::string short_duration(double seconds) {
  if (seconds >= 59.95) return train::format_duration(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  return buf;
}

// The rest of a CV's time: per model, the mean seconds of the folds this call
// trained (folds read back from an earlier call do not count) times the folds
// it still has to train. Models differ by orders of magnitude (XGBoost takes
// seconds where a network takes hours), hence one rate each.
class CVClock {
 public:
  void pending(const std::string& model) { ++models_[model].left; }
  void trained(const std::string& model, double seconds) {
    auto& m = models_[model];
    m.seconds += seconds;
    ++m.timed;
    --m.left;
  }
  // "ETA 1:02:03"; "ETA > 1:02:03" while a model with folds left has none
  // timed yet; empty when nothing is left.
  std::string eta() const {
    double seconds = 0;
    bool left = false, bound = false;
    for (const auto& [name, m] : models_) {
      if (m.left <= 0) continue;
      left = true;
      if (m.timed == 0)
        bound = true;
      else
        seconds += m.seconds / static_cast<double>(m.timed) * static_cast<double>(m.left);
    }
    if (!left) return "";
    return std::string(bound ? "ETA > " : "ETA ") + train::format_duration(seconds);
  }

 private:
  struct PerModel {
    double seconds = 0;
    int64_t timed = 0, left = 0;
  };
  std::map<std::string, PerModel> models_;
};

}  // namespace

bool model_reads_volumes(const std::string& model) { return models::find_model(model).reads("spect"); }

bool model_reads_methylation(const std::string& model) { return models::find_model(model).reads("methylation"); }

int64_t spect_tokens(const nlohmann::json& user_options, const std::vector<int64_t>& volume_shape) {
  models::SpectEncoderOptions spect;
  spect.volume_shape = volume_shape;
  nlohmann::json j = nlohmann::json::object();
  for (const char* key : {"channels", "padding"})
    if (user_options.contains(key)) j[key] = user_options.at(key);
  j["volume_shape"] = volume_shape;
  spect = models::read_model_options("spect encoder", j, spect);
  spect.check("spect encoder");
  return spect.tokens();
}

int64_t rfe_target(const FeatureSelection& selection, const nlohmann::json& user_options,
                   const std::vector<int64_t>& volume_shape) {
  if (selection.n_features > 0) return selection.n_features;
  return volume_shape.empty() ? kPaperCpgSites : spect_tokens(user_options, volume_shape);
}

nlohmann::json network_options(const std::string& model, const nlohmann::json& user_options,
                               const std::vector<int64_t>& volume_shape, int64_t features) {
  const auto& entry = models::find_model(model);
  nlohmann::json j = nlohmann::json::object();
  j["volume_shape"] = volume_shape;
  if (entry.reads("methylation")) j["features"] = features;
  for (const auto& item : user_options.items()) {
    // Options that only some networks have (the registry says which) are
    // passed to those only, so one --model-options serves a whole
    // comparison; a key no MHCA network has goes through, to be refused.
    if (!entry_has_option(entry, item.key())) {
      bool anyone = false;
      for (const auto& name : models::models_for_task("mhca"))
        anyone = anyone || (is_network(name) && entry_has_option(models::find_model(name), item.key()));
      if (anyone) continue;
    }
    j[item.key()] = item.value();
  }
  return j;
}

int64_t xgboost_threads(int64_t rows, int64_t cols, int64_t requested) {
  return rows * cols < 4'000'000 ? 1 : requested;
}

std::vector<std::string> select_features(const medical::CohortData& cohort, const std::vector<int64_t>& rows,
                                         const FeatureSelection& selection, int64_t n_features, bool quiet) {
  const auto& table = cohort.methylation;
  if (selection.mode == "all") return table.cpg_ids;
  if (selection.mode == "list") return medical::read_cpg_list(selection.list_path);
  if (selection.mode != "rfe") throw ConfigError("select", "must be rfe, all or list (got '" + selection.mode + "')");
  if (n_features > table.cols()) {
    // Not given: say where the number came from (rfe_target), not as if typed.
    const std::string target = selection.n_features > 0
                                   ? std::to_string(n_features)
                                   : "not given, so RFE's target is " + std::to_string(n_features) +
                                         " (the SPECT token count, or the paper's " + std::to_string(kPaperCpgSites) +
                                         " where no network reads the volumes), which";
    throw ConfigError("n_features", target + " exceeds the " + std::to_string(table.cols()) + " CpG sites of " +
                                        table.path + (selection.n_features > 0 ? "" : "; give {n_features}"));
  }
  medical::Preprocessing all;
  all.cpg_ids = table.cpg_ids;
  all.cpg_means = medical::column_means(table, rows);
  const auto x = medical::methylation_matrix(cohort, rows, all);
  const auto labels = cohort.labels_of(rows);
  medical::RFEParams rfe = selection.rfe;
  rfe.n_features_to_select = n_features;
  medical::XGBoostParams xgb = selection.xgboost;
  xgb.threads = xgboost_threads(static_cast<int64_t>(rows.size()), table.cols(), xgb.threads);
  // One step per elimination round (one XGBoost fit), on a terminal only.
  train::ProgressBar bar("RFE", medical::rfe_rounds(table.cols(), rfe),
                         !quiet && train::ProgressBar::stderr_is_terminal());
  auto progress = [&](int64_t round, int64_t remaining) {
    if (interrupt_requested())
      throw Interrupted("interrupted during feature selection; finished folds are kept: add {resume} to continue");
    bar.update(round, std::to_string(remaining) + " features left");
  };
  auto result = medical::recursive_feature_elimination(x.data(), static_cast<int64_t>(rows.size()), table.cols(),
                                                       labels, xgb, rfe, progress);
  bar.clear();
  std::vector<std::string> ids;
  for (auto c : result.selected) ids.push_back(table.cpg_ids[c]);
  return ids;
}

medical::XGBoostClassifier fit_xgboost(const medical::CohortData& cohort, const std::vector<int64_t>& rows,
                                       const medical::Preprocessing& prep, medical::XGBoostParams params) {
  const auto features = static_cast<int64_t>(prep.cpg_ids.size()), n = static_cast<int64_t>(rows.size());
  params.threads = xgboost_threads(n, features, params.threads);
  medical::XGBoostClassifier classifier(params);
  const auto x = medical::methylation_matrix(cohort, rows, prep);
  classifier.fit(x.data(), n, features, cohort.labels_of(rows));
  return classifier;
}

std::vector<double> predict_probabilities(models::Model& model, const data::Dataset& dataset, int64_t batch_size,
                                          const c10::Device& device) {
  torch::NoGradGuard no_grad;
  model.eval();
  model.to(device);
  std::vector<double> p;
  for (int64_t begin = 0; begin < dataset.size(); begin += batch_size) {
    std::vector<int64_t> idx;
    for (int64_t i = begin; i < std::min(dataset.size(), begin + batch_size); ++i) idx.push_back(i);
    auto log_probs = model.forward(dataset.get(idx).to(device));
    auto probs = torch::softmax(log_probs, -1).select(1, 1).to(torch::kCPU, torch::kDouble).contiguous();
    p.insert(p.end(), probs.data_ptr<double>(), probs.data_ptr<double>() + probs.numel());
  }
  return p;
}

nlohmann::json binary_metrics(const std::vector<double>& probabilities, const std::vector<int64_t>& labels) {
  const auto counts = train::count_at_threshold(probabilities, labels, 0.5);
  nlohmann::json j = {{"n", labels.size()},
                      {"accuracy", number_or_null(counts.accuracy())},
                      {"sensitivity", number_or_null(counts.sensitivity())},
                      {"specificity", number_or_null(counts.specificity())},
                      {"tp", counts.tp},
                      {"fp", counts.fp},
                      {"tn", counts.tn},
                      {"fn", counts.fn}};
  try {
    j["auroc"] = train::auroc(probabilities, labels);
    j["auroc_hard"] = train::auroc_of_labels(probabilities, labels, 0.5);
  } catch (const DataError& e) {
    j["auroc"] = j["auroc_hard"] = nullptr;
    j["note"] = e.what();
  }
  return j;
}

namespace {

// The metrics summary.json gives mean and std of, per model.
constexpr const char* kSummaryMetrics[] = {"accuracy", "auroc", "auroc_hard", "sensitivity", "specificity"};

// The MHCA paper's aggregation (its authors' train_ppmi.py): each fold scored
// alone, the folds of a run averaged, then mean and population std (np.std)
// over the runs' averages.
nlohmann::json fold_mean_metrics(const nlohmann::json& per_fold, int64_t runs) {
  nlohmann::json out = {{"how", "fold metrics averaged per run; mean and population std over runs (the paper's)"}};
  for (const char* key : kSummaryMetrics) {
    std::vector<double> run_means;
    for (int64_t r = 1; r <= runs; ++r) {
      std::vector<double> folds;
      for (const auto& f : per_fold)
        if (f.value("run", int64_t{0}) == r)
          folds.push_back(f.contains(key) && f.at(key).is_number() ? f.at(key).get<double>() : NAN);
      run_means.push_back(train::mean_std(folds).mean);
    }
    const auto ms = train::mean_std(run_means, /*population=*/true);
    out[key] = {{"mean", number_or_null(ms.mean)}, {"std", number_or_null(ms.std)}, {"n", ms.n}};
  }
  return out;
}

struct FoldPredictions {
  std::vector<double> probabilities;  // test rows' P(PD)
  nlohmann::json info;                // parameters, seconds per epoch, selected epoch, ...
};

// The cohort's files as a record names them: absolute, so that the record
// is read from anywhere.
nlohmann::json cohort_files_record(const medical::CohortData& cohort) {
  return {{"manifest", absolute_normal_path(cohort.manifest_path)},
          {"methylation", absolute_normal_path(cohort.methylation_path)}};
}

// What a fold's run records of its data: the cohort's files, the fold and
// the preprocessing fitted on its training part.
nlohmann::json fold_record(const medical::CohortData& cohort, const data::CVFold& fold,
                           const medical::Preprocessing& prep) {
  auto record = cohort_files_record(cohort);
  record["run"] = fold.run + 1;
  record["fold"] = fold.fold + 1;
  record["preprocessing"] = prep.to_json();
  return record;
}

FoldPredictions train_network_fold(const medical::CohortData& cohort, const data::CVFold& fold,
                                   const std::string& model_name, const medical::Preprocessing& prep,
                                   const CVOptions& options, const std::string& dir, const c10::Device& device) {
  auto train_set = medical::make_dataset(cohort, fold.train, prep);
  auto val_set = medical::make_dataset(cohort, fold.val, prep);
  auto test_set = medical::make_dataset(cohort, fold.test, prep);
  data::Splits splits{train_set, val_set, test_set};
  const auto model_options = network_options(model_name, options.model_options, cohort.volume_shape(),
                                             static_cast<int64_t>(prep.cpg_ids.size()));
  train::RunRequest request;
  request.command = "mhca cv";
  request.model_name = model_name;
  request.model_options = model_options;
  request.data = fold_record(cohort, fold, prep);
  request.train = options.train;
  request.seed = train::fold_seeds(options.seed, fold, options.folds).network;
  request.device = device.str();
  request.limits = options.limits;
  const train::TrainConfig config = train::effective_train_config(request);
  torch::manual_seed(request.seed);  // the initial weights depend on the fold, not on what ran before

  train::TrainHooks hooks;
  medical::Augmentation augmentation = options.augmentation;
  augmentation.cpg_std = medical::cpg_std(cohort, fold.train, prep);
  auto training = medical::augmented_training(splits.train, augmentation, request.seed);
  splits.train = training.train;
  hooks.augment = training.augment;
  hooks.quiet = options.quiet;  // the trainer's line per epoch, under run_cross_validation's fold line
  hooks.resume_hint = false;    // a fold resumes with the cv command's --resume, which says so itself
  hooks.live_progress = !options.quiet && train::ProgressBar::stderr_is_terminal();
  hooks.title = "qkv mhca cv: " + model_name + " " + train::fold_name(fold);
  models::ModelPtr model;
  auto result = train::execute_run(request, dir, false, splits, hooks, &model);
  if (result.interrupted) return {};
  FoldPredictions out;
  out.probabilities = predict_probabilities(*model, *test_set, std::max<int64_t>(1, config.batch_size), device);
  const auto& s = result.summary;
  const double epochs = s.value("epochs", 1.0);
  out.info = {{"parameters", models::count_parameters(*model)},
              {"epochs", s.value("epochs", 0)},
              {"selected_epoch", s.value("selected_epoch", 0)},
              {"seconds_per_epoch", s.value("train_seconds", 0.0) / std::max(1.0, epochs)}};
  remove_own_file(train::RunPaths{dir}.last_checkpoint());  // best.ckpt is what explain and predict need
  return out;
}

FoldPredictions train_xgboost_fold(const medical::CohortData& cohort, const data::CVFold& fold,
                                   const medical::Preprocessing& prep, const CVOptions& options,
                                   const std::string& dir) {
  std::vector<int64_t> rows = fold.train;
  rows.insert(rows.end(), fold.val.begin(), fold.val.end());  // no early stopping: the validation rows train too
  medical::XGBoostParams params = options.selection.xgboost;
  params.seed = train::fold_seeds(options.seed, fold, options.folds).xgboost;
  const auto start = std::chrono::steady_clock::now();
  const auto classifier = fit_xgboost(cohort, rows, prep, params);
  const int64_t f = static_cast<int64_t>(prep.cpg_ids.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  make_directories(dir);
  write_file_atomic(dir + "/xgboost.json", classifier.save());
  // What `qkv mhca predict --checkpoint DIR/xgboost.json` reads next to the model.
  train::RunRequest request;
  request.command = "mhca cv";
  request.model_name = "xgboost";
  request.model_options = params.to_json();
  request.data = fold_record(cohort, fold, prep);
  request.seed = params.seed;
  write_file_atomic(train::RunPaths{dir}.config(), json_text(train::run_config(request)) + "\n");
  const auto test_x = medical::methylation_matrix(cohort, fold.test, prep);
  FoldPredictions out;
  out.probabilities = classifier.predict_proba(test_x.data(), static_cast<int64_t>(fold.test.size()), f);
  out.info = {{"parameters", nullptr}, {"fit_seconds", seconds}};
  return out;
}

}  // namespace

int64_t check_cv_options(const medical::CohortData& cohort, const CVOptions& options) {
  // The folds' refusals (a class smaller than --folds) before the folder is opened.
  data::repeated_stratified_folds(cohort.labels, options.runs, options.folds, options.val_fraction, options.seed);
  for (const auto& m : options.models)
    if (model_reads_volumes(m) && !cohort.volumes.defined()) throw ConfigError("model", m + " needs the SPECT volumes");
  // Volumes are read only where a network reads them.
  const int64_t n_features = rfe_target(options.selection, options.model_options, cohort.volume_shape());
  // Every network is sized for the CpG count its folds will see, so one that
  // cannot take this cohort (mhca needs as many CpG sites as SPECT tokens) is
  // refused before the first fold, not after the others have trained.
  const int64_t fold_features = options.selection.mode == "all" ? cohort.methylation.cols()
                                : options.selection.mode == "list"
                                    ? static_cast<int64_t>(medical::read_cpg_list(options.selection.list_path).size())
                                    : n_features;
  for (const auto& m : options.models)
    if (model_reads_volumes(m))
      models::find_model(m).check_parameter_limit(
          network_options(m, options.model_options, cohort.volume_shape(), fold_features), options.limits);
  return fold_features;
}

namespace {

// What a cross validation's folder is for: finished folds are reused only by
// a call with the same settings, the model list, folds and runs included, so
// that cv_settings.json describes every fold in the folder.
nlohmann::json cv_settings(const medical::CohortData& cohort, const CVOptions& options, int64_t n_features) {
  nlohmann::json settings = {{"models", options.models},
                             {"runs", options.runs},
                             {"folds", options.folds},
                             {"val_fraction", options.val_fraction},
                             {"selection", options.selection.mode},
                             {"n_features", n_features},
                             {"rfe_step", options.selection.rfe.step},
                             {"xgboost", options.selection.xgboost.to_json()},
                             {"normalisation", options.normalisation},
                             {"augmentation",
                              {{"fraction", options.augmentation.fraction},
                               {"max_degrees", options.augmentation.max_degrees},
                               {"noise", options.augmentation.noise},
                               {"mode", options.augmentation.mode}}},
                             {"train", options.train.to_json()},
                             {"model_options", options.model_options},
                             {"volume_shape", cohort.volume_shape()},
                             {"seed", options.seed},
                             {"recipe", options.recipe},
                             {"cohort", cohort_files_record(cohort)}};
  settings["cohort"]["subjects"] = cohort.size();
  // What the files held: a folder's finished folds are of these subjects,
  // labels and values, so a cohort changed since is refused, not mixed in.
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", medical::cohort_data_crc32(cohort));
  settings["cohort"]["data_crc32"] = crc;
  // Recorded only when set, so that folders of earlier versions still resume.
  if (cohort.reoriented) settings["cohort"]["reorient"] = true;
  return settings;
}

using RunProbabilities = std::map<std::string, std::vector<std::vector<double>>>;  // model -> run -> per subject

// summary.json's content (without its settings) from every fold's test
// predictions, and each model's pooled ROC curve where AUROC is defined.
nlohmann::json summarise_cv(const medical::CohortData& cohort, const CVOptions& options,
                            const RunProbabilities& run_probs, const std::map<std::string, nlohmann::json>& per_fold,
                            const std::map<std::string, nlohmann::json>& model_info, train::NamedRocCurves& curves) {
  nlohmann::json summary = {
      {"cohort", cohort.manifest_path}, {"subjects", cohort.size()}, {"runs", options.runs}, {"folds", options.folds}};
  int64_t pd = 0;
  for (auto l : cohort.labels) pd += l;
  summary["pd"] = pd;
  summary["controls"] = cohort.size() - pd;
  summary["match"] = cohort.match_summary;
  summary["models"] = nlohmann::json::object();
  summary["warnings"] = nlohmann::json::array();
  for (const auto& m : options.models) {
    std::map<std::string, std::vector<double>> values;
    nlohmann::json per_run = nlohmann::json::array();
    std::vector<double> pooled;
    std::vector<int64_t> pooled_labels;
    for (int64_t r = 0; r < options.runs; ++r) {
      const auto& p = run_probs.at(m)[r];
      auto metrics = binary_metrics(p, cohort.labels);
      metrics["run"] = r + 1;
      per_run.push_back(metrics);
      for (const char* key : kSummaryMetrics)
        values[key].push_back(metrics[key].is_null() ? NAN : metrics[key].get<double>());
      pooled.insert(pooled.end(), p.begin(), p.end());
      pooled_labels.insert(pooled_labels.end(), cohort.labels.begin(), cohort.labels.end());
    }
    nlohmann::json entry = {{"per_run", per_run}, {"per_fold", per_fold.at(m)}};
    // Pooled: each run's test predictions of all its folds scored together,
    // then mean and sample std (n - 1) over the runs.
    for (const auto& [key, v] : values) {
      const auto ms = train::mean_std(v);
      entry[key] = {{"mean", number_or_null(ms.mean)}, {"std", number_or_null(ms.std)}, {"n", ms.n}};
    }
    entry["fold_mean"] = fold_mean_metrics(per_fold.at(m), options.runs);
    entry["parameters"] = model_info.at(m).value("parameters", nlohmann::json(nullptr));
    double seconds = 0;
    int64_t counted = 0;
    for (const auto& f : per_fold.at(m))
      if (f.contains("seconds_per_epoch")) {
        seconds += f.at("seconds_per_epoch").get<double>();
        ++counted;
      }
    if (counted > 0) entry["seconds_per_epoch"] = seconds / static_cast<double>(counted);
    // Judged on every run's test predictions together, and fold by fold (a
    // network may put each fold's subjects all on one side, a different
    // side in each fold, which pooling hides).
    const auto pooled_metrics = binary_metrics(pooled, pooled_labels);
    for (const auto& w : train::degenerate_result_warnings(pooled_metrics)) summary["warnings"].push_back(m + ": " + w);
    int64_t degenerate_folds = 0;
    std::string first;
    for (const auto& f : per_fold.at(m)) {
      const auto w = train::degenerate_result_warnings(f, /*judge_auroc=*/false);
      if (w.empty()) continue;
      if (degenerate_folds++ == 0)
        first = "run " + std::to_string(f.value("run", 0)) + " fold " + std::to_string(f.value("fold", 0)) + " " + w[0];
    }
    if (degenerate_folds > 0)
      summary["warnings"].push_back(m + ": " + std::to_string(degenerate_folds) + " of " +
                                    std::to_string(per_fold.at(m).size()) + " folds are degenerate, e.g. " + first);
    summary["models"][m] = entry;
    // AUROC is null where it is undefined (one class), and so is the curve.
    if (pooled_metrics.at("auroc").is_number())
      curves.emplace_back(m, train::roc_curve(pooled, pooled_labels), pooled_metrics.at("auroc").get<double>());
  }
  return summary;
}

// "fold 3/15 (run 1, fold 3) mhca: test accuracy 0.812  AUROC 0.873  in 1:02:03; ETA 14:31:00"
std::string fold_result_line(const std::string& label, const std::string& model, const std::string& sizes,
                             const nlohmann::json& metrics, double seconds, const std::string& eta) {
  char auroc[16] = "n/a", result[96];
  if (!metrics["auroc"].is_null()) std::snprintf(auroc, sizeof auroc, "%.3f", metrics["auroc"].get<double>());
  std::snprintf(result, sizeof result, "test accuracy %.3f  AUROC %s  in %s", metrics.value("accuracy", 0.0), auroc,
                short_duration(seconds).c_str());
  std::string line = label + " " + model + ": " + (sizes.empty() ? "" : sizes + ", ") + result;
  return eta.empty() ? line : line + "; " + eta;
}

// `settings` where the folder's cv_settings.json, written by an earlier
// version for the same settings, spells something otherwise, so that it
// still continues: the cohort's files as typed (now absolute, so that a
// folder continues from anywhere), typed from the same place; and with
// --select all or list, RFE's target as the CpG count (now the count the
// folds use); and without the cohort's data CRC (not recorded then).
void keep_earlier_spellings(const std::string& out_dir, const medical::CohortData& cohort, const CVOptions& options,
                            nlohmann::json& settings) {
  const std::string stored_file = out_dir + "/cv_settings.json";
  if (!fs::exists(stored_file)) return;
  const auto stored = read_json_file(stored_file);
  auto& now = settings["cohort"];
  for (const char* key : {"manifest", "methylation"})
    if (stored.contains("cohort") && stored["cohort"].value(key, std::string()) != now[key] &&
        absolute_normal_path(stored["cohort"].value(key, std::string())) == now[key])
      now[key] = stored["cohort"][key];
  if (options.selection.mode != "rfe" &&
      stored.value("n_features", int64_t{-1}) ==
          rfe_target(options.selection, options.model_options, cohort.volume_shape()))
    settings["n_features"] = stored["n_features"];
  if (stored.contains("cohort") && !stored["cohort"].contains("data_crc32")) now.erase("data_crc32");  // not recorded
}

}  // namespace

CVResult run_cross_validation(const medical::CohortData& cohort, const CVOptions& options, int64_t n_features,
                              const std::string& out_dir, const c10::Device& device) {
  const auto folds =
      data::repeated_stratified_folds(cohort.labels, options.runs, options.folds, options.val_fraction, options.seed);
  make_directories(out_dir);
  const train::CVFolder folder(out_dir);
  auto settings = cv_settings(cohort, options, n_features);
  keep_earlier_spellings(out_dir, cohort, options, settings);
  folder.claim_settings(settings);
  RunProbabilities run_probs;
  std::map<std::string, nlohmann::json> per_fold;
  std::map<std::string, nlohmann::json> model_info;
  std::string predictions_csv = "run,fold,model,subject_id,label,p_pd\n";
  for (const auto& m : options.models) {
    run_probs[m].assign(static_cast<size_t>(options.runs), std::vector<double>(cohort.size(), NAN));
    per_fold[m] = nlohmann::json::array();
  }

  // The CpG sites a fold's training part selected, which every model of the fold reads.
  auto cpg_file = [&](const data::CVFold& fold) { return folder.fold_dir(fold) + "/selected_cpgs.txt"; };
  CVClock clock;
  const std::string kSelection = "feature selection";  // timed like a model: RFE takes a while at the paper's size
  int64_t done_before = 0;
  for (const auto& fold : folds) {
    if (!fs::exists(cpg_file(fold))) clock.pending(kSelection);
    for (const auto& m : options.models) {
      if (folder.is_finished(fold, m))
        ++done_before;
      else
        clock.pending(m);
    }
  }
  if (!options.quiet && done_before > 0)
    say_as_is("mhca cv: " + std::to_string(done_before) + " of " +
              std::to_string(folds.size() * options.models.size()) + " model folds already done in " + out_dir +
              "; continuing");

  for (size_t fold_index = 0; fold_index < folds.size(); ++fold_index) {
    const auto& fold = folds[fold_index];
    const std::string dir = folder.fold_dir(fold);
    // "fold 3/15 (run 1, fold 3)"
    const std::string label = "fold " + std::to_string(fold_index + 1) + "/" + std::to_string(folds.size()) + " (run " +
                              std::to_string(fold.run + 1) + ", fold " + std::to_string(fold.fold + 1) + ")";
    make_directories(dir);
    std::vector<int64_t> fit_rows = fold.train;
    fit_rows.insert(fit_rows.end(), fold.val.begin(), fold.val.end());
    // Feature selection sees the fold's training part (train + val) only.
    std::vector<std::string> cpgs;
    if (fs::exists(cpg_file(fold))) {
      cpgs = medical::read_cpg_list(cpg_file(fold));
    } else {
      if (!options.quiet)
        say_as_is(label + ": selecting " + std::to_string(n_features) + " CpG sites (" + options.selection.mode +
                  ") on " + std::to_string(fit_rows.size()) + " training subjects");
      const auto start = std::chrono::steady_clock::now();
      cpgs = select_features(cohort, fit_rows, options.selection, n_features, options.quiet);
      clock.trained(kSelection, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      medical::write_cpg_list(cpg_file(fold), cpgs,
                              "CpG sites selected on " + train::fold_name(fold) + "'s training part");
    }
    const auto prep = medical::fit_preprocessing(cohort, fold.train, cpgs, options.normalisation);
    for (const auto& m : options.models) {
      const std::string model_dir = folder.model_dir(fold, m);
      const bool network = is_network(m);
      // XGBoost trains on train + val (no early stopping) and gets one line, once it is fitted.
      char sizes[96];
      if (!network)
        std::snprintf(sizes, sizeof sizes, "%zu train / %zu test", fold.train.size() + fold.val.size(),
                      fold.test.size());
      else
        std::snprintf(sizes, sizeof sizes, "%zu train / %zu val / %zu test", fold.train.size(), fold.val.size(),
                      fold.test.size());
      FoldPredictions fp;
      double seconds = -1;  // -1: read back from a previous call, nothing to print
      if (const auto record = folder.finished(fold, m)) {
        fp.probabilities = record->at("probabilities").get<std::vector<double>>();
        fp.info = record->at("info");
      } else {
        if (!options.quiet && network) say_as_is(label + " " + m + ": " + sizes);
        const auto start = std::chrono::steady_clock::now();
        fp = network ? train_network_fold(cohort, fold, m, prep, options, model_dir, device)
                     : train_xgboost_fold(cohort, fold, prep, options, model_dir);
        if (fp.probabilities.empty() || interrupt_requested()) return CVResult{{}, {}, true};
        folder.record_finished(fold, m, {{"probabilities", fp.probabilities}, {"info", fp.info}});
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        clock.trained(m, seconds);
      }
      auto metrics = binary_metrics(fp.probabilities, cohort.labels_of(fold.test));
      if (!options.quiet && seconds >= 0)
        say_as_is(fold_result_line(label, m, network ? "" : sizes, metrics, seconds, clock.eta()));
      for (size_t i = 0; i < fold.test.size(); ++i) {
        const int64_t r = fold.test[i];
        run_probs[m][fold.run][r] = fp.probabilities.at(i);
        char line[64];
        std::snprintf(line, sizeof line, "%.9g", fp.probabilities[i]);
        predictions_csv += std::to_string(fold.run + 1) + "," + std::to_string(fold.fold + 1) + "," + m + "," +
                           csv_field(cohort.subject_ids[r]) + "," + std::to_string(cohort.labels[r]) + "," + line +
                           "\n";
      }
      metrics["run"] = fold.run + 1;
      metrics["fold"] = fold.fold + 1;
      metrics["features"] = cpgs.size();
      metrics.update(fp.info);
      per_fold[m].push_back(metrics);
      model_info[m] = fp.info;
    }
  }

  CVResult result;
  result.summary = summarise_cv(cohort, options, run_probs, per_fold, model_info, result.curves);
  result.summary["settings"] = settings;
  write_file_atomic(out_dir + "/predictions.csv", predictions_csv);
  write_file_atomic(out_dir + "/summary.json", json_text(result.summary) + "\n");
  write_file_atomic(out_dir + "/report.html", train::cv_report_html(result.summary, result.curves));
  return result;
}

std::vector<std::string> resolve_cv_models(const std::vector<std::string>& requested) {
  std::vector<std::string> models;
  for (const auto& m : requested) {
    if (m == "all" || m == "paper") return m == "all" ? cv_model_names() : CVOptions{}.models;
    // Each model once: a repeat would train and count its folds twice.
    if (std::find(models.begin(), models.end(), m) != models.end()) throw ConfigError("model", m + " is named twice");
    models.push_back(m);
  }
  const auto& known = cv_model_names();
  for (const auto& m : models)
    if (std::find(known.begin(), known.end(), m) == known.end())
      throw ConfigError("model", m + ": not one of " + join(known) + ", paper, all");
  return models;
}

}  // namespace qkv::tasks
