#include "qkv/tasks/train_task.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "qkv/core/errors.h"
#include "qkv/core/fields.h"
#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/distributed/process_group.h"
#include "qkv/models/model.h"
#include "qkv/runtime/runtime.h"
#include "qkv/tasks/recipes.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/weights.h"

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
    entry.check_parameter_limit(request.model_options, request.limits);
    // Said before any data are read; the model is built for it only then.
    if (request.train.batch_size < 2)
      train::refuse_batches_of_one(*entry.make(request.model_options, request.limits), request.train.batch_size);
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
  // A run stopped after its last epoch's checkpoint but before its summary
  // (the test split's scores) goes on to write it.
  if (target > done.epoch || done.step_in_epoch > 0 || !std::filesystem::exists(train::RunPaths{dir}.summary()))
    return "";
  return request.command + ": nothing to do: " + dir + " has finished all " + counted(done.epoch, "epoch") +
         "; give {epochs} above " + std::to_string(done.epoch) + " to train further";
}

TrainOutcome run_train_task(const TrainTask& task, train::RunRequest& request, const std::string& dir, bool resume,
                            bool overwrite) {
  const int64_t rank = request.train.parallel.rank;
  std::optional<train::RunFolder> folder;
  if (rank == 0) {
    const auto mode = train::run_folder_mode(resume, overwrite);
    std::vector<InputPath> inputs = task.inputs ? task.inputs(request) : std::vector<InputPath>{};
    inputs.push_back({"init_weights", request.init_weights});
    check_outputs_apart(dir, resume ? "resume" : "out", inputs);
    if (!resume) {
      if (!request.init_weights.empty()) train::check_weights_file(request.init_weights);
      train::RunFolder::check(dir, mode, task.command);
      if (task.check_outputs) task.check_outputs(request, dir, overwrite);
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
  try {
    if (run.fit) {
      outcome.summary = run.fit(dir);
      train::write_fitted_run(request, dir, outcome.summary);
      return outcome;
    }
    auto result = train::execute_run(request, dir, resume, run.splits, run.hooks);
    outcome.interrupted = result.interrupted;
    outcome.summary = std::move(result.summary);
  } catch (...) {
    // Refused before its first write (a model the data make too large, a
    // fit that fails): no folder left holding only a ledger.
    if (folder) folder->release_if_unused();
    throw;
  }
  return outcome;
}

const std::vector<std::string>& resume_keys() {
  static const std::vector<std::string> keys = {"resume", "epochs",     "threads",   "device",
                                                "json",   "world_size", "rank",      "dist_timeout",
                                                "master", "out",        "max_params"};
  return keys;
}

TrainOutcome train_command(const TrainTask& task, const TrainCall& call) {
  std::vector<std::string> given_keys = call.given;
  const auto given = [&given_keys](const std::string& key) {
    return std::find(given_keys.begin(), given_keys.end(), key) != given_keys.end();
  };
  const bool resume = !call.resume.empty();
  train::TrainConfig config = call.train;
  if (task.data_parallel) {
    std::vector<std::string> on_command_line;
    for (const char* key : {"world_size", "rank", "master"})
      if (given(key)) on_command_line.push_back(key);
    config.parallel = distributed::resolve_parallel_options(config.parallel, on_command_line);
  }
  // Rank 0 says what the run reads and does; the others would say it again
  // (naming their own scratch copies of the synthetic data). Errors still
  // come from every rank.
  std::optional<ScopedLineSink> quiet_rank;
  if (config.parallel.rank > 0) quiet_rank.emplace([](const std::string&) {});
  train::RunRequest request;
  if (resume) {
    if (!call.recipe.empty()) given_keys.push_back("recipe");
    for (const auto& key : given_keys)
      if (std::find(resume_keys().begin(), resume_keys().end(), key) == resume_keys().end())
        throw ConfigError(key, "cannot be changed on a resumed run: {resume} " + call.resume +
                                   " keeps its stored settings; only {epochs}, {threads}, {device}, {json}, "
                                   "{max_params} and the data-parallel options may be given with it");
    if (given("out") && call.run.out != call.resume)
      throw ConfigError("out", "differs from {resume} " + call.resume + ", which continues in that folder; drop it");
    // Before anything is read or written through a link or a changed file.
    train::RunFolder::check(call.resume, train::RunFolderMode::Resume, task.command, "resume");
    request = train::stored_request(call.resume, task.command);
    request.limits = call.limits;
    if (given("device")) request.device = call.run.device;
  } else {
    request.seed = call.run.seed;
    request.device = call.run.device;
    request.limits = call.limits;
    request.init_weights = call.init_weights;
    request.train = config;
    request.train.seed = call.run.seed;
    const Recipe* recipe = call.recipe.empty() ? nullptr : &find_recipe(task.command, call.recipe);
    if (recipe) {
      // Keys the recipe sets count as given from here on, as if typed.
      const std::string what = "recipe " + recipe->name;
      request.recipe = apply_recipe(*recipe, {given, [&](const std::string& key, const std::string& value) {
                                                const bool has =
                                                    set_field_from_text(request.train, key, value, what) ||
                                                    (task.set_setting && task.set_setting(key, value, what));
                                                if (has) given_keys.push_back(key);
                                                return has;
                                              }});
    }
    request = new_train_request(task, given, request, call.run.out);
    if (recipe) check_recipe_models(*recipe, {request.model_name});
  }
  const std::string dir = resume ? call.resume : call.run.out;
  request.train.parallel.rank = config.parallel.rank;  // where this process runs now
  request.train.parallel.master = config.parallel.master;
  request.train.parallel.timeout_seconds = config.parallel.timeout_seconds;
  request.train.parallel.backend = config.parallel.backend;
  set_threads(call.run.threads);
  seed_everything(request.seed);
  const c10::Device device = distributed::rank_device(parse_device(request.device), config.parallel);
  if (config.parallel.distributed()) distributed::collective_backend(config.parallel, device);
  TrainOutcome outcome;
  outcome.dir = dir;
  outcome.rank = config.parallel.rank;
  if (resume) {
    train::record_resume(request, dir, given("epochs") ? config.epochs : 0, config.parallel.world_size);
    const auto note = finished_run_note(request, dir, given("epochs"));
    if (!note.empty()) {
      say(note);
      outcome.nothing_to_do = true;
      return outcome;
    }
  } else {
    request.train.parallel.world_size = config.parallel.world_size;
  }
  const int64_t rank = outcome.rank;
  outcome = run_train_task(task, request, dir, resume, call.run.overwrite);
  outcome.dir = dir;
  outcome.rank = rank;
  return outcome;
}

}  // namespace qkv::tasks
