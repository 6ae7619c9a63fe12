#pragma once
// The MHCA task: classifying Parkinson's disease from a SPECT volume and
// DNA-methylation features. Its settings (feature selection, augmentation,
// the held-out parts of `mhca train`), as config.json records them, and one
// training run on a cohort: load, split, select, preprocess, then the
// network's data sets or an XGBoost fit. `qkv mhca` is its CLI; cross
// validation (each fold a run) is mhca/cross_validation.h.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/tasks/mhca_cv.h"
#include "qkv/tasks/train_task.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// The field lists of the MHCA settings (found by argument-dependent lookup,
// so they live in the structs' namespace; XGBoost's is in learners/xgboost.h).
template <typename V>
void visit_fields(FeatureSelection& s, V&& visit) {
  visit(Field{"select", "CpG features: rfe (XGBoost RFE on each training part), all (every column), list (--cpg-list)"}
            .one_of("rfe|all|list"),
        s.mode);
  visit(Field{"cpg_list",
              "fixed CpG list (one id per line, e.g. from 'qkv mhca select'); selecting on the whole cohort before "
              "cross validation lets the test folds leak into the features"}
            .existing_file(),
        s.list_path);
  visit(Field{"n_features", "CpG sites RFE keeps; 0 = the SPECT token count (441 at 91x109x91)"}.range(0, 10000000),
        s.n_features);
  visit(Field{"rfe_step", "RFE: share of the features removed per round (< 1) or a count (>= 1)"}.range(1e-6, 10000000),
        s.rfe.step);
  visit_fields(s.xgboost, visit);
}

}  // namespace qkv::tasks

namespace qkv::tasks {

inline constexpr const char* kMhcaTrainCommand = "mhca train";
inline constexpr const char* kMhcaCvCommand = "mhca cv";

// ConfigError naming the key: a selection and augmentation within their
// fields' ranges and choices, and a list file for select = list.
void validate_selection(const tasks::FeatureSelection& s);
void validate_augmentation(const medical::Augmentation& a);

// In a build without XGBoost (runtime/build_parts.h), DataError for RFE
// selection or the XGBoost baseline among `models`: called before anything is
// read or written.
void check_xgboost_is_built(const tasks::FeatureSelection& s, const std::vector<std::string>& models);

// The files a command reads a cohort from, for check_outputs_apart: the
// manifest, the methylation table and every volume the manifest lists (an
// output folder holding one would be emptied by --overwrite before it is
// read). DataError for a manifest that cannot be read.
std::vector<InputPath> cohort_input_paths(const std::string& manifest, const std::string& methylation);

// config.json's "data" of `mhca train`.
// The help of --max-missing, shared by every command that reads a cohort.
inline constexpr const char* kMaxMissingHelp =
    "leave out subjects with a larger share of missing beta-values (1 = keep all; those with half or more missing "
    "are named either way)";

// The help of --reorient, likewise.
inline constexpr const char* kReorientHelp =
    "turn every SPECT volume to RAS+ (axes permuted and flipped as its affine says; no resampling) before the "
    "volumes' geometries are compared, so that scans stored in other axis orders are accepted the same way round";

struct MhcaTrainData {
  std::string manifest, methylation;
  double val_fraction = 0.15, test_fraction = 0.2;
  std::string normalisation = "global";
  double max_missing = 1.0;  // subjects with a larger share of missing beta-values are left out
  bool reorient = false;     // volumes turned to RAS+ as they are read (--reorient)
  tasks::FeatureSelection selection;
  medical::Augmentation augmentation;
  nlohmann::json model_options = nlohmann::json::object();  // the user's network sizes
  // Decided by the data: the preprocessing fitted on the training rows, the
  // held-out test subjects, and the subjects that trained or validated the
  // model (predict reports them apart).
  nlohmann::json preprocessing;
  std::vector<std::string> test_subjects;
  std::vector<std::string> fit_subjects;
  // The training volumes' orientation code ("RAS", "LPS"; orientation.h)
  // and voxel size in mm after --reorient, empty where no volume was read:
  // predict and explain refuse a cohort whose volumes point another way
  // (mirrored or turned) or have other voxels.
  std::string orientation;
  std::vector<double> voxel_size;

