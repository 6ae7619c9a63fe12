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
void register_point_train(CLI::App* parent, Action& action, TrainTask (*make_task)(std::shared_ptr<Settings>),
                          const char* model_task) {
  auto s = std::make_shared<Settings>();
  const auto add_data = [s](CLI::App* cmd) {
    add_field_options(cmd, s->data);
    accept_axis_names(cmd);
  };
  register_train_command(parent, action, make_task(s), add_data,
                         [s, model_task](CLI::App* cmd) { add_point_model_options(cmd, s->model, model_task); });
}

// `vnt compare` / `seg compare`: the options, the rows `compare(runs,
// shapes, seed, device)` makes, then --json or the table `text(rows, shapes)`.
using ComparePointRuns = nlohmann::json (*)(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                            const c10::Device& device);
using CompareText = std::string (*)(const nlohmann::json& rows, int64_t shapes);
void register_point_compare(CLI::App* parent, Action& action, const std::string& description,
                            const char* train_command, int64_t default_shapes, ComparePointRuns compare,
                            CompareText text);

}  // namespace qkv::cli
