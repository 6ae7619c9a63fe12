// qkv spirals train|eval: the trainer's own end-to-end job on built-in data
// (K interleaved spirals, an MLP). It exercises everything a model's train
// command has: splits, checkpoints, resume, reports, weights.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/tasks/spirals_task.h"

namespace qkv::cli {
namespace {

void register_train(CLI::App* parent, Action& action) { register_train_command(parent, action, tasks::spirals_train_task); }

void register_eval(CLI::App* parent, Action& action) {
  add_eval_command(parent, action, "evaluate a spirals checkpoint on its run's split; prints JSON",
                   tasks::evaluate_spirals_run);
}

}  // namespace

void register_spirals(CLI::App& app, Action& action) {
  add_command_group(app, action, "spirals",
                    "the trainer's end-to-end demo: an MLP on built-in 2-D spirals",
                    {register_train, register_eval});
}

}  // namespace qkv::cli