  nlohmann::json to_json() const { return fields_to_json(*this); }
  static MhcaTrainData from_json(const nlohmann::json& j) {
    return fields_from_json<MhcaTrainData>(j, "the run's data settings");
  }
  void validate() const;  // ConfigError naming the key
};

template <typename V>
void visit_fields(MhcaTrainData& d, V&& visit) {
  // Required of a new run (validate() says so); --resume takes them from the run.
  visit(Field{"manifest",
              "cohort CSV: subject_id,label,spect[,covariates] (spect: NIfTI path); required unless --resume"},
        d.manifest);
  visit(Field{"methylation",
              "DNA-methylation table (CSV/TSV): subject_id, then one beta-value column per CpG site; required unless "
              "--resume"},
        d.methylation);
  visit(Field{"val_fraction",
              "share of subjects for early stopping and model selection (with --test-fraction 0.2: a 65/15/20 split; "
              "our choice)"}
            .range(0, 0.8)
            .above(0),
        d.val_fraction);
  visit(Field{"test_fraction", "share of subjects held out for the final test"}.range(0, 0.8).above(0),
        d.test_fraction);
  visit(Field{"normalisation", "volume intensities: global (min-max over training volumes, paper) or subject"}.one_of(
            "global|subject"),
        d.normalisation);
  visit(Field{"max_missing", kMaxMissingHelp}.range(0, 1), d.max_missing);
  visit(Field{"reorient", kReorientHelp}, d.reorient);
  visit_fields(d.selection, visit);
  visit_fields(d.augmentation, visit);
  visit(Field{"model_options", "", ""}, d.model_options);  // --model-options, parsed
  visit(Field{"preprocessing", "", ""}, d.preprocessing);
  visit(Field{"test_subjects", "", ""}, d.test_subjects);
  visit(Field{"fit_subjects", "", ""}, d.fit_subjects);
  visit(Field{"orientation", "", ""}, d.orientation);
  visit(Field{"voxel_size", "", ""}, d.voxel_size);
}

// One `mhca train` run's data, made from the settings: the cohort, a
// stratified test part and a stratified validation part of the rest, the CpG
// sites selected and the preprocessing fitted on the training rows only.
struct MhcaTrainRun {
  medical::CohortData cohort;
  std::vector<int64_t> train_rows, val_rows, test_rows;
  std::vector<std::string> cpgs;
  medical::Preprocessing prep;

  data::Splits splits() const;
  // The network's options on this cohort: volume shape and feature count from
  // the data, then the user's sizes.
  nlohmann::json network_options(const std::string& model, const nlohmann::json& user_options) const;
  // The training batches' augmentation with each CpG's std on the training rows.
  medical::Augmentation augmentation(const medical::Augmentation& settings) const;
  // XGBoost on train + val rows, scored on the test rows: the summary.
  nlohmann::json fit_xgboost(const medical::XGBoostParams& params, const std::string& dir) const;
};

// The validation and test metrics of `mhca train`'s summary: accuracy and
// balanced accuracy, and, from P(PD), what `mhca cv` and `mhca predict`
// report (AUROC, AUROC of the labels, sensitivity, specificity, the counts).
// It needs every score, so evaluation must be single-process (mhca train is).
train::MetricFactory binary_metric_factory();

// Loads and prepares; records the preprocessing and test subjects in `data`.
MhcaTrainRun prepare_mhca_train(MhcaTrainData& data, bool volumes, uint64_t seed);

// `mhca train`: the cohort and its preprocessing, the model (one of
// cv_model_names()) and the networks' sizes as JSON.
struct MhcaTrainSettings {
  MhcaTrainData data;
  std::string model = "mhca";
  std::string model_options = "{}";
};

// `mhca train` on `settings`, which the front end fills before a run.
TrainTask mhca_train_task(std::shared_ptr<MhcaTrainSettings> settings);

}  // namespace qkv::tasks
