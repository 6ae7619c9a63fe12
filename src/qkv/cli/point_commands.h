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

#include "qkv/cli/train_command.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"
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

// UsageError unless the model fits clouds of `points` points: neighbourhoods
// of k points need k points per shape, and one cloud's activations must fit
// in memory; found before any data are loaded or written.
void check_point_model_fits(const std::string& model, const nlohmann::json& options, int64_t points);

// Whether a data settings struct lists class names (classification).
template <typename D, typename = void>
struct has_class_names : std::false_type {};
template <typename D>
struct has_class_names<D, std::void_t<decltype(std::declval<D>().class_names)>> : std::true_type {};

// A point-cloud task's data settings for a new run (Data: ClassificationData
// or PartSegData): the run's seed, normals where the model reads them, the
// synthetic folder inside the run folder unless --synth-dir says otherwise;
// validated and stored as request.data.
template <typename Data>
void prepare_point_data(Data d, train::RunRequest& r, const std::string& out) {
  d.view.seed = r.seed;
  const auto resolved = models::find_model(r.model_name).resolve(r.model_options);
  d.view.use_normals = resolved.value("normals", false);
  check_point_model_fits(r.model_name, r.model_options, d.view.num_points);
  d.copy_view_settings();
  if (d.source == "synthetic" && d.synth_dir.empty()) d.synth_dir = out + "/synthetic";
  d.validate();
  r.data = d.to_json();
}

// The synthetic folder of request.data checked without writing (TrainCommand::check_outputs).
template <typename Data>
void check_point_outputs(const train::RunRequest& r, bool overwrite) {
  const auto d = Data::from_json(r.data);
  d.check_synthetic_dir(d.synth_dir, overwrite);
}

// The data of request.data as tasks::load_point_data loads them, the up
// axis it chose from the layout printed (at rank 0).
template <typename Data>
auto load_point_data(Data& d, const LoadContext& context) {
  std::string up_axis_line;
  auto loaded = tasks::load_point_data(d, context.rank, context.overwrite, &up_axis_line);
  if (context.rank == 0 && !up_axis_line.empty()) std::fprintf(stderr, "%s\n", up_axis_line.c_str());
  return loaded;
}

// Model (in eval mode on `device`), run configuration and data settings of a
// checkpoint made by `command`.
template <typename Data>
struct LoadedPointRun {
  models::ModelPtr model;
  nlohmann::json config;
  Data data;
};
template <typename Data>
LoadedPointRun<Data> load_point_run(const std::string& checkpoint, const c10::Device& device, const char* command) {
  LoadedPointRun<Data> r;
  r.model = train::load_model_from_checkpoint(checkpoint, &r.config, command);
  // The stored settings pass the checks a new run's options pass, and a
  // failure names the checkpoint (it was edited, or made by another version).
  try {
    r.data = Data::from_json(r.config.at("data"));
    const auto& model = r.config.at("model");
    check_point_model_fits(model.at("name"), model.at("options"), r.data.view.num_points);
    if constexpr (has_class_names<Data>::value) {
      const auto classes = models::find_model(model.at("name")).resolve(model.at("options")).value("classes", 0);
      if (classes != static_cast<int64_t>(r.data.class_names.size()))
        throw DataError("the model has " + std::to_string(classes) + " outputs but the run names " +
                        counted(static_cast<int64_t>(r.data.class_names.size()), "class"));
    }
  } catch (const nlohmann::json::exception&) {
    throw DataError(checkpoint + ": stored run configuration is incomplete");
  } catch (const std::runtime_error& e) {  // UsageError, DataError
    throw DataError(checkpoint + ": stored run configuration: " + first_line(e.what()));
  }
  r.model->to(device);
  r.model->eval();
  return r;
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

// `vnt compare` and `seg compare`: one row per finished run of `command`
// (run, model, protocol, parameters), the summary's test entries by rotation
// under `scores_key` as `score` keeps them, and, with shapes > 0, the
// invariance measured on that many test shapes ("invariance"). Runs on the
// same data load (and announce) them once.
template <typename Data>
nlohmann::json compare_point_runs(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                  const c10::Device& device, const char* command, const char* scores_key,
                                  const std::function<nlohmann::json(const nlohmann::json& split)>& score) {
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, decltype(std::declval<const Data&>().load_data())> data_of;
  for (const auto& dir : runs) {
    const auto summary = tasks::read_summary(dir);
    auto run = load_point_run<Data>(train::RunPaths{dir}.best_checkpoint(), device, command);
    const auto test_rotation = tasks::parse_protocol(run.data.protocol).second;
    nlohmann::json row = {{"run", dir},
                          {"model", run.config.at("model").at("name")},
                          {"protocol", run.data.protocol},
                          {"parameters", summary.value("parameters", 0)}};
    nlohmann::json scores = nlohmann::json::object();
    for (const auto& item : summary.items()) {
      const auto& key = item.key();
      if (key == "test") scores[pointcloud::rotation_name(test_rotation)] = score(item.value());
      if (key.rfind("test_", 0) == 0) scores[key.substr(5)] = score(item.value());
    }
    row[scores_key] = scores;
    if (shapes > 0) {
      const auto key = run.data.to_json().dump();
      if (!data_of.count(key)) data_of.emplace(key, run.data.load_data());
      const auto view = tasks::view_of(std::make_shared<const pointcloud::PointCloudSet>(data_of.at(key).test),
                                       run.data.view, false, pointcloud::Rotation::None);
      row["invariance"] = tasks::measure_invariance(*run.model, *view, shapes, 4, seed, device);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace qkv::cli
