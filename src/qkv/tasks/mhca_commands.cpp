#include "qkv/tasks/mhca_commands.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/csv.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/learners/xgboost.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/orientation.h"
#include "qkv/models/presets.h"
#include "qkv/runtime/build_parts.h"
#include "qkv/tasks/recipes.h"
#include "qkv/train/progress.h"
#include "qkv/train/result_warnings.h"
#include "qkv/train/run.h"

namespace qkv::tasks {
namespace fs = std::filesystem;

namespace {
std::vector<InputPath> cohort_inputs(const CohortFiles& files) {
  return cohort_input_paths(files.manifest, files.methylation);
}

// A checkpoint's grid says nothing of which way its volumes point or how
// large a voxel is: a cohort mirrored in x against the training cohort was
// read the wrong way round with no word. Refused when the run recorded its
// volumes' orientation and voxel size (mhca train) and this cohort's differ
// (voxel sizes by more than 1e-3 of their size, our tolerance), naming both.
void check_recorded_geometry(const nlohmann::json& config, const medical::CohortData& cohort,
                             const std::string& checkpoint, const CohortFiles& files) {
  const nlohmann::json data =
      config.contains("data") && config.at("data").is_object() ? config.at("data") : nlohmann::json();
  const std::string trained = data.is_object() ? data.value("orientation", "") : "";
  if (!trained.empty()) {
    const std::string here = medical::orientation_code(cohort.geometry);
    if (here != trained)
      throw DataError(files.manifest + ": its volumes are oriented " + here + "+, " + checkpoint +
                      " was trained on volumes oriented " + trained +
                      "+ (mirrored or turned against them); store them as the training volumes were" +
                      (trained == "RAS" ? ", or give {reorient}" : ""));
  }
  const auto trained_size = data.is_object() ? data.value("voxel_size", std::vector<double>{}) : std::vector<double>{};
  if (trained_size.size() != 3) return;
  const auto& here = cohort.geometry.spacing;
  const auto text = [](const auto& s) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%gx%gx%g mm", s[0], s[1], s[2]);
    return std::string(buf);
  };
  for (size_t d = 0; d < 3; ++d)
    if (std::abs(here[d] - trained_size[d]) > 1e-3 * std::max(std::abs(here[d]), std::abs(trained_size[d])))
      throw DataError(files.manifest + ": its voxels are " + text(here) + ", " + checkpoint +
                      " was trained on voxels of " + text(trained_size) + "; resample the volumes to that size");
}

// Whether the checkpoint's run turned its volumes to RAS+: a cohort it reads
// is turned too (as is one given reorient).
bool recorded_reorient(const nlohmann::json& config) {
  return config.contains("data") && config.at("data").is_object() && config.at("data").value("reorient", false);
}
}  // namespace

std::string write_synth_cohort_to(const std::string& out, medical::SynthCohortOptions options, bool overwrite) {
  // A cohort is NIfTI volumes: refused before its folder is made.
  if (!built_with(Part::Nifti)) refuse_without(Part::Nifti, out);
  install_interrupt_handler();
  std::optional<train::ProgressBar> bar;  // made at the first volume, when the total is known
  auto progress = [&bar, &out](int64_t done, int64_t total) {
    if (interrupt_requested())
      throw Interrupted("interrupted; " + out +
                        " is incomplete (no manifest.csv): run the command again with {overwrite}");
    if (!bar) bar.emplace("synth", total, train::ProgressBar::stderr_is_terminal());
    bar->update(done, std::string("volumes"));
  };
  options.validate();
  const auto claim = claim_output_dir(out, "{out}", overwrite, {"qkv mhca synth", {}});
  const auto summary = medical::write_synth_cohort(out, options, progress);
  bar.reset();  // the bar erased before the summary is printed
  char line[512];
  std::snprintf(line, sizeof line, "synth: %lld subjects (%lld PD, %lld controls), %lld CpG sites, anatomy %s, in ",
                static_cast<long long>(summary.subjects), static_cast<long long>(summary.pd),
                static_cast<long long>(summary.controls), static_cast<long long>(summary.cpg),
                summary.atlas_used.c_str());
  std::string text = line + out + "\n";
  if (!summary.oracle_check.empty()) text += "synth: " + summary.oracle_check + "\n";
  return text;
}

