#pragma once
// What the point-cloud tasks (classification, part segmentation) share about
// runs: a new run's data settings, a finished run's model and settings read
// back from its checkpoint, and the comparison of finished runs.
#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"
#include "qkv/tasks/point_task.h"
#include "qkv/tasks/task_run.h"
#include "qkv/tasks/train_task.h"
#include "qkv/train/run.h"

namespace qkv::tasks {

// ConfigError ("points") unless the model fits clouds of `points` points: neighbourhoods
// of k points need k points per shape, and one cloud's activations must fit
// in memory, and its parameters within `limits`; found before any data are
// loaded or written.
void check_point_model_fits(const std::string& model, const nlohmann::json& options, int64_t points,
                            const models::ModelLimits& limits);

// Whether a data settings struct lists class names (classification).
template <typename D, typename = void>
struct has_class_names : std::false_type {};
template <typename D>
struct has_class_names<D, std::void_t<decltype(std::declval<D>().class_names)>> : std::true_type {};

// The model option point_features of a new run: the channels of the data's
// point_features list (ConfigError when the model reads none, or when its
// options already say another number).
void set_point_feature_channels(const std::string& list, train::RunRequest& r, const nlohmann::json& resolved);

// A point-cloud task's data settings for a new run (Data: ClassificationData
// or PartSegData): the run's seed, normals where the model reads them, the
// model's feature channels from the data's point features, the synthetic
// folder inside the run folder (recorded empty) unless synth_dir names
// another (recorded absolute), a data folder recorded absolute (so that a
// run resumes from anywhere); validated and stored as request.data.
template <typename Data>
void prepare_point_data(Data d, train::RunRequest& r, const std::string& out) {
  d.view.seed = r.seed;
  const auto resolved = models::find_model(r.model_name).resolve(r.model_options);
  d.view.use_normals = resolved.value("normals", false);
  set_point_feature_channels(d.view.point_features, r, resolved);
  check_point_model_fits(r.model_name, r.model_options, d.view.num_points, r.limits);
  d.copy_view_settings();
  if (d.source == "synthetic" && !d.synth_dir.empty()) d.synth_dir = absolute_normal_path(d.synth_dir);
  if (d.source != "synthetic") d.source = absolute_normal_path(d.source);
  d.validate();
  r.data = d.to_json();
}

// The synthetic folder of request.data for a run in `dir`, checked without writing (TrainCommand::check_outputs).
template <typename Data>
void check_point_outputs(const train::RunRequest& r, const std::string& dir, bool overwrite) {
  const auto d = Data::from_json(r.data);
  if (d.source == "synthetic" && !d.synth_dir.empty()) check_synth_dir_apart_from_run(d.synth_dir, dir);
  d.check_synthetic_dir(d.synthetic_dir_of_run(dir), overwrite);
}

// Model (in eval mode on `device`), run configuration and data settings of a
// checkpoint made by `command`.
template <typename Data>
struct LoadedPointRun {
  models::ModelPtr model;
  nlohmann::json config;
  Data data;
};

// The data settings a checkpoint's run configuration stores, after the
// checks a new run's options pass (the model fits the points, the classes
// match the outputs); DataError naming the checkpoint.
template <typename Data>
Data checked_stored_point_data(const train::CheckpointFile& checkpoint, const nlohmann::json& config) {
  // The stored settings pass the checks a new run's options pass, and a
  // failure names the checkpoint (it was edited, or made by another version).
  try {
    Data data = Data::from_json(config.at("data"));
    data.locate_stored_synthetic_dir(checkpoint.path);
    const auto& model = config.at("model");
    check_point_model_fits(model.at("name"), model.at("options"), data.view.num_points, checkpoint.limits);
    if constexpr (has_class_names<Data>::value) {
      const auto classes = models::find_model(model.at("name")).resolve(model.at("options")).value("classes", 0);
      if (classes != static_cast<int64_t>(data.class_names.size()))
        throw DataError("the model has " + std::to_string(classes) + " outputs but the run names " +
                        counted(static_cast<int64_t>(data.class_names.size()), "class"));
    }
    return data;
  } catch (const nlohmann::json::exception&) {
    throw DataError(checkpoint.path + ": stored run configuration is incomplete");
  } catch (const std::runtime_error& e) {  // UsageError, DataError
    throw DataError(checkpoint.path + ": stored run configuration: " + first_line(e.what()));
  }
}

template <typename Data>
LoadedPointRun<Data> load_point_run(const train::CheckpointFile& checkpoint, const c10::Device& device,
                                    const char* command) {
  LoadedPointRun<Data> r;
  r.model = train::load_model_from_checkpoint(checkpoint, &r.config, command);
  r.data = checked_stored_point_data<Data>(checkpoint, r.config);
  r.model->to(device);
  r.model->eval();
  return r;
}

// `vnt compare` and `seg compare`: one row per finished run of `command`
// (run, model, protocol, parameters), the summary's test entries by rotation
// under `scores_key` as `score` keeps them, and, with shapes > 0, the
// invariance measured on that many test shapes ("invariance"). Runs on the
// same data load (and announce) them once. A run's model is refused above
// limits.max_parameters before it is built.
template <typename Data>
nlohmann::json compare_point_runs(const std::vector<std::string>& runs, int64_t shapes, uint64_t seed,
                                  const models::ModelLimits& limits, const c10::Device& device, const char* command,
                                  const char* scores_key,
                                  const std::function<nlohmann::json(const nlohmann::json& split)>& score) {
  field_range_checker()(invariance_shapes_field(""), shapes);
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, decltype(std::declval<const Data&>().load_data())> data_of;
  for (const auto& dir : runs) {
    const auto summary = read_summary(dir);
    train::CheckpointFile best(train::RunPaths{dir}.best_checkpoint());
    best.limits = limits;
    auto run = load_point_run<Data>(best, device, command);
    const auto test_rotation = parse_protocol(run.data.protocol).second;
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
      const auto view = view_of(std::make_shared<const pointcloud::PointCloudSet>(data_of.at(key).test), run.data.view,
                                false, pointcloud::Rotation::None);
      row["invariance"] = measure_invariance(*run.model, *view, shapes, 4, seed, device);
    }
    rows.push_back(row);
  }
  return rows;
}

