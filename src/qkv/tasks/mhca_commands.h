#pragma once
// The MHCA commands beside train and cv: `mhca synth` (the built-in
// cohort), `mhca predict` (P(PD) per subject), `mhca explain` (attention
// maps of a co-attention checkpoint) and `mhca select` (the CpG list of RFE
// on all subjects). Each checks its outputs before the work and writes them
// as core/output_policy.h allows.
#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/runtime/run_options.h"
#include "qkv/synth_cohort/synth_cohort.h"
#include "qkv/tasks/mhca_cv.h"
#include "qkv/tasks/mhca_explain.h"
#include "qkv/tasks/mhca_task.h"
#include "qkv/train/run.h"

namespace qkv::tasks {

// The cohort a command reads: manifest, methylation table, the share of
// missing beta-values that leaves a subject out, and whether volumes are
// turned to RAS+ (ignored where no volume is read).
struct CohortFiles {
  std::string manifest, methylation;
  double max_missing = 1.0;
  bool reorient = false;
};

template <typename V>
void visit_fields(CohortFiles& f, V&& visit) {
  visit(Field{"manifest", "cohort CSV: subject_id,label,spect[,covariates] (spect: NIfTI path)"}.needed(), f.manifest);
  visit(Field{"methylation", "DNA-methylation table (CSV/TSV): subject_id, then one beta-value column per CpG site"}
            .needed(),
        f.methylation);
  visit(Field{"max_missing", kMaxMissingHelp}.range(0, 1), f.max_missing);
  visit(Field{"reorient", kReorientHelp}, f.reorient);
}

// `mhca synth`: the cohort written into `out` (claimed as
// core/output_policy.h allows), volumes counted on stderr on a terminal,
// Ctrl-C honoured between volumes. Returns the lines it prints.
std::string write_synth_cohort_to(const std::string& out, medical::SynthCohortOptions options, bool overwrite);

// Every row of a cohort, 0..size-1.
std::vector<int64_t> all_rows(const medical::CohortData& cohort);

// The preprocessing a `mhca train` / `mhca cv` run recorded in its
// config.json; DataError naming `file` for another run.
medical::Preprocessing recorded_preprocessing(const nlohmann::json& config, const std::string& file);

// `mhca cv`'s settings completed and checked before any file is touched:
// recipe `recipe` (if not "") filling the settings not `given` (cv.recipe
// records it), the models (resolve_cv_models), a list file meaning select =
// list, the selection, augmentation and training settings, `model_options`
// (JSON).
void prepare_cv_options(CVOptions& cv, std::vector<std::string> models, const std::string& model_options,
                        const std::string& recipe, const GivenSetting& given);

// `mhca cv` after prepare_cv_options: the folder `run.out` checked (new,
// with run.overwrite, or continued with `resume`) before the cohort is read,
// the run options applied (run.seed seeds the folds and every network), the
// cohort read (volumes only when a model reads them, said on stderr), the
// folder opened, the cross validation run (Ctrl-C keeps finished folds).
CVResult cross_validate(const CohortFiles& files, CVOptions cv, const RunOptions& run, bool resume);

// `mhca predict`: P(PD) for every subject from a network checkpoint or an
// XGBoost run's xgboost.json, written as CSV (subject_id, label, p_pd,
// predicted, seen_in_training) to `output`. Subjects that trained or
// validated the checkpoint (config.json's fit_subjects) are counted apart.
struct CohortPrediction {
  nlohmann::json metrics;  // binary_metrics, model, seen_in_training, unseen (the others' metrics)
  int64_t subjects = 0, seen = 0;
  std::vector<std::string> warnings;  // degenerate results (of the unseen subjects where some were seen)
  std::string note;                   // where some were seen: that "unseen" scores the others alone
};
CohortPrediction predict_cohort(const CohortFiles& files, const train::CheckpointFile& checkpoint,
                                const std::string& output, bool overwrite, const c10::Device& device);

// `mhca explain`: the attention maps of a co-attention checkpoint (mhca,
// mhca-x...; UsageError naming "checkpoint" for another model) for
// options.subjects (empty: all) written to `out`; the ground truth next to
// the manifest is used when options.ground_truth is empty. Returns
// explain_subjects' record.
nlohmann::json explain_checkpoint(const CohortFiles& files, const train::CheckpointFile& checkpoint,
                                  ExplainOptions options, const std::string& out, bool overwrite,
                                  const c10::Device& device);

// `mhca select`'s count of CpG sites to keep (key "n_features"): no volumes
// are read, so it is a number (cv's 0, the SPECT token count, has nothing to
// count); its default is the paper's kPaperCpgSites.
inline Field select_n_features_field() {
  return Field{"n_features", "CpG sites to keep (paper: 441)"}.range(1, 10000000);
}

// `mhca select`: XGBoost RFE on every subject's methylation, the kept CpG ids
// written one per line to `output` (checked before the work). Returns the line
// the command prints. selection.n_features in select_n_features_field's range.
std::string select_to_file(const CohortFiles& files, FeatureSelection selection, const std::string& output,
                           bool overwrite);

}  // namespace qkv::tasks