void prepare_cv_options(CVOptions& cv, std::vector<std::string> models, const std::string& model_options,
                        const std::string& recipe_name, const GivenSetting& given) {
  const Recipe* recipe = recipe_name.empty() ? nullptr : &find_recipe(kMhcaCvCommand, recipe_name);
  if (recipe) {
    const std::string what = "recipe " + recipe->name;
    cv.recipe = apply_recipe(*recipe, {given, [&](const std::string& key, const std::string& value) {
                                         if (key == "model") {
                                           models = {value};
                                           return true;
                                         }
                                         bool found = false;
                                         const auto set = field_text_setter(key, value, what, found);
                                         visit_cv_fields(cv, set);
                                         visit_fields(cv.selection, set);
                                         visit_fields(cv.augmentation, set);
                                         visit_fields(cv.train, set);
                                         return found;
                                       }});
    check_recipe_models(*recipe, models);
  }
  cv.models = resolve_cv_models(models);
  if (!cv.selection.list_path.empty()) cv.selection.mode = "list";
  visit_cv_fields(cv, field_range_checker());
  validate_selection(cv.selection);
  validate_augmentation(cv.augmentation);
  cv.model_options = models::parse_model_options(model_options);
  cv.train.validate();
  check_xgboost_is_built(cv.selection, cv.models);
}

CVResult cross_validate(const CohortFiles& files, CVOptions cv, const RunOptions& run, bool resume) {
  const std::string& out = run.out;
  // A resumed folder's settings are compared with these after the cohort is read.
  const auto mode = train::run_folder_mode(resume, run.overwrite);
  auto inputs = cohort_inputs(files);
  inputs.push_back({"cpg_list", cv.selection.list_path});
  check_outputs_apart(out, "out", inputs);
  train::RunFolder::check(out, mode, "mhca cv");
  const c10::Device device = apply_run_options(run);
  cv.seed = run.seed;
  cv.train.seed = run.seed;
  cv.selection.xgboost.threads = at::get_num_threads();
  bool need_volumes = false;
  for (const auto& m : cv.models) need_volumes = need_volumes || model_reads_volumes(m);
  auto cohort = medical::load_cohort(files.manifest, files.methylation, need_volumes, at::get_num_threads(), false, {},
                                     files.max_missing, files.reorient);
  const int64_t n_features = check_cv_options(cohort, cv);
  say_as_is("mhca cv: " + std::to_string(cohort.size()) + " subjects, " + cohort.match_summary + "; volume " +
            (need_volumes ? nlohmann::json(cohort.volume_shape()).dump() : std::string("not loaded")) + "; " +
            counted(cv.runs, "run") + " x " + counted(cv.folds, "fold") + "; " +
            counted(at::get_num_threads(), "thread"));
  const auto folder = train::RunFolder::open(out, mode, "mhca cv");
  install_interrupt_handler();
  return run_cross_validation(cohort, cv, n_features, out, device);
}

