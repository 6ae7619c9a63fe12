// qkv mhca synth|select|cv|train|predict|explain: the MHCA paper end to end on
// a user's cohort (NIfTI SPECT volumes listed in a manifest CSV, a
// DNA-methylation table) or on the built-in synthetic cohort.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <set>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/text.h"
#include "qkv/runtime/runtime.h"
#include "qkv/tasks/mhca_commands.h"
#include "qkv/tasks/mhca_task.h"
#include "qkv/train/cv_report.h"

namespace qkv::cli {
namespace {
using tasks::CohortFiles;

// mhca synth's settings: the cohort's, and its volume grid as --shape X,Y,Z.
struct SynthCommandSettings {
  medical::SynthCohortOptions synth;
  std::vector<int64_t> shape;
};
template <typename V>
void visit_fields(SynthCommandSettings& s, V&& visit) {
  visit_fields(s.synth, visit);
}

void register_mhca_synth(CLI::App* parent, Action& action) {
  add_settings_command<SynthCommandSettings>(
      parent, action,
      CommandText("synth",
                  "write the built-in synthetic cohort: NIfTI SPECT volumes, manifest, methylation table, ground truth")
          .heading("Cohort")
          .required_out("folder to write (missing or empty; --overwrite replaces what qkv wrote there)")
          .run_options({"threads"})  // the cohort's --seed is its own
          .threads("volumes generated in parallel; 0 = one per core"),
      [](const auto& o, const c10::Device&) {
        auto synth = o.settings.synth;
        const auto& shape = o.settings.shape;
        if (!shape.empty()) synth.shape = {shape[0], shape[1], shape[2]};
        synth.threads = o.run.threads;
        std::printf("%s", tasks::write_synth_cohort_to(o.run.out, synth, o.run.overwrite).c_str());
        return 0;
      },
      [](CLI::App* cmd, auto& o) {
        const Field shape = medical::synth_shape_field();
        cmd->add_option("--shape", o.settings.shape, shape.help + range_help(shape))
            ->delimiter(',')
            ->expected(3)
            ->check(range_check(shape));
      });
}

// mhca select's settings: the cohort (its volumes unread), how many CpG sites
// RFE keeps (the paper's 441 by default) and RFE's and XGBoost's settings.
struct SelectSettings {
  CohortFiles files;
  tasks::FeatureSelection selection;
  SelectSettings() { selection.n_features = tasks::kPaperCpgSites; }
};
template <typename V>
void visit_fields(SelectSettings& s, V&& visit) {
  visit_fields(s.files, visit);
  visit(tasks::select_n_features_field(), s.selection.n_features);
  // RFE is the selection here: not which selection, nor a list, nor cv's count.
  visit_fields(s.selection, [&](const Field& f, auto& value) {
    const std::string key = f.key;
    if (key != "select" && key != "cpg_list" && key != "n_features") visit(f, value);
  });
}

void register_mhca_select(CLI::App* parent, Action& action) {
  add_settings_command<SelectSettings>(
      parent, action,
      CommandText("select",
                  "XGBoost recursive feature elimination on the methylation table; writes the selected CpG list")
          .heading("Feature selection")
          .run_options({"threads"})
          .threads("XGBoost threads; 0 = one per core"),
      [](const auto& o, const c10::Device&) {
        std::printf("%s\n",
                    tasks::select_to_file(o.settings.files, o.settings.selection, o.run.out, o.run.overwrite).c_str());
        return 0;
      },
      [](CLI::App* cmd, auto& o) {
        cmd->add_option("--output", o.run.out, "CpG list to write, one id per line (REQUIRED)");
        add_old_spelling(cmd, "--out", "--output", o.run.out);
        add_overwrite_flag(cmd, o.run.overwrite);
      },
      {"reorient"});  // no volumes read
}

// mhca cv's settings. Their options come in sections (the command's `more`):
// none is added from this list, which is empty.
struct CvCommandSettings {
  CohortFiles files;
  tasks::CVOptions cv;
  std::vector<std::string> models{"paper"};
  std::string model_options = "{}", recipe;
  bool resume = false;
};
template <typename V>
void visit_fields(CvCommandSettings&, V&&) {}

void register_mhca_cv(CLI::App* parent, Action& action) {
  add_settings_command<CvCommandSettings>(
      parent, action,
      CommandText("cv",
                  "repeated stratified k-fold cross validation of MHCA and its baselines; writes summary.json, "
                  "report.html")
          .out("output folder: summary.json, predictions.csv, report.html, folds/", "runs/mhca-cv"),
      [](const auto& o, const c10::Device&) {
        const auto& s = o.settings;
        tasks::CVOptions cv = s.cv;
        tasks::prepare_cv_options(cv, s.models, s.model_options, s.recipe, o.given);
        const auto result = tasks::cross_validate(s.files, cv, o.run, s.resume);
        if (result.interrupted) {
          std::fprintf(stderr,
                       "interrupted: finished folds are kept; add --resume to the same command to continue in %s\n",
                       o.run.out.c_str());
          return kExitInterrupted;
        }
        std::printf("%s", train::cv_summary_text(result.summary, cv.models).c_str());
        std::fprintf(stderr, "wrote %s/{summary.json,predictions.csv,report.html,folds/}\n", o.run.out.c_str());
        return 0;
      },
      [](CLI::App* cmd, auto& o) {
        auto& s = o.settings;
        option_section(cmd, "Run", [&] {
          add_max_params_option(cmd, s.cv.limits);
          cmd->add_flag("--resume", s.resume,
                        "continue an interrupted cross validation in --out (with the same options): finished folds are "
                        "kept");
          add_recipe_option(cmd, s.recipe, "mhca cv");
        });
        option_section(cmd, "Cohort", [&] { add_field_options(cmd, s.files); });
        option_section(cmd, "Cross validation and models", [&] {
          cmd->add_option("--model", s.models,
                          join(tasks::cv_model_names()) + "; paper (" + join(tasks::CVOptions{}.models) +
                              ": the paper's comparison) or all (comma-separated)")
              ->delimiter(',')
              ->capture_default_str();
          tasks::visit_cv_fields(s.cv, field_option_adder(cmd));
          cmd->add_option("--model-options", s.model_options,
                          "network sizes as JSON, e.g. {\"channels\":[8,16,32,32],\"padding\":1}")
              ->capture_default_str();
        });
        option_section(cmd, "Feature selection (inside each fold)", [&] { add_field_options(cmd, s.cv.selection); });
        option_section(cmd, "Augmentation", [&] { add_field_options(cmd, s.cv.augmentation); });
        option_section(cmd, "Training (each network of each fold)",
                       [&] { add_field_options(cmd, s.cv.train, kBatchNormFields); });
      });
}

void register_mhca_train(CLI::App* parent, Action& action) {
  auto s = std::make_shared<tasks::MhcaTrainSettings>();
  register_train_command(
      parent, action, tasks::mhca_train_task(s), [s](CLI::App* cmd) { add_field_options(cmd, s->data); },
      [s](CLI::App* cmd) {
        cmd->add_option("--model", s->model, join(tasks::cv_model_names()))
            ->capture_default_str()
            ->check(CLI::IsMember(tasks::cv_model_names()));
        cmd->add_option("--model-options", s->model_options, "network sizes as JSON")->capture_default_str();
      });
}

void register_mhca_predict(CLI::App* parent, Action& action) {
  add_settings_command<CohortFiles>(
      parent, action,
      CommandText("predict",
                  "P(PD) for every subject of a cohort from a trained model; writes a CSV (and metrics if labelled)")
          .heading("Prediction")
          .checkpoint("RUN/checkpoints/best.ckpt of a network, or RUN/xgboost.json of an XGBoost run"),
      [](const auto& o, const c10::Device& device) {
        const auto result = tasks::predict_cohort(o.settings, o.checkpoint, o.run.out, o.run.overwrite, device);
        if (!result.note.empty()) std::fprintf(stderr, "%s\n", result.note.c_str());
        print_json(result.metrics);
        for (const auto& w : result.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
        std::fprintf(stderr, "wrote %s (%lld subjects)\n", o.run.out.c_str(), static_cast<long long>(result.subjects));
        return 0;
      },
      [](CLI::App* cmd, auto& o) {
        o.run.out = "predictions.csv";
        cmd->add_option("--output", o.run.out, "CSV to write: subject_id,label,p_pd,predicted")->capture_default_str();
        add_old_spelling(cmd, "--out", "--output", o.run.out);
        add_overwrite_flag(cmd, o.run.overwrite);
      });
}

// mhca explain's settings: the cohort, what to explain, and --all.
struct CohortExplainSettings {
  CohortFiles files;
  tasks::ExplainOptions explain;
  bool all = false;
};
template <typename V>
void visit_fields(CohortExplainSettings& c, V&& visit) {
  visit_fields(c.files, visit);
  visit_fields(c.explain, visit);
  visit(Field{"all", "explain every subject (also writes the cohort-level ranking and mean map)"}, c.all);
}

void register_mhca_explain(CLI::App* parent, Action& action) {
  add_settings_command<CohortExplainSettings>(
      parent, action,
      CommandText("explain",
                  "MHCA attention maps: per-head scores and softmax maps, SPECT maps as NIfTI + PNG, ranked CpG sites")
          .heading("Explanation")
          .checkpoint("an MHCA checkpoint (RUN/checkpoints/best.ckpt, or a cv fold's)")
          .out("output folder", "runs/mhca-explain"),
      [](const auto& o, const c10::Device& device) {
        const auto& s = o.settings;
        if (s.all == !s.explain.subjects.empty()) throw UsageError("explain: give --subject ID or --all (one of them)");
        const auto result =
            tasks::explain_checkpoint(s.files, o.checkpoint, s.explain, o.run.out, o.run.overwrite, device);
        nlohmann::json brief = result;
        brief.erase("subjects");
        brief["subjects_explained"] = result.at("subjects").size();
        print_json(brief);
        std::fprintf(stderr, "wrote %s/{explain.json,cpg_attention.csv,spect_attention_mean.*,<subject>/}\n",
                     o.run.out.c_str());
        return 0;
      });
}

}  // namespace

void register_mhca(CLI::App& app, Action& action) {
  add_command_group(app, action, "mhca",
                    "MHCA: co-attention between SPECT volumes and DNA methylation (Parkinson's disease vs controls)",
                    {register_mhca_synth, register_mhca_select, register_mhca_cv, register_mhca_train,
                     register_mhca_predict, register_mhca_explain});
}

}  // namespace qkv::cli
