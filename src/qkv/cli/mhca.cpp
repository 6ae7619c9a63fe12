// qkv mhca synth|select|cv|train|predict|explain: the MHCA paper end to end on
// a user's cohort (NIfTI SPECT volumes listed in a manifest CSV, a
// DNA-methylation table) or on the built-in synthetic cohort.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/recipe.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/runtime.h"
#include "qkv/data/folds.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/tasks/mhca_cv.h"
#include "qkv/tasks/mhca_explain.h"
#include "qkv/medical/synth_cohort.h"
#include "qkv/medical/xgboost.h"
#include "qkv/models/mhca.h"
#include "qkv/tasks/mhca_task.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/progress.h"
#include "qkv/train/result_warnings.h"
#include "qkv/train/run.h"

namespace qkv::cli {
namespace {
namespace fs = std::filesystem;

struct CohortFiles {
  std::string manifest, methylation;
  double max_missing = 1.0;
  bool reorient = false;
};

// --reorient only where volumes are read.
void add_cohort_options(CLI::App* cmd, CohortFiles& f, bool volumes = true) {
  cmd->add_option("--manifest", f.manifest, "cohort CSV: subject_id,label,spect[,covariates] (spect: NIfTI path)")
      ->required();
  cmd->add_option("--methylation", f.methylation,
                  "DNA-methylation table (CSV/TSV): subject_id, then one beta-value column per CpG site")
      ->required();
  add_ranged_option(cmd, "--max-missing", f.max_missing, tasks::kMaxMissingHelp, 0, 1);
  if (volumes) cmd->add_flag("--reorient", f.reorient, tasks::kReorientHelp);
}

std::vector<int64_t> all_rows(const medical::CohortData& c) {
  std::vector<int64_t> rows(static_cast<size_t>(c.size()));
  for (int64_t i = 0; i < c.size(); ++i) rows[i] = i;
  return rows;
}

void register_synth(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "synth", "write the built-in synthetic cohort: NIfTI SPECT volumes, manifest, methylation table, ground truth");
  struct Opts {
    medical::SynthCohortOptions synth;
    std::string out;
    std::vector<int64_t> shape;
    bool overwrite = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--out", o->out, "folder to write (missing or empty; --overwrite replaces what qkv wrote there)")
      ->required();
  add_overwrite_flag(cmd, o->overwrite);
  add_field_options(cmd, o->synth);
  cmd->add_option("--shape", o->shape, "volume grid X,Y,Z (default 91,109,91, MNI 2 mm); e.g. 24,28,24 for CPU runs")
      ->delimiter(',')
      ->expected(3)
      ->check(range_check(1, 4096));
  add_ranged_option(cmd, "--threads", o->synth.threads, "volumes generated in parallel; 0 = one per core", 0,
                    max_threads_option());
  cmd->callback([o, &action] {
    action = [o] {
      if (!o->shape.empty()) o->synth.shape = {o->shape[0], o->shape[1], o->shape[2]};
      install_interrupt_handler();
      const bool live = train::ProgressBar::stderr_is_terminal();
      auto progress = [live, o](int64_t done, int64_t total) {
        if (interrupt_requested())
          throw Interrupted("interrupted; " + o->out + " is incomplete (no manifest.csv): run the command again with "
                            "--overwrite");
        if (live)
          std::fprintf(stderr, "\rsynth: %lld/%lld volumes", static_cast<long long>(done),
                       static_cast<long long>(total));
      };
      o->synth.validate();
      claim_output_dir(o->out, "--out", o->overwrite, {"qkv mhca synth", {}});
      const auto summary = medical::write_synth_cohort(o->out, o->synth, progress);
      if (live) std::fprintf(stderr, "\n");
      std::printf("synth: %lld subjects (%lld PD, %lld controls), %lld CpG sites, anatomy %s, in %s\n",
                  static_cast<long long>(summary.subjects), static_cast<long long>(summary.pd),
                  static_cast<long long>(summary.controls), static_cast<long long>(summary.cpg),
                  summary.atlas_used.c_str(), o->out.c_str());
      if (!summary.oracle_check.empty()) std::printf("synth: %s\n", summary.oracle_check.c_str());
      return 0;
    };
  });
}

void register_select(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "select", "XGBoost recursive feature elimination on the methylation table; writes the selected CpG list");
  struct Opts {
    CohortFiles files;
    tasks::FeatureSelection selection;
    std::string out;
    int threads = 0;
    bool overwrite = false;
  };
  auto o = std::make_shared<Opts>();
  o->selection.n_features = 441;
  add_cohort_options(cmd, o->files, false);
  cmd->add_option("--output", o->out, "CpG list to write, one id per line (REQUIRED)");
  add_old_spelling(cmd, "--out", "--output", o->out);
  add_overwrite_flag(cmd, o->overwrite);
  add_ranged_option(cmd, "--n-features", o->selection.n_features, "CpG sites to keep (paper: 441)", 1, 10000000);
  add_ranged_option(cmd, "--rfe-step", o->selection.rfe.step,
                    "share of the features removed per round (< 1) or a count", 1e-6, 10000000);
  add_field_options(cmd, o->selection.xgboost);
  add_ranged_option(cmd, "--threads", o->threads, "XGBoost threads; 0 = one per core", 0, max_threads_option());
  cmd->callback([o, &action] {
    action = [o] {
      if (o->out.empty()) throw UsageError("select: --output is required (the CpG list to write)");
      if (o->selection.n_features < 1) throw UsageError("--n-features must be at least 1");
      if (!(o->selection.rfe.step > 0) || !std::isfinite(o->selection.rfe.step))
        throw UsageError("--rfe-step must be a positive number");
      o->selection.xgboost.validate();
      check_output_file(o->out, "--output", o->overwrite);  // before the work, not after it
      set_threads(o->threads);
      auto cohort = medical::load_cohort(o->files.manifest, o->files.methylation, false, 1, false, {}, o->files.max_missing);
      tasks::FeatureSelection s = o->selection;
      s.xgboost.threads = at::get_num_threads();
      const auto ids = tasks::select_features(cohort, all_rows(cohort), s, s.n_features, false);
      claim_output_file(o->out, "--output", o->overwrite, {"qkv mhca select", {}});
      medical::write_cpg_list(o->out, ids,
                           "qkv mhca select: " + std::to_string(ids.size()) + " of " +
                               std::to_string(cohort.methylation.cols()) + " CpG sites of " + o->files.methylation +
                               " by XGBoost RFE on all " + std::to_string(cohort.size()) +
                               " subjects (use inside cross validation with 'qkv mhca cv --select rfe')");
      std::printf("select: kept %zu of %lld CpG sites (%s); wrote %s\n", ids.size(),
                  static_cast<long long>(cohort.methylation.cols()), cohort.match_summary.c_str(), o->out.c_str());
      return 0;
    };
  });
}

void register_cv(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "cv", "repeated stratified k-fold cross validation of MHCA and its baselines; writes summary.json, report.html");
  struct Opts {
    CohortFiles files;
    CommonOptions common;
    tasks::CVOptions cv;
    std::vector<std::string> models{"paper"};
    std::string model_options = "{}", recipe;
    bool resume = false;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/mhca-cv";
  tasks::set_mhca_paper_defaults(o->cv.train);
  option_section(cmd, "Run", [&] {
    add_common_options(cmd, o->common, "output folder: summary.json, predictions.csv, report.html, folds/");
    add_max_params_option(cmd);
    cmd->add_flag("--resume", o->resume,
                  "continue an interrupted cross validation in --out (with the same options): finished folds are kept");
    add_recipe_option(cmd, o->recipe, "mhca cv");
  });
  option_section(cmd, "Cohort", [&] { add_cohort_options(cmd, o->files); });
  option_section(cmd, "Cross validation and models", [&] {
    cmd->add_option("--model", o->models,
                    join(tasks::cv_model_names()) + "; paper (" + join(tasks::CVOptions{}.models) +
                        ": the paper's comparison) or all (comma-separated)")
        ->delimiter(',')
        ->capture_default_str();
    add_ranged_option(cmd, "--runs", o->cv.runs, "repetitions of the k-fold split (paper: 3)", 1, 1000);
    add_ranged_option(cmd, "--folds", o->cv.folds, "folds per run (paper: 5)", 2, 1000);
    add_ranged_option(cmd, "--val-fraction", o->cv.val_fraction,
                      "share of each training part held out for early stopping and model selection", 0, 0.8);
    cmd->add_option("--normalisation", o->cv.normalisation,
                    "volume intensities: global (min-max over training volumes, paper) or subject")
        ->capture_default_str()
        ->check(CLI::IsMember({"global", "subject"}));
    cmd->add_option("--model-options", o->model_options,
                    "network sizes as JSON, e.g. {\"channels\":[8,16,32,32],\"padding\":1}")
        ->capture_default_str();
  });
  option_section(cmd, "Feature selection (inside each fold)", [&] { add_field_options(cmd, o->cv.selection); });
  cmd->get_option("--cpg-list")->check(CLI::ExistingFile);
  option_section(cmd, "Augmentation", [&] { add_field_options(cmd, o->cv.augmentation); });
  option_section(cmd, "Training (each network of each fold)", [&] { add_field_options(cmd, o->cv.train, kBatchNormFields); });
  cmd->callback([o, cmd, &action] {
    action = [o, cmd] {
      const auto recipe = apply_recipe(cmd, "mhca cv", o->recipe);
      tasks::CVOptions cv = o->cv;
      cv.recipe = recipe;
      cv.models.clear();
      for (const auto& m : o->models) {
        if (m == "all" || m == "paper") {
          cv.models = m == "all" ? tasks::cv_model_names() : tasks::CVOptions{}.models;
          break;
        }
        cv.models.push_back(m);
      }
      const auto& known = tasks::cv_model_names();
      for (const auto& m : cv.models)
        if (std::find(known.begin(), known.end(), m) == known.end())
          throw UsageError("--model " + m + ": not one of " + join(known) + ", paper, all");
      if (!cv.selection.list_path.empty()) cv.selection.mode = "list";
      tasks::validate_selection(cv.selection);
      tasks::validate_augmentation(cv.augmentation);
      cv.model_options = parse_model_options(o->model_options);
      cv.train.validate();
      // The folder is checked before the cohort is read; a resumed one's settings are compared after.
      const auto mode = train::run_folder_mode(o->resume, cmd->count("--overwrite") > 0);
      train::RunFolder::check(o->common.out, mode, "mhca cv");
      const c10::Device device = apply_common_options(o->common);
      cv.seed = o->common.seed;
      cv.train.seed = o->common.seed;
      cv.selection.xgboost.threads = at::get_num_threads();
      bool need_volumes = false;
      for (const auto& m : cv.models) need_volumes = need_volumes || tasks::model_reads_volumes(m);
      auto cohort = medical::load_cohort(o->files.manifest, o->files.methylation, need_volumes, at::get_num_threads(),
                                      false, {}, o->files.max_missing, o->files.reorient);
      std::fprintf(stderr, "mhca cv: %lld subjects, %s; volume %s; %s x %s; %s\n",
                   static_cast<long long>(cohort.size()), cohort.match_summary.c_str(),
                   need_volumes ? nlohmann::json(cohort.volume_shape()).dump().c_str() : "not loaded",
                   counted(cv.runs, "run").c_str(), counted(cv.folds, "fold").c_str(),
                   counted(at::get_num_threads(), "thread").c_str());
      train::RunFolder::open(o->common.out, mode, "mhca cv");
      install_interrupt_handler();
      auto summary = tasks::run_cross_validation(cohort, cv, o->common.out, device);
      if (summary.value("interrupted", false)) {
        std::fprintf(stderr, "interrupted: finished folds are kept; add --resume to the same command to continue in %s\n",
                     o->common.out.c_str());
        return kExitInterrupted;
      }
      // Pooled per run (mean +- sample std over runs), then the paper's way
      // (folds averaged per run, mean +- population std), labelled.
      for (const char* section : {"", "fold_mean"}) {
        std::printf("%s\n", *section ? "fold-averaged, population std (the paper's Table 1):"
                                      : "pooled per run, sample std over runs:");
        for (const auto& name : cv.models) {
          const auto& model = summary.at("models").at(name);
          const auto& m = *section ? model.at(section) : model;
          auto show = [&](const char* key, double scale) {
            if (!m.contains(key) || m.at(key).at("mean").is_null()) return std::string("n/a");
            const auto& v = m.at(key);
            char buf[64];
            if (v.value("n", 0) == 1 || v.at("std").is_null())  // one run: no spread to show
              std::snprintf(buf, sizeof buf, "%.3f", v.at("mean").get<double>() * scale);
            else
              std::snprintf(buf, sizeof buf, "%.3f +- %.3f", v.at("mean").get<double>() * scale,
                            v.at("std").get<double>() * scale);
            return std::string(buf);
          };
          std::printf("  %-10s accuracy %s %%  AUROC %s  AUROC(labels) %s  sensitivity %s  specificity %s\n",
                      name.c_str(), show("accuracy", 100).c_str(), show("auroc", 1).c_str(),
                      show("auroc_hard", 1).c_str(), show("sensitivity", 1).c_str(), show("specificity", 1).c_str());
        }
      }
      for (const auto& w : summary.value("warnings", std::vector<std::string>{})) std::printf("warning: %s\n", w.c_str());
      std::fprintf(stderr, "wrote %s/{summary.json,predictions.csv,report.html,folds/}\n", o->common.out.c_str());
      return 0;
    };
  });
}

void register_train(CLI::App* parent, Action& action) {
  struct State {
    tasks::MhcaTrainData data;
    std::string model = "mhca";
    std::string model_options = "{}";
  };
  auto s = std::make_shared<State>();
  TrainCommand spec;
  spec.command = tasks::kMhcaTrainCommand;
  spec.description = "train one model (or XGBoost) on a cohort; writes the run folder --out";
  spec.default_out = "runs/mhca";
  tasks::set_mhca_paper_defaults(spec.defaults);
  spec.model_options_from_data = true;
  spec.batch_norm = false;
  spec.data_parallel = false;
  spec.add_data_options = [s](CLI::App* cmd) {
    add_field_options(cmd, s->data);
    cmd->get_option("--manifest")->required();
    cmd->get_option("--methylation")->required();
    cmd->get_option("--cpg-list")->check(CLI::ExistingFile);
    cmd->add_flag("--reorient", s->data.reorient, tasks::kReorientHelp);
  };
  spec.add_model_options = [s](CLI::App* cmd) {
    cmd->add_option("--model", s->model, join(tasks::cv_model_names()))
        ->capture_default_str()
        ->check(CLI::IsMember(tasks::cv_model_names()));
    cmd->add_option("--model-options", s->model_options, "network sizes as JSON")->capture_default_str();
  };
  spec.prepare = [s](const CLI::App&, train::RunRequest& r, const std::string&) {
    tasks::MhcaTrainData d = s->data;
    if (!d.selection.list_path.empty()) d.selection.mode = "list";
    d.model_options = parse_model_options(s->model_options);
    d.validate();
    r.model_name = s->model;
    r.model_options = s->model == "xgboost" ? d.selection.xgboost.to_json() : d.model_options;
    r.data = d.to_json();
  };
  spec.load = [](train::RunRequest& r, const LoadContext&) {
    auto d = tasks::MhcaTrainData::from_json(r.data);
    const bool xgboost = r.model_name == "xgboost";
    auto prepared = std::make_shared<tasks::MhcaTrainRun>(tasks::prepare_mhca_train(d, !xgboost, r.seed));
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
    run.hooks.final_metrics = tasks::binary_metric_factory();
    return run;
  };
  register_train_command(parent, action, std::move(spec));
}

// The preprocessing a run recorded, and the cohort it applies to.
// Whether the checkpoint's run turned its volumes to RAS+: a cohort it reads
// is turned too (as is one given --reorient).
bool recorded_reorient(const nlohmann::json& config) {
  return config.contains("data") && config.at("data").is_object() && config.at("data").value("reorient", false);
}

medical::Preprocessing recorded_preprocessing(const nlohmann::json& config, const std::string& file) {
  if (!config.contains("data") || !config.at("data").contains("preprocessing"))
    throw DataError(file + ": not made by 'qkv mhca train' or 'qkv mhca cv' (no preprocessing record)");
  return medical::Preprocessing::from_json(config.at("data").at("preprocessing"));
}

void register_predict(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "predict", "P(PD) for every subject of a cohort from a trained model; writes a CSV (and metrics if labelled)");
  struct Opts {
    CohortFiles files;
    CommonOptions common;
    std::string checkpoint;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "predictions.csv";
  add_cohort_options(cmd, o->files);
  add_checkpoint_option(cmd, o->checkpoint, "RUN/checkpoints/best.ckpt of a network, or RUN/xgboost.json of an XGBoost run");
  add_common_options(cmd, o->common, "");
  cmd->add_option("--output", o->common.out, "CSV to write: subject_id,label,p_pd,predicted")->capture_default_str();
  add_old_spelling(cmd, "--out", "--output", o->common.out);
  add_overwrite_flag(cmd, o->common.overwrite);
  cmd->callback([o, &action] {
    action = [o] {
      const c10::Device device = apply_common_options(o->common);
      const bool xgb = fs::path(o->checkpoint).extension() == ".json";
      nlohmann::json config;
      models::ModelPtr model;
      if (xgb) {
        config = read_json_file((fs::path(o->checkpoint).parent_path() / "config.json").string());
      } else {
        model = train::load_model_from_checkpoint(o->checkpoint, &config);
      }
      const auto prep = recorded_preprocessing(config, o->checkpoint);
      check_output_file(o->common.out, "--output", o->common.overwrite);
      const std::string name = config.at("model").at("name");
      // The checkpoint's grid, so that a volume on another grid is refused from its header.
      const auto& model_json = config.at("model");
      const auto grid = model_json.contains("options") ? model_json.at("options").value("volume_shape", std::vector<int64_t>{})
                                                       : std::vector<int64_t>{};
      auto cohort = medical::load_cohort(o->files.manifest, o->files.methylation, tasks::model_reads_volumes(name),
                                      at::get_num_threads(), false, grid, o->files.max_missing,
                                      o->files.reorient || recorded_reorient(config));
      const auto rows = all_rows(cohort);
      std::vector<double> p;
      if (xgb) {
        auto classifier = medical::XGBoostClassifier::load(read_file_bytes(o->checkpoint));
        const auto x = medical::methylation_matrix(cohort, rows, prep);
        p = classifier.predict_proba(x.data(), cohort.size(), static_cast<int64_t>(prep.cpg_ids.size()));
      } else {
        p = tasks::predict_probabilities(*model, *medical::make_dataset(cohort, rows, prep), 16, device);
      }
      // Subjects that trained or validated the checkpoint (config.json's
      // fit_subjects) are scored apart: their predictions flatter the model.
      std::set<std::string> fit;
      if (config.contains("data") && config.at("data").contains("fit_subjects"))
        for (const auto& id : config.at("data").at("fit_subjects")) fit.insert(id.get<std::string>());
      std::string csv = "subject_id,label,p_pd,predicted,seen_in_training\n";
      std::vector<double> unseen_p;
      std::vector<int64_t> unseen_labels;
      for (int64_t i = 0; i < cohort.size(); ++i) {
        char prob[32];
        std::snprintf(prob, sizeof prob, "%.6f", p[i]);
        const bool seen = fit.count(cohort.subject_ids[i]) > 0;
        csv += cohort.subject_ids[i] + "," + std::to_string(cohort.labels[i]) + "," + prob + "," +
               (p[i] >= 0.5 ? "1" : "0") + "," + (seen ? "1" : "0") + "\n";
        if (!seen) {
          unseen_p.push_back(p[i]);
          unseen_labels.push_back(cohort.labels[i]);
        }
      }
      claim_output_file(o->common.out, "--output", o->common.overwrite, {"mhca predict", {}});
      write_file_atomic(o->common.out, csv);
      auto metrics = tasks::binary_metrics(p, cohort.labels);
      metrics["model"] = name;
      const auto seen = cohort.size() - static_cast<int64_t>(unseen_p.size());
      metrics["seen_in_training"] = seen;
      if (seen > 0) {
        metrics["unseen"] = unseen_p.empty() ? nlohmann::json(nullptr) : tasks::binary_metrics(unseen_p, unseen_labels);
        std::fprintf(stderr,
                     "note: %lld of %lld subjects trained or validated this checkpoint; their predictions flatter it: "
                     "\"unseen\" scores the other %lld alone\n",
                     static_cast<long long>(seen), static_cast<long long>(cohort.size()),
                     static_cast<long long>(unseen_p.size()));
      }
      print_json(metrics);
      for (const auto& w : train::degenerate_result_warnings(seen > 0 && !unseen_p.empty() ? metrics.at("unseen") : metrics))
        std::fprintf(stderr, "warning: %s%s\n", seen > 0 ? "unseen subjects: " : "", w.c_str());
      std::fprintf(stderr, "wrote %s (%lld subjects)\n", o->common.out.c_str(), static_cast<long long>(cohort.size()));
      return 0;
    };
  });
}

void register_explain(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "explain", "MHCA attention maps: per-head scores and softmax maps, SPECT maps as NIfTI + PNG, ranked CpG sites");
  struct Opts {
    CohortFiles files;
    CommonOptions common;
    std::string checkpoint;
    std::vector<std::string> subjects;
    bool all = false;
    tasks::ExplainOptions explain;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = "runs/mhca-explain";
  add_cohort_options(cmd, o->files);
  add_checkpoint_option(cmd, o->checkpoint, "an MHCA checkpoint (RUN/checkpoints/best.ckpt, or a cv fold's)");
  cmd->add_option("--subject", o->subjects, "subject id(s) to explain (comma-separated)")->delimiter(',');
  cmd->add_flag("--all", o->all, "explain every subject (also writes the cohort-level ranking and mean map)");
  cmd->add_option("--ground-truth", o->explain.ground_truth,
                  "ground_truth.json of 'qkv mhca synth' to score the explanation (default: next to the manifest)");
  add_ranged_option(cmd, "--overlay-threshold", o->explain.overlay_threshold,
                    "PNG overlays paint attention from this share of the map's range up (0 paints everything)", 0, 1);
  cmd->add_option("--striatum-mask", o->explain.striatum_mask,
                  "label NIfTI on the volumes' grid, non-zero = striatum (default: the ground truth's)");
  add_common_options(cmd, o->common, "output folder");
  cmd->callback([o, &action] {
    action = [o] {
      if (o->all == !o->subjects.empty()) throw UsageError("explain: give --subject ID or --all (one of them)");
      const c10::Device device = apply_common_options(o->common);
      nlohmann::json config;
      auto model = train::load_model_from_checkpoint(o->checkpoint, &config);
      auto* net = dynamic_cast<models::CoAttentionModel*>(model.get());
      if (!net)
        throw UsageError("--checkpoint " + o->checkpoint + ": explain needs a co-attention model (mhca, mhca-x), " +
                         "this one is " + config.at("model").at("name").get<std::string>());
      const auto prep = recorded_preprocessing(config, o->checkpoint);
      tasks::ExplainOptions ex = o->explain;
      ex.subjects = o->subjects;
      if (ex.ground_truth.empty()) {
        const auto next_to = fs::path(o->files.manifest).parent_path() / "ground_truth.json";
        if (fs::exists(next_to)) ex.ground_truth = next_to.string();
      }
      check_output_dir(o->common.out, "--out", o->common.overwrite);
      auto cohort = medical::load_cohort(o->files.manifest, o->files.methylation, true, at::get_num_threads(), false,
                                      net->spect_options().volume_shape, o->files.max_missing,
                                      o->files.reorient || recorded_reorient(config));
      claim_output_dir(o->common.out, "--out", o->common.overwrite, {"mhca explain", {}});
      auto result = tasks::explain_subjects(*net, cohort, prep, ex, o->common.out, device);
      nlohmann::json brief = result;
      brief.erase("subjects");
      brief["subjects_explained"] = result.at("subjects").size();
      print_json(brief);
      std::fprintf(stderr, "wrote %s/{explain.json,cpg_attention.csv,spect_attention_mean.*,<subject>/}\n",
                   o->common.out.c_str());
      return 0;
    };
  });
}

}  // namespace

void register_mhca(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "mhca", "MHCA: co-attention between SPECT volumes and DNA methylation (Parkinson's disease vs controls)");
  cmd->require_subcommand(1);
  register_synth(cmd, action);
  register_select(cmd, action);
  register_cv(cmd, action);
  register_train(cmd, action);
  register_predict(cmd, action);
  register_explain(cmd, action);
}

}  // namespace qkv::cli