std::vector<int64_t> all_rows(const medical::CohortData& cohort) {
  std::vector<int64_t> rows(static_cast<size_t>(cohort.size()));
  for (int64_t i = 0; i < cohort.size(); ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

medical::Preprocessing recorded_preprocessing(const nlohmann::json& config, const std::string& file) {
  if (!config.contains("data") || !config.at("data").contains("preprocessing"))
    throw DataError(file + ": not made by 'qkv mhca train' or 'qkv mhca cv' (no preprocessing record)");
  return medical::Preprocessing::from_json(config.at("data").at("preprocessing"));
}

CohortPrediction predict_cohort(const CohortFiles& files, const train::CheckpointFile& checkpoint_file,
                                const std::string& output, bool overwrite, const c10::Device& device) {
  const std::string& checkpoint = checkpoint_file.path;
  auto inputs = cohort_inputs(files);
  inputs.push_back({"checkpoint", checkpoint});
  check_outputs_apart(output, "{output}", inputs);
  const bool xgb = fs::path(checkpoint).extension() == ".json";
  nlohmann::json config;
  models::ModelPtr model;
  if (xgb)
    config = read_json_file((fs::path(checkpoint).parent_path() / "config.json").string());
  else
    model = train::load_model_from_checkpoint(checkpoint_file, &config);
  const auto prep = recorded_preprocessing(config, checkpoint);
  check_output_file(output, "{output}", overwrite, "mhca predict");
  const std::string name = config.at("model").at("name");
  // The checkpoint's grid, so that a volume on another grid is refused from its header.
  const auto& model_json = config.at("model");
  const auto grid = model_json.contains("options")
                        ? model_json.at("options").value("volume_shape", std::vector<int64_t>{})
                        : std::vector<int64_t>{};
  auto cohort = medical::load_cohort(files.manifest, files.methylation, model_reads_volumes(name),
                                     at::get_num_threads(), false, grid, files.max_missing,
                                     files.reorient || recorded_reorient(config), medical::CohortUse::Predict);
  if (model_reads_volumes(name)) check_recorded_geometry(config, cohort, checkpoint, files);
  const auto rows = all_rows(cohort);
  std::vector<double> p;
  if (xgb) {
    auto classifier = medical::XGBoostClassifier::load(read_file_bytes(checkpoint));
    const auto x = medical::methylation_matrix(cohort, rows, prep);
    p = classifier.predict_proba(x.data(), cohort.size(), static_cast<int64_t>(prep.cpg_ids.size()));
  } else {
    p = predict_probabilities(*model, *medical::make_dataset(cohort, rows, prep), 16, device);
  }
  // Subjects that trained or validated the checkpoint are scored apart:
  // their predictions flatter the model.
  std::set<std::string> fit;
  if (config.contains("data") && config.at("data").contains("fit_subjects"))
    for (const auto& id : config.at("data").at("fit_subjects")) fit.insert(id.get<std::string>());
  // Metrics score the labelled subjects alone; an unlabelled one (a new
  // patient) gets its probability and an empty label cell.
  std::string csv = "subject_id,label,p_pd,predicted,seen_in_training\n";
  std::vector<double> labelled_p, unseen_p;
  std::vector<int64_t> labelled, unseen_labels;
  int64_t seen_count = 0;
  for (int64_t i = 0; i < cohort.size(); ++i) {
    char prob[32];
    std::snprintf(prob, sizeof prob, "%.6f", p[i]);
    const bool seen = fit.count(cohort.subject_ids[i]) > 0;
    const int64_t label = cohort.labels[i];
    csv += csv_field(cohort.subject_ids[i]) + "," + (label == medical::kUnlabelled ? "" : std::to_string(label)) + "," +
           prob + "," + (p[i] >= 0.5 ? "1" : "0") + "," + (seen ? "1" : "0") + "\n";
    seen_count += seen;
    if (label == medical::kUnlabelled) continue;
    labelled_p.push_back(p[i]);
    labelled.push_back(label);
    if (!seen) {
      unseen_p.push_back(p[i]);
      unseen_labels.push_back(label);
    }
  }
  const auto claim = claim_output_file(output, "{output}", overwrite, {"mhca predict", {}});
  write_file_atomic(output, csv);
  CohortPrediction result;
  result.subjects = cohort.size();
  result.seen = seen_count;
  if (labelled.empty()) {
    result.metrics = {{"model", name}, {"subjects", cohort.size()}, {"labelled", 0}, {"seen_in_training", result.seen}};
    result.note = "note: no subject is labelled: P(PD) alone, no metrics";
    return result;
  }
  result.metrics = binary_metrics(labelled_p, labelled);
  if (static_cast<int64_t>(labelled.size()) < cohort.size()) {
    result.metrics["labelled"] = labelled.size();
    result.note = "note: metrics score the " + std::to_string(labelled.size()) + " labelled subjects of " +
                  std::to_string(cohort.size());
  }
  result.metrics["model"] = name;
  result.metrics["seen_in_training"] = result.seen;
  if (result.seen > 0)
    result.metrics["unseen"] = unseen_p.empty() ? nlohmann::json(nullptr) : binary_metrics(unseen_p, unseen_labels);
  if (result.seen > 0)
    result.note +=
        std::string(result.note.empty() ? "" : "\n") + "note: " + std::to_string(result.seen) + " of " +
        std::to_string(result.subjects) +
        " subjects trained or validated this checkpoint; their predictions flatter it: " +
        (unseen_p.empty() ? std::string("no other subject is labelled, so every metric here is in-sample")
                          : "\"unseen\" scores the other " + std::to_string(unseen_p.size()) + " labelled alone");
  const bool by_unseen = result.seen > 0 && !unseen_p.empty();
  const std::string prefix = by_unseen ? "unseen subjects: " : result.seen > 0 ? "in-sample: " : "";
  for (const auto& w : train::degenerate_result_warnings(by_unseen ? result.metrics.at("unseen") : result.metrics))
    result.warnings.push_back(prefix + w);
  return result;
}

nlohmann::json explain_checkpoint(const CohortFiles& files, const train::CheckpointFile& checkpoint_file,
                                  ExplainOptions options, const std::string& out, bool overwrite,
                                  const c10::Device& device) {
  // A subject given twice would weigh twice in the mean map and the counts.
  std::set<std::string> given;
  for (const auto& id : options.subjects)
    if (!given.insert(id).second) throw ConfigError("subject", id + ": given twice");
  const std::string& checkpoint = checkpoint_file.path;
  nlohmann::json config;
  auto model = train::load_model_from_checkpoint(checkpoint_file, &config);
  auto* net = dynamic_cast<models::CoAttentionModel*>(model.get());
  if (!net)
    throw ConfigError("checkpoint", checkpoint + ": explain needs a co-attention model (mhca, mhca-x), this one is " +
                                        config.at("model").at("name").get<std::string>());
  const auto prep = recorded_preprocessing(config, checkpoint);
  if (options.ground_truth.empty()) {
    const auto next_to = fs::path(files.manifest).parent_path() / "ground_truth.json";
    if (fs::exists(next_to)) options.ground_truth = next_to.string();
  }
  auto inputs = cohort_inputs(files);
  inputs.push_back({"checkpoint", checkpoint});
  inputs.push_back({"ground_truth", options.ground_truth});
  inputs.push_back({"striatum_mask", options.striatum_mask});
  check_outputs_apart(out, "{out}", inputs);
  check_output_dir(out, "{out}", overwrite, "mhca explain");
  auto cohort = medical::load_cohort(files.manifest, files.methylation, true, at::get_num_threads(), false,
                                     net->spect_options().volume_shape, files.max_missing,
                                     files.reorient || recorded_reorient(config), medical::CohortUse::Predict);
  check_recorded_geometry(config, cohort, checkpoint, files);
  const auto explained = read_explain_inputs(cohort, options);  // before the claim, which empties an --overwrite
  // The masks the ground truth names are read too (after the claim, at each subject).
  for (const auto& mask : {explained.truth.striatum_mask, explained.truth.cross_modal_mask})
    if (mask != options.striatum_mask)
      check_outputs_apart(out, "{out}", {{"ground_truth", mask, explained.truth.path}});
  const bool created = !fs::exists(out);
  auto claim = claim_output_dir(out, "{out}", overwrite, {"mhca explain", {}});
  try {
    return explain_subjects(*net, cohort, prep, options, explained, out, device);
  } catch (...) {
    claim.release_if_unused(created);  // failed before writing anything: no folder left behind
    throw;
  }
}

std::string select_to_file(const CohortFiles& files, FeatureSelection selection, const std::string& output,
                           bool overwrite) {
  if (output.empty()) throw ConfigError("output", "is required (the CpG list to write)");
  field_range_checker()(select_n_features_field(), selection.n_features);
  validate_selection(selection);
  check_xgboost_is_built(selection, {});
  check_outputs_apart(output, "{output}", cohort_inputs(files));
  check_output_file(output, "{output}", overwrite, "qkv mhca select");  // before the work, not after it
  auto cohort = medical::load_cohort(files.manifest, files.methylation, false, 1, false, {}, files.max_missing);
  selection.xgboost.threads = at::get_num_threads();
  const auto ids = select_features(cohort, all_rows(cohort), selection, selection.n_features, false);
  const auto claim = claim_output_file(output, "{output}", overwrite, {"qkv mhca select", {}});
  medical::write_cpg_list(output, ids,
                          "qkv mhca select: " + std::to_string(ids.size()) + " of " +
                              std::to_string(cohort.methylation.cols()) + " CpG sites of " + files.methylation +
                              " by XGBoost RFE on all " + std::to_string(cohort.size()) +
                              " subjects (use inside cross validation with 'qkv mhca cv --select rfe')");
  return "select: kept " + std::to_string(ids.size()) + " of " + std::to_string(cohort.methylation.cols()) +
         " CpG sites (" + cohort.match_summary + "); wrote " + output;
}

}  // namespace qkv::tasks
