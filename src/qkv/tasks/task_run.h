#pragma once
// A task's side of a training run: what loading its data is told
// (LoadContext) and what it gives back (TaskRun). A front end (the CLI's train
// skeleton, cli/train_command.h) opens the run folder, calls the task's load
// and executes the run (train/run.h).
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/data/dataset.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

// What a task's load gives the run.
struct TaskRun {
  data::Splits splits;
  train::TrainHooks hooks;
  std::string test_label;  // how the summary names the "test" metrics (e.g. the protocol's test rotation)
  // A model fitted without the trainer (XGBoost): fits into the run folder and
  // returns the summary; the skeleton records config.json and summary.json.
  std::function<nlohmann::json(const std::string& dir)> fit;
};

struct LoadContext {
  int64_t rank = 0;
  bool overwrite = false;
  bool resume = false;
  std::string run_dir;
};

}  // namespace qkv::tasks