// How many test shapes the rows' invariance was measured on: the count
// each run measured (its test split may hold fewer than `asked`), "2 to 4"
// where runs differ; `asked` where none was measured.
std::string invariance_shapes_text(const nlohmann::json& rows, int64_t asked);

// The table of `vnt compare` and `seg compare` (rows of compare_point_runs):
// run, model, `protocol(row)`, parameters, the `score_headers` columns
// `scores(row[scores_key])` fills, the largest logit change ("-" without the
// invariance measurement); then `note` unless empty.
std::string compare_table_text(const nlohmann::json& rows, const char* scores_key,
                               const std::function<std::string(const nlohmann::json& row)>& protocol,
                               const std::vector<std::string>& score_headers,
                               const std::function<std::vector<std::string>(const nlohmann::json& scores)>& scores,
                               const std::string& note);

// The train task both point-cloud tasks are (Settings: {data, model}): the
// paper's training defaults (the view's set into settings->data), the model
// from its settings with `fix_model(options)` adding what the data set fixes,
// the data prepared, checked and loaded (the up axis it chose said at rank
// 0), the splits with their extra test rotations; finish(request, data, loaded, splits, context,
// run) completes the data record and the run's hooks.
template <typename Settings, typename FixModel, typename Finish>
TrainTask point_train_task(std::shared_ptr<Settings> s, const char* command, const std::string& description,
                           const std::string& default_out, FixModel fix_model, Finish finish) {
  using Data = std::decay_t<decltype(s->data)>;
  TrainTask task;
  task.command = command;
  task.description = description;
  task.default_out = default_out;
  set_paper_training_defaults(task.defaults, s->data.view);
  task.prepare = [s, fix_model](const GivenSetting&, train::RunRequest& r, const std::string& out) {
    r.model_name = s->model.model;
    r.model_options = point_model_options(s->model);
    fix_model(r.model_options);
    prepare_point_data(s->data, r, out);
  };
  task.set_setting = [s](const std::string& key, const std::string& value, const std::string& what) {
    return set_field_from_text(s->data, key, value, what) || set_field_from_text(s->model, key, value, what);
  };
  task.check_outputs = check_point_outputs<Data>;
  task.inputs = [](const train::RunRequest& r) {
    const auto d = Data::from_json(r.data);
    return std::vector<InputPath>{{"source", d.source == "synthetic" ? "" : d.source}};
  };
  task.load = [finish](train::RunRequest& r, const LoadContext& context) {
    auto d = Data::from_json(r.data);
    std::string up_axis_line;
    const auto loaded = load_point_data(d, context.run_dir, context.rank, context.overwrite, &up_axis_line);
    if (context.rank == 0 && !up_axis_line.empty()) say(up_axis_line);
    const auto splits = make_splits(d, loaded);
    TaskRun run;
    run.splits = splits.splits;
    run.hooks.extra_tests = splits.extra_tests;
    run.test_label = pointcloud::rotation_name(parse_protocol(d.protocol).second);
    finish(r, d, loaded, splits, context, run);
    r.data = d.to_json();
    return run;
  };
  return task;
}

}  // namespace qkv::tasks
