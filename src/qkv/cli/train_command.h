#pragma once
// The one train-command skeleton every task's `train` uses: the common and
// training options, --resume, --init-weights, --overwrite and --json; every
// option validated before any file is touched; the run folder claimed
// (core/output_policy.h); the task's data loaded; the run executed
// (train/run.h); a short summary printed.
#include <CLI/CLI.hpp>
#include <functional>
#include <set>
#include <string>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/tasks/task_run.h"
#include "qkv/train/run.h"

namespace qkv::cli {

using tasks::LoadContext;
using tasks::TaskRun;

struct TrainCommand {
  std::string command;      // "vnt train"
  std::string description;  // the subcommand's help line
  std::string default_out;  // "runs/vnt"
  train::TrainConfig defaults;
  // The data decide part of the model's options (MHCA: volume shape, feature
  // count), so they are checked when the data are loaded, not before.
  bool model_options_from_data = false;
  // The task's models have batch norm: --bn-momentum and its decay are offered.
  bool batch_norm = true;
  // Ranks may split its batches (qkv launch): the data-parallel options are
  // offered and read from the environment. false: one process (mhca).
  bool data_parallel = true;
  // What --help shows as --select-metric's default where the data decide it
  // (empty: defaults.select_metric).
  std::string select_metric_shown;
  // Add the task's own options to `cmd`, bound to state the other callbacks
  // share: its data, then its model (each a section of --help).
  std::function<void(CLI::App* cmd)> add_data_options;
  std::function<void(CLI::App* cmd)> add_model_options;
  // A new run: fills request.model_name, model_options and data from the
  // task's options, and validates them (ConfigError / UsageError). Touches no file.
  std::function<void(const CLI::App& cmd, train::RunRequest& request, const std::string& out)> prepare;
  // Optional: the task's own outputs (a synthetic-data folder) checked
  // without writing, before the run folder is claimed.
  std::function<void(const train::RunRequest& request, bool overwrite)> check_outputs;
  // Loads the data from request.data (a new or a resumed run alike); may
  // complete request.data and model_options with what the data decide.
  std::function<TaskRun(train::RunRequest& request, const LoadContext& context)> load;
};

// TrainConfig's batch-norm fields, left out of --help for models without batch norm.
inline const std::set<std::string> kBatchNormFields = {"bn_momentum", "bn_momentum_gamma", "bn_momentum_min"};

void register_train_command(CLI::App* parent, Action& action, TrainCommand spec);

}  // namespace qkv::cli
