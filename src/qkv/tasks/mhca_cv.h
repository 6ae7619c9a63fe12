#pragma once
// The paper's evaluation protocol: repeated stratified k-fold cross
// validation on one cohort, every model on the same folds. In each fold a
// validation split is carved from the training part for early stopping and
// model selection; feature selection (XGBoost RFE) and all preprocessing are
// fitted on the training part only, so nothing is learnt from the test fold.
// Each run's test predictions cover every subject once; a run's accuracy,
// AUROC, sensitivity and specificity come from those pooled predictions, and
// the table reports mean +- std over runs (per-fold numbers are kept too).
#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/data/dataset.h"
#include "qkv/learners/xgboost.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/models/model.h"
#include "qkv/train/cv_report.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// The models `cv` knows: the registry's models of the mhca task, its
// networks and the XGBoost baseline on the selected CpG sites.
const std::vector<std::string>& cv_model_names();

// The models of `mhca cv --model`: names of cv_model_names(), or "paper"
// (CVOptions' default four) or "all"; ConfigError naming "model" otherwise.
std::vector<std::string> resolve_cv_models(const std::vector<std::string>& requested);

// What a model of cv_model_names() reads, from the registry's inputs
// ("spect", "methylation").
bool model_reads_volumes(const std::string& model);
bool model_reads_methylation(const std::string& model);

// Where the CpG features come from: "rfe" (XGBoost RFE inside each training
// fold), "all" (every column of the table), or "list" (a fixed list from a
// file, e.g. written by `qkv mhca select`).
struct FeatureSelection {
  std::string mode = "rfe";
  std::string list_path;
  int64_t n_features = 0;  // RFE target; 0 = the SPECT token count (441 at 91x109x91)
  medical::RFEParams rfe;
  medical::XGBoostParams xgboost;
};

// The defaults: the paper's 200 epochs, batch 16, Adam 3e-5; our choices: the
// best validation loss picks the weights, 20 epochs without improvement stop,
// and TrainConfig's cosine schedule and weight decay 1e-4 stay (the authors'
// code: constant, 5e-3; --recipe mhca-code, docs/reproduction.md).
void set_mhca_paper_defaults(train::TrainConfig& c);

struct CVOptions {
  std::vector<std::string> models{"mhca", "concatnet", "spectnet", "xgboost"};
  int64_t runs = 3, folds = 5;
  double val_fraction = 0.2;
  FeatureSelection selection;
  std::string normalisation = "global";
  medical::Augmentation augmentation;
  train::TrainConfig train;  // epochs, batch, optimiser, patience (set_mhca_paper_defaults); seed = options seed
  nlohmann::json model_options = nlohmann::json::object();  // sizes shared by the networks (channels, padding, ...)
  uint64_t seed = 0;
  bool quiet = false;
  nlohmann::json recipe;       // what the recipe set (tasks/recipes.h apply_recipe), or null
  models::ModelLimits limits;  // --max-params, for every network of every fold; not recorded

  CVOptions() { set_mhca_paper_defaults(train); }
};

// `mhca cv`'s own settings (feature selection, augmentation and training
// have their lists beside their structs).
template <typename V>
void visit_cv_fields(CVOptions& cv, V&& visit) {
  visit(Field{"runs", "repetitions of the k-fold split (paper: 3)"}.range(1, 1000), cv.runs);
  visit(Field{"folds", "folds per run (paper: 5)"}.range(2, 1000), cv.folds);
  visit(Field{"val_fraction", "share of each training part held out for early stopping and model selection"}
            .above(0)
            .below(0.5),
        cv.val_fraction);
  visit(Field{"normalisation", "volume intensities: global (min-max over training volumes, paper) or subject"}.one_of(
            "global|subject"),
        cv.normalisation);
}

// The model options a network gets on this cohort: the volume shape from the
// data, the feature count from the selection, then the user's options.
nlohmann::json network_options(const std::string& model, const nlohmann::json& user_options,
                               const std::vector<int64_t>& volume_shape, int64_t features);

// The SPECT token count for the volume shape under the user's encoder options.
int64_t spect_tokens(const nlohmann::json& user_options, const std::vector<int64_t>& volume_shape);

// The paper's CpG count: as many as the SPECT tokens at 91x109x91 (7x9x7).
inline constexpr int64_t kPaperCpgSites = 441;

// The CpG sites RFE keeps: selection.n_features where set, else (0) the SPECT
// token count at `volume_shape` (the volumes read for a network), else (no
// volumes read) the paper's count.
int64_t rfe_target(const FeatureSelection& selection, const nlohmann::json& user_options,
                   const std::vector<int64_t>& volume_shape);

// The CpG ids of one training part: RFE on its rows, the whole table, or the list.
std::vector<std::string> select_features(const medical::CohortData& cohort, const std::vector<int64_t>& rows,
                                         const FeatureSelection& selection, int64_t n_features, bool quiet);

// XGBoost threads for a rows x cols problem: `requested`, but 1 below a few
// million cells, where OpenMP's per-level barriers cost more than they save
// and, on a loaded machine, stall on descheduled threads (40 x 300 RFE: 0.5 s
// on one thread, 28 s on two next to a compile).
int64_t xgboost_threads(int64_t rows, int64_t cols, int64_t requested);

// XGBoost fitted on the rows' selected CpG sites (threads as xgboost_threads says).
medical::XGBoostClassifier fit_xgboost(const medical::CohortData& cohort, const std::vector<int64_t>& rows,
                                       const medical::Preprocessing& prep, medical::XGBoostParams params);

// P(class 1) for every sample of the data set, in eval mode.
std::vector<double> predict_probabilities(models::Model& model, const data::Dataset& dataset, int64_t batch_size,
                                          const c10::Device& device);

// What the cohort decides of settings already validated (prepare_cv_options,
// tasks/mhca_commands.h), before anything is written: every class can fill
// --folds folds, the volumes each model reads are there, and each network is
// sized (on paper: no allocation), within options.limits, for the CpG count
// its folds will see. Returns that count: RFE's target, the table's every
// site (all) or the list's (list).
int64_t check_cv_options(const medical::CohortData& cohort, const CVOptions& options);

// What a cross validation gives its caller: summary.json's content (the
// settings, each model's metrics, the warnings) and each model's pooled ROC
// curve, as report.html draws them (train/cv_report.h); after Ctrl-C,
// `interrupted` and nothing else.
struct CVResult {
  nlohmann::json summary;
  train::NamedRocCurves curves;
  bool interrupted = false;
};

// Runs the protocol into out_dir (summary.json, predictions.csv, report.html,
// folds/run<r>_fold<k>/...; a train::CVFolder), after check_cv_options, whose
// CpG count it takes as `n_features`. Folds already finished there (a
// previous, interrupted call with the same options) are read back, not
// recomputed. Each fold's seeds are train::fold_seeds'.
CVResult run_cross_validation(const medical::CohortData& cohort, const CVOptions& options, int64_t n_features,
                              const std::string& out_dir, const c10::Device& device);

// Accuracy, AUROC (from probabilities), sensitivity, specificity at 0.5.
// AUROC is null with a "note" when the labels hold one class.
nlohmann::json binary_metrics(const std::vector<double>& probabilities, const std::vector<int64_t>& labels);

}  // namespace qkv::tasks
