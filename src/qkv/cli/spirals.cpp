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

void register_train(CLI::App* parent, Action& action) {
  auto s = std::make_shared<tasks::SpiralsTrainSettings>();
  register_train_command(
      parent, action, tasks::spirals_train_task(s),
      [s](CLI::App* cmd) { add_field_options(cmd, s->data); },
      [s](CLI::App* cmd) { add_field_options(cmd, s->model); });
}

void register_eval(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand("eval", "evaluate a spirals checkpoint on its run's split; prints JSON");
  auto o = std::make_shared<EvalOptions>();
  add_eval_options(cmd, *o);
  on_run(cmd, action, [o] {
    print_json(tasks::evaluate_spirals_run(o->checkpoint, o->split, apply_run_options(o->common)));
    return 0;
  });
}

}  // namespace

void register_spirals(CLI::App& app, Action& action) {
  add_command_group(app, action, "spirals",
                    "the trainer's end-to-end demo: an MLP on built-in 2-D spirals",
                    {register_train, register_eval});
}

}  // namespace qkv::cli
