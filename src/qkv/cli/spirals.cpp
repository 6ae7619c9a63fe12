// qkv spirals train|eval: the trainer's own end-to-end job on built-in data
// (K interleaved spirals, an MLP). It exercises everything a model's train
// command has: splits, checkpoints, resume, reports, weights.
#include <CLI/CLI.hpp>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/tasks/spirals_task.h"

namespace qkv::cli {

void register_spirals(CLI::App& app, Action& action) {
  const auto eval = [](CLI::App* parent, Action& action) {
    add_eval_command(parent, action, "evaluate a spirals checkpoint on its run's split; prints JSON",
                     tasks::evaluate_spirals_run);
  };
  add_command_group(app, action, "spirals", "the trainer's end-to-end demo: an MLP on built-in 2-D spirals",
                    {field_train_command(tasks::spirals_train_task), eval});
}

}  // namespace qkv::cli
