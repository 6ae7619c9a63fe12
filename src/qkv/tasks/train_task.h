#pragma once
// A task's train command without its front end: its defaults, how a new
// run's request is made from the task's settings, and how the data are loaded
// (TaskRun). new_train_request and run_train_task do the rest; the CLI
// (cli/train_command.h) adds options and printing.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/runtime/run_options.h"
#include "qkv/tasks/task_run.h"
#include "qkv/train/run.h"

namespace qkv::tasks {

// Whether the user set the setting `key` (else its default stands).
using GivenSetting = std::function<bool(const std::string& key)>;

struct TrainTask {
  std::string command;      // "vnt train"
  std::string description;  // one line
  std::string default_out;  // "runs/vnt"
  train::TrainConfig defaults;
  // The data decide part of the model's options (MHCA: volume shape, feature
  // count), so they are checked when the data are loaded, not before.
  bool model_options_from_data = false;
  // The task's models have batch norm (its momentum settings apply).
  bool batch_norm = true;
  // Ranks may split its batches (qkv launch); false: one process (mhca).
  bool data_parallel = true;
  // What help shows as select_metric's default where the data decide it
  // (empty: defaults.select_metric).
  std::string select_metric_shown;
  // A new run: fills request.model_name, model_options and data from the
  // task's settings, and validates them (ConfigError / UsageError). Touches no file.
  std::function<void(const GivenSetting& given, train::RunRequest& request, const std::string& out)> prepare;
  // Optional: the files and folders a run of `request` reads (its data), so
  // that the run folder is checked apart from them (check_outputs_apart)
  // before anything is claimed; --init-weights is added by run_train_task.
  std::function<std::vector<InputPath>(const train::RunRequest& request)> inputs;
  // Optional: the task's own outputs (a synthetic-data folder) checked
  // without writing, before the run folder is claimed.
  std::function<void(const train::RunRequest& request, const std::string& dir, bool overwrite)> check_outputs;
  // Sets the task's own setting `key` (data or model) from its text, for a
  // recipe; false where the task has no such setting. DataError naming `what`.
  std::function<bool(const std::string& key, const std::string& value, const std::string& what)> set_setting;
  // Loads the data from request.data (a new or a resumed run alike); may
  // complete request.data and model_options with what the data decide.
  std::function<TaskRun(train::RunRequest& request, const LoadContext& context)> load;
};

// A new run's request: `base` (command, seed, device, init weights, training
// settings, recipe) completed by task.prepare and validated; the model's
// options and size are checked here unless the data decide them.
train::RunRequest new_train_request(const TrainTask& task, const GivenSetting& given, train::RunRequest base,
                                    const std::string& out);

// For a resumed run: "" when epochs remain, else the line saying that all are
// done (nothing to do). ConfigError naming "epochs" when `epochs_given` asks
// for fewer than are done (the total cannot shrink).
std::string finished_run_note(const train::RunRequest& request, const std::string& dir, bool epochs_given);

struct TrainOutcome {
  nlohmann::json summary;  // summary.json's content (rank 0)
  bool interrupted = false;
  std::string test_label;
  std::string dir;             // the run folder
  bool nothing_to_do = false;  // a resumed run whose epochs were all done (said on stderr)
  int64_t rank = 0;            // this process's data-parallel rank (rank 0 reports)
};

// The run of `request` into `dir`: at rank 0 the folder checked apart from
// the run's inputs and opened (train::RunFolder; new, overwrite or resume),
// the task's outputs checked;
// the data loaded (a folder the load failed to fill is taken back); the model
// fitted (TaskRun::fit) or trained (train::execute_run).
TrainOutcome run_train_task(const TrainTask& task, train::RunRequest& request, const std::string& dir, bool resume,
                            bool overwrite);

// A train command as a front end hands it over: the run's options and the
// training settings as parsed, the recipe to fill the settings left unset
// (tasks/recipes.h), and the keys of the settings the user gave.
struct TrainCall {
  RunOptions run;      // its out: a new run's folder
  std::string resume;  // a run folder to continue; "" = a new run
  std::string init_weights;
  train::TrainConfig train;
  std::string recipe;  // a recipe's name; "" = none
  std::vector<std::string> given;
  models::ModelLimits limits;  // --max-params
};

// What a resumed run may be given: where and how long it goes on, never how
// it trains. Any other key in call.given is a ConfigError naming it.
const std::vector<std::string>& resume_keys();

// A train command end to end: the data-parallel options completed from the
// environment (for keys not given); a new run's request (the recipe
// applied, new_train_request) or a resumed run's stored one, its folder checked
// before anything is read; threads, seed and device applied; then
// run_train_task. A resumed run with no epochs left says so and does nothing.
TrainOutcome train_command(const TrainTask& task, const TrainCall& call);

}  // namespace qkv::tasks
