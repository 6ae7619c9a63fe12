#pragma once
// The one train-command skeleton every task's `train` uses: the common and
// training options, --resume, --init-weights, --overwrite and --json; every
// option validated before any file is touched; the run folder claimed
// (core/output_policy.h); the task's data loaded; the run executed
// (train/run.h); a short summary printed.
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/tasks/task_run.h"
#include "qkv/tasks/train_task.h"
#include "qkv/train/run.h"

namespace qkv::cli {

using tasks::LoadContext;
using tasks::TaskRun;

using tasks::TrainTask;

// TrainConfig's batch-norm fields, left out of --help for models without batch norm.
inline const std::set<std::string> kBatchNormFields = {"bn_momentum", "bn_momentum_gamma", "bn_momentum_min"};

// `train` for `task`: the run, data, model, training and data-parallel
// options (the task adds its data and model options, each a section of
// --help), then tasks::train_command and a short summary.
void register_train_command(CLI::App* parent, Action& action, TrainTask task,
                            const std::function<void(CLI::App* cmd)>& add_data_options,
                            const std::function<void(CLI::App* cmd)>& add_model_options);

// The `train` of a task made by `make_task(settings)` whose settings' `data`
// and `model` are field lists (lm, spirals).
template <typename Settings>
RegisterCommand field_train_command(TrainTask (*make_task)(std::shared_ptr<const Settings>)) {
  return [make_task](CLI::App* parent, Action& action) {
    auto s = std::make_shared<Settings>();
    register_train_command(
        parent, action, make_task(s), [s](CLI::App* cmd) { add_field_options(cmd, s->data); },
        [s](CLI::App* cmd) { add_field_options(cmd, s->model); });
  };
}

}  // namespace qkv::cli
