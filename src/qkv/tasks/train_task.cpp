#include "qkv/tasks/train_task.h"

#include <optional>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"
#include "qkv/train/checkpoint.h"

namespace qkv::tasks {

train::RunRequest new_train_request(const TrainTask& task, const GivenSetting& given, train::RunRequest request,
                                    const std::string& out) {
  request.command = task.command;
  task.prepare(given, request, out);
  request.train.validate();
  if (!task.model_options_from_data && train::is_registered_model(request.model_name)) {
    // Bad or huge model options fail here, before any data are read or written.
    const auto& entry = models::find_model(request.model_name);
    entry.resolve(request.model_options);
    models::check_parameter_count(entry.name, entry.size(request.model_options, 1));
  }
  return request;
}

std::string finished_run_note(const train::RunRequest& request, const std::string& dir, bool epochs_given) {
  const train::TrainState done = train::read_checkpoint_state(train::RunPaths{dir}.last_checkpoint());
  const int64_t target = train::effective_train_config(request).epochs;
  if (epochs_given && target < done.epoch)
    throw ConfigError("epochs", std::to_string(target) + ": {resume} " + dir + " has already trained " +
                                    counted(done.epoch, "epoch") + "; {epochs} is the total, give more than " +
                                    std::to_string(done.epoch) + " to train further (nothing was changed)");
  if (target > done.epoch || done.step_in_epoch > 0) return "";
  return request.command + ": nothing to do: " + dir + " has finished all " + counted(done.epoch, "epoch") +
         "; give {epochs} above " + std::to_string(done.epoch) + " to train further";
}

TrainOutcome run_train_task(const TrainTask& task, train::RunRequest& request, const std::string& dir, bool resume,
                            bool overwrite) {
  const int64_t rank = request.train.parallel.rank;
  std::optional<train::RunFolder> folder;
  if (rank == 0) {
    const auto mode = train::run_folder_mode(resume, overwrite);
    if (!resume) {
      train::RunFolder::check(dir, mode, task.command);
      if (task.check_outputs) task.check_outputs(request, overwrite);
    }
    folder = train::RunFolder::open(dir, mode, task.command, resume ? "resume" : "out");
  }
  TaskRun run;
  try {
    run = task.load(request, {rank, overwrite, resume, dir});
  } catch (...) {
    // Data that cannot be loaded leave no run folder holding only a ledger.
    if (folder) folder->release_if_unused();
    throw;
  }
  TrainOutcome outcome;
  outcome.test_label = run.test_label;
  if (run.fit) {
    outcome.summary = run.fit(dir);
    train::write_fitted_run(request, dir, outcome.summary);
    return outcome;
  }
  auto result = train::execute_run(request, dir, resume, run.splits, run.hooks);
  outcome.interrupted = result.interrupted;
  outcome.summary = std::move(result.summary);
  return outcome;
}

}  // namespace qkv::tasks
