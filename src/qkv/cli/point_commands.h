#pragma once
// What `qkv vnt` and `qkv seg` share on the command line: the model choice
// and its size flags, turned into registry options.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qkv/cli/common.h"
#include "qkv/cli/train_command.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"
#include "qkv/tasks/point_runs.h"
#include "qkv/tasks/point_task.h"
#include "qkv/train/run.h"

namespace qkv::cli {

struct PointModelOptions {
  std::string model;
  std::string model_options = "{}";
  int64_t linear_dim = 0, heads = 0, head_dim = 0;
};

// --model (one of the registry's models for `task`), --linear-dim, --heads,
// --head-dim (the paper's values in the help), --model-options.
void add_point_model_options(CLI::App* cmd, PointModelOptions& o, const std::string& task, int64_t paper_linear_dim,
                             int64_t paper_heads);

// --up-axis (added by the data fields) also takes x, y, z, layout and auto.
void accept_axis_names(CLI::App* cmd);

// --model-options as JSON plus the size flags that are set (> 0). A flag
// applies where the model has that option (the registry's defaults say);
// otherwise a UsageError names it.
nlohmann::json model_options_from_cli(const PointModelOptions& o);

// The data of request.data as tasks::load_point_data loads them, the up
// axis it chose from the layout printed (at rank 0).
template <typename Data>
auto load_point_data(Data& d, const LoadContext& context) {
  std::string up_axis_line;
  auto loaded = tasks::load_point_data(d, context.rank, context.overwrite, &up_axis_line);
  if (context.rank == 0 && !up_axis_line.empty()) std::fprintf(stderr, "%s\n", up_axis_line.c_str());
  return loaded;
}

// The options of `vnt compare` and `seg compare`: the run folders, the test
// shapes of the invariance measurement, --json and the common options.
struct CompareOptions {
  CommonOptions common;
  std::vector<std::string> runs;
  int64_t shapes = 0;
  bool json = false;
};
void add_compare_options(CLI::App* cmd, CompareOptions& o, const std::string& train_command, int64_t default_shapes);

// `vnt compare` / `seg compare` for the runs of `train_command`: the
// options, one row per run (tasks::compare_point_runs, each test entry as
// `score` keeps it under `scores_key`), then --json or `print(rows, shapes)`.
template <typename Data>
void register_point_compare(CLI::App* parent, Action& action, const std::string& description,
                            const char* train_command, int64_t default_shapes, const char* scores_key,
                            std::function<nlohmann::json(const nlohmann::json& split)> score,
                            std::function<void(const nlohmann::json& rows, int64_t shapes)> print) {
  auto* cmd = parent->add_subcommand("compare", description);
  auto o = std::make_shared<CompareOptions>();
  add_compare_options(cmd, *o, train_command, default_shapes);
  cmd->callback([o, train_command, scores_key, score, print, &action] {
    action = [o, train_command, scores_key, score, print] {
      const c10::Device device = apply_common_options(o->common);
      const auto rows = tasks::compare_point_runs<Data>(o->runs, o->shapes, o->common.seed, device, train_command,
                                                        scores_key, score);
      if (o->json)
        print_json(rows);
      else
        print(rows, o->shapes);
      return 0;
    };
  });
}

// The table of `vnt compare` and `seg compare` (rows of
// tasks::compare_point_runs): run, model, `protocol(row)`, parameters, the
// `score_headers` columns `scores(row[scores_key])` fills, the largest logit
// change ("-" without the invariance measurement); then `note` unless empty.
void print_compare_table(const nlohmann::json& rows, const char* scores_key,
                         const std::function<std::string(const nlohmann::json& row)>& protocol,
                         const std::vector<std::string>& score_headers,
                         const std::function<std::vector<std::string>(const nlohmann::json& scores)>& scores,
                         const std::string& note);

}  // namespace qkv::cli
