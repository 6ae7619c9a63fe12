#pragma once
// Options every command shares, the training options every `train` command
// shares, and the one routine that wires a model and data sets to the trainer.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/train/trainer.h"

namespace qkv::cli {

struct CommonOptions {
  uint64_t seed = 0;
  int threads = 0;  // 0: one per core
  std::string out;
  std::string device = "cpu";
};

// --seed, --threads, --device; --out when out_help is non-empty.
void add_common_options(CLI::App* cmd, CommonOptions& o, const std::string& out_help);

// Applies --threads and --seed, returns the device (UsageError if unavailable).
c10::Device apply_common_options(const CommonOptions& o);

// --epochs, --batch-size, --optimizer, --lr, ... bound to the config, and the
// data-parallel options --world-size, --rank, --master, --dist-timeout.
void add_train_options(CLI::App* cmd, train::TrainConfig& config);

// Completes config.parallel from WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT
// where the command line is silent, and checks it (UsageError). Every train
// command calls it first.
void resolve_parallel(const CLI::App& cmd, train::TrainConfig& config);

struct TrainRequest {
  std::string command;      // "spirals train"
  std::string model_name;   // registry name
  nlohmann::json model_options;
  nlohmann::json data;      // how the data were made or read (for config.json)
  std::string init_weights; // optional .pt dict
  bool resume = false;
};

// The run configuration that config.json and every checkpoint record.
nlohmann::json make_run_config(const TrainRequest& request, const train::TrainConfig& config,
                               const CommonOptions& common);

// Builds the model, trains, prints the summary; returns the exit status
// (0, or 130 after Ctrl-C).
int run_training(const TrainRequest& request, const data::Splits& splits, const train::TrainConfig& config,
                 const CommonOptions& common, train::TrainHooks hooks = {});

// --resume DIR: adopts the stored run's folder, seed, model options and
// training settings (only --epochs may be changed on the command line) and
// returns the stored configuration, whose "data" the command rebuilds from.
nlohmann::json adopt_resumed_run(const std::string& dir, const CLI::App& cmd, CommonOptions& common,
                                 train::TrainConfig& config, TrainRequest& request);

// Builds a registered model from a checkpoint's run configuration and loads
// its weights. With expected_command, a checkpoint made by another command
// ("spirals train", "lm train") is a DataError naming the file.
models::ModelPtr load_model_from_checkpoint(const std::string& checkpoint, nlohmann::json* run_config = nullptr,
                                            const std::string& expected_command = "");

// The options of every `eval` command: --checkpoint, --split, and the common ones.
struct EvalOptions {
  CommonOptions common;
  std::string checkpoint;
  std::string split = "test";
};
void add_eval_options(CLI::App* cmd, EvalOptions& o);
const data::DatasetPtr& pick_split(const data::Splits& splits, const std::string& name);

}  // namespace qkv::cli
