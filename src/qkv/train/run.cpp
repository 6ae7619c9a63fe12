#include "qkv/train/run.h"

#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"
#include "qkv/core/version.h"
#include "qkv/distributed/process_group.h"
#include "qkv/runtime/runtime.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/progress.h"
#include "qkv/train/report.h"
#include "qkv/train/result_warnings.h"
#include "qkv/train/weights.h"

namespace qkv::train {

namespace fs = std::filesystem;

bool is_registered_model(const std::string& name) {
  for (const auto& entry : models::model_registry())
    if (entry.name == name) return true;
  return false;
}

namespace {

// Registered models record their options with the defaults filled in; a
// name outside the registry (a run of another version) keeps them as given.
nlohmann::json resolved_options(const RunRequest& r) {
  return is_registered_model(r.model_name) ? models::find_model(r.model_name).resolve(r.model_options)
                                           : r.model_options;
}

}  // namespace

nlohmann::json run_config(const RunRequest& r) {
  nlohmann::json config = {{"qkv_version", qkv_version()},
                           {"command", r.command},
                           {"seed", r.seed},
                           {"threads", at::get_num_threads()},
                           {"blas", blas_info()},
                           {"device", r.device},
                           {"model", {{"name", r.model_name}, {"options", resolved_options(r)}}},
                           {"data", r.data},
                           {"train", r.train.to_json()},
                           {"init_weights", r.init_weights},
                           {"resumes", r.resumes}};
  if (!r.recipe.is_null()) config["recipe"] = r.recipe;
  return config;
}

TrainConfig effective_train_config(const RunRequest& r) {
  TrainConfig config = r.train;
  if (!r.resumes.empty()) config.epochs = r.resumes.back().value("epochs", config.epochs);
  return config;
}

RunRequest stored_request(const std::string& dir, const std::string& command) {
  const std::string ckpt = RunPaths{dir}.last_checkpoint();
  if (!std::filesystem::exists(ckpt)) throw ConfigError("resume", dir + ": no checkpoint at " + ckpt);
  const auto stored = read_checkpoint_config(ckpt);
  if (stored.value("command", "") != command)
    throw ConfigError("resume",
                      dir + ": that run was made by '" + stored.value("command", "?") + "', not '" + command + "'");
  RunRequest r;
  try {
    r.command = command;
    r.model_name = stored.at("model").at("name");
    r.model_options = stored.at("model").at("options");
    r.data = stored.at("data");
    r.seed = stored.at("seed");
    r.device = stored.value("device", "cpu");
    r.train = TrainConfig::from_json(stored.at("train"));
    r.resumes = stored.value("resumes", nlohmann::json::array());
    if (stored.contains("recipe")) r.recipe = stored.at("recipe");
  } catch (const nlohmann::json::exception& e) {
    throw DataError(ckpt + ": stored run configuration is incomplete (" + e.what() + ")");
  }
  return r;
}

void record_resume(RunRequest& r, const std::string& dir, int64_t epochs, int64_t world_size) {
  check_resume_world_size(dir, r.train.parallel.world_size, world_size);
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  r.resumes.push_back({{"qkv_version", qkv_version()},
                       {"time", when},
                       {"epochs", epochs > 0 ? epochs : effective_train_config(r).epochs},
                       {"threads", at::get_num_threads()}});
}

TrainResult execute_run(const RunRequest& r, const std::string& dir, bool resume, const data::Splits& splits,
                        TrainHooks hooks, models::ModelPtr* trained) {
  TrainConfig config = effective_train_config(r);
  config.seed = r.seed;
  config.validate();
  const c10::Device device = distributed::rank_device(parse_device(r.device), config.parallel);
  const auto& entry = models::find_model(r.model_name);
  // Points per cloud or tokens per window, where the task has them.
  int64_t length = 1;
  for (const char* key : {"points", "context"})
    if (r.data.is_object() && r.data.contains(key) && r.data.at(key).is_number_integer())
      length = std::max<int64_t>(1, r.data.at(key).get<int64_t>());
  models::check_activation_memory(entry, r.model_options, length, config.batch_size, r.limits);
  auto model = entry.make(r.model_options, r.limits);
  if (!r.init_weights.empty()) load_weights(*model, r.init_weights);
  // Refusals that need the model and the data, before the first line of the run.
  plan_training_batches(*model, splits, config, config.parallel.world_size, hooks.metrics);
  const nlohmann::json config_json = run_config(r);
  hooks.live_progress = ProgressBar::stderr_is_terminal();
  if (hooks.title == "qkv run") hooks.title = "qkv " + r.command + ": " + r.model_name;
  install_interrupt_handler();
  std::unique_ptr<distributed::ProcessGroup> group;
  if (config.parallel.distributed()) {
    group = std::make_unique<distributed::ProcessGroup>(config.parallel, device);
    hooks.group = group.get();
  }
  const bool writer = config.parallel.rank == 0;
  if (writer && !hooks.quiet)
    say_as_is(r.command + ": model " + r.model_name + " (" + std::to_string(models::count_parameters(*model)) +
              " parameters), " + std::to_string(splits.train->size()) + " train / " +
              std::to_string(splits.val ? splits.val->size() : 0) + " val / " +
              std::to_string(splits.test ? splits.test->size() : 0) + " test, " +
              counted(at::get_num_threads(), "thread") + ", " + blas_summary());
  if (group && writer)
    say_as_is(r.command + ": " + std::to_string(config.parallel.world_size) + " ranks joined at " +
              config.parallel.master + ", batch " + std::to_string(config.batch_size) + " per rank (" +
              std::to_string(config.batch_size * config.parallel.world_size) + " global)");
  auto result = train(*model, splits, config, device, dir, config_json, resume, hooks);
  if (trained) *trained = model;
  return result;
}

void write_fitted_run(const RunRequest& request, const std::string& dir, const nlohmann::json& summary) {
  const RunPaths paths{dir};
  write_file_atomic(paths.config(), json_text(run_config(request)) + "\n");
  write_file_atomic(paths.summary(), json_text(summary) + "\n");
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::path given(path);
  if (fs::is_directory(given, ec)) {
    for (const char* inside : {"checkpoints/best.ckpt", "xgboost.json"})
      if (fs::is_regular_file(given / inside, ec)) return (given / inside).string();
    throw UsageError(path + " is a folder without checkpoints/best.ckpt (give a run folder or a checkpoint file)");
  }
  if (!fs::exists(given, ec)) throw UsageError(path + ": no such file");
  return path;
}

void export_checkpoint_weights(const CheckpointFile& checkpoint, const std::string& output, bool overwrite) {
  check_outputs_apart(output, "output", {{"checkpoint", checkpoint.path}});
  check_output_file(output, "output", overwrite, "export-weights");
  const auto model = load_model_from_checkpoint(checkpoint);
  const auto claim = claim_output_file(output, "output", overwrite, {"export-weights", {}});
  export_weights(*model, output);
}

models::ModelPtr load_model_from_checkpoint(const CheckpointFile& file, nlohmann::json* run_config,
                                            const std::string& expected_command) {
  const std::string& checkpoint = file.path;
  auto config = read_checkpoint_config(checkpoint);
  if (!expected_command.empty() && config.value("command", "") != expected_command) {
    const std::string made_by = config.value("command", "?");
    const std::string family = made_by.substr(0, made_by.find(' '));  // "seg train" -> qkv seg eval / predict
    throw DataError(checkpoint + ": made by '" + made_by + "', not by '" + expected_command + "'" +
                    (made_by == "?" ? "" : " (read it with 'qkv " + family + " ...')"));
  }
  models::ModelPtr model;
  try {
    model = models::find_model(config.at("model").at("name").get<std::string>())
                .make(config.at("model").at("options"), file.limits);
  } catch (const nlohmann::json::exception&) {
    throw DataError(checkpoint + ": checkpoint does not name its model");
  } catch (const UsageError& e) {  // options a new run could not have: edited, or another version's
    throw DataError(checkpoint + ": stored model: " + first_line(e.what()));
  }
  load_checkpoint(checkpoint, *model, nullptr, file.allow_non_finite);
  if (run_config) *run_config = config;
  return model;
}

namespace {

// The metrics a person looks at first, in this order, where a task has them
// (at most four).
std::string headline(const nlohmann::json& metrics) {
  static const char* const keys[] = {"accuracy",    "instance_miou", "class_miou",        "exact_match", "auroc",
                                     "sensitivity", "specificity",   "balanced_accuracy", "loss"};
  std::string line;
  int shown = 0;
  for (const char* key : keys) {
    if (shown == 4 || !metrics.contains(key) || !metrics.at(key).is_number()) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.4f", line.empty() ? "" : ", ", key, metrics.at(key).get<double>());
    line += buf;
    ++shown;
  }
  return line;
}

}  // namespace

std::string run_summary_text(const nlohmann::json& s, const std::string& dir, const std::string& test_label) {
  std::string text;
  char buf[256];
  if (s.contains("selected_epoch")) {
    std::snprintf(buf, sizeof buf, "selected epoch %lld of %lld (%s)%s\n",
                  static_cast<long long>(s.value("selected_epoch", int64_t{0})),
                  static_cast<long long>(s.value("epochs", int64_t{0})), s.value("selected_by", "?").c_str(),
                  s.value("stopped_early", false) ? ", stopped early" : "");
    text += buf;
  }
  if (s.contains("val")) text += "  val          " + headline(s.at("val")) + "\n";
  for (const auto& item : s.items()) {
    const std::string& key = item.key();
    if (key != "test" && key.rfind("test_", 0) != 0) continue;
    std::string label = split_label(key, test_label);
    label.resize(std::max<size_t>(label.size(), 12), ' ');
    text += "  " + label + " " + headline(item.value()) + "\n";
  }
  for (const auto& w : summary_warnings(s, test_label)) text += "warning: " + w + "\n";
  std::string files;
  for (const char* name : {"summary.json", "report.html", "checkpoints/best.ckpt", "xgboost.json"})
    if (std::filesystem::exists(std::filesystem::path(dir) / name))
      files += (files.empty() ? "" : ", ") + std::string(name);
  text += "run folder " + dir + (files.empty() ? "" : " (" + files + ")") + "\n";
  return text;
}

RunFolderMode run_folder_mode(bool resume, bool overwrite) {
  if (resume && overwrite) throw ConfigError("resume", "continues {out}; drop {overwrite}");
  return resume ? RunFolderMode::Resume : overwrite ? RunFolderMode::Overwrite : RunFolderMode::New;
}

void RunFolder::check(const std::string& dir, RunFolderMode mode, const std::string& command, const std::string& key) {
  if (mode == RunFolderMode::Resume)
    verify_output_dir(dir, key, command);
  else
    check_output_dir(dir, key, mode == RunFolderMode::Overwrite, command);
  // A user's report.html there would be found when the run writes it, at its end.
  check_names_writable(dir, key, RunPaths::names());
}

RunFolder RunFolder::open(const std::string& dir, RunFolderMode mode, const std::string& command,
                          const std::string& key) {
  check_names_writable(dir, key, RunPaths::names());
  RunFolder folder;
  folder.paths_.dir = dir;
  folder.mode_ = mode;
  if (mode == RunFolderMode::Resume) {
    folder.claim_ = adopt_output_dir(dir, key, command);
  } else {
    std::error_code ec;  // claim_output_dir makes check()'s refusals before it creates anything
    folder.created_ = !std::filesystem::exists(dir, ec);
    folder.claim_ = claim_output_dir(dir, key, mode == RunFolderMode::Overwrite, {command, {}});
  }
  return folder;
}

void RunFolder::release_if_unused() noexcept {
  if (mode_ != RunFolderMode::Resume) claim_.release_if_unused(created_);
}

}  // namespace qkv::train
