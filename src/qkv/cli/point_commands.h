#pragma once
// What `qkv vnt` and `qkv seg` share on the command line: the model choice,
// the up axis's names, compare.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/tasks/point_task.h"

namespace qkv::cli {

// --model (one of the registry's models for `task`) and the model's fields.
void add_point_model_options(CLI::App* cmd, tasks::PointModelSettings& o, const std::string& task);

// --up-axis (added by the data fields) also takes x, y, z, layout and auto.
void accept_axis_names(CLI::App* cmd);

// `vnt train` / `seg train`: the task made by `make_task(settings)`, the
// data fields with the up axis's names, the models of `model_task`.
template <typename Settings>
RegisterCommand point_train_command(TrainTask (*make_task)(std::shared_ptr<Settings>), const char* model_task) {
  return [make_task, model_task](CLI::App* parent, Action& action) {
    auto s = std::make_shared<Settings>();
    const auto add_data = [s](CLI::App* cmd) {
      add_field_options(cmd, s->data);
      accept_axis_names(cmd);
    };
    register_train_command(parent, action, make_task(s), add_data,
                           [s, model_task](CLI::App* cmd) { add_point_model_options(cmd, s->model, model_task); });
  };
}

// The eval settings of `vnt eval` / `seg eval` as parsed, with their
// checkpoint and seed; and the --split option they add.
inline tasks::PointEvalSettings point_eval_settings(const CommandOptions<tasks::PointEvalSettings>& o) {
  auto s = o.settings;
  s.checkpoint = o.checkpoint;
  s.seed = o.run.seed;
  return s;
}
inline void add_point_eval_split(CLI::App* cmd, CommandOptions<tasks::PointEvalSettings>& o) {
  add_split_option(cmd, o.settings.split);
}

// `vnt compare` / `seg compare`: the options, the rows `compare.rows` makes,
// then --json or the table `compare.text` makes of them.
RegisterCommand point_compare_command(const tasks::PointCompare& compare);

}  // namespace qkv::cli
