#pragma once
// The contract between models and the trainer: a Module that maps a Batch's
// named inputs to logits ([B, C], or [B, ..., C] for per-point / per-token
// outputs). Models know nothing of files; the registry lets the CLI build any
// model by name from JSON options and says what each takes (its task, its
// inputs, its options with defaults and help), so that help and checks derive
// from it.
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/data/dataset.h"

namespace qkv::models {

class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const data::Batch& batch) = 0;
};
using ModelPtr = std::shared_ptr<Model>;

// One option of a registered model, as `qkv params` shows it.
struct ModelOption {
  std::string key;
  nlohmann::json default_value;  // resolve({})[key]
  std::string help;              // one line
  std::string source;            // where the default comes from, when it matters; may be empty
};

struct ModelEntry {
  std::string name;
  std::string description;
  // What the model is for: one of model_tasks()' names.
  std::string task;
  // The Batch inputs forward() reads with the default options.
  std::vector<std::string> inputs;
  // Every key resolve({}) returns, with its default and help, in help order.
  std::vector<ModelOption> options;
  // Builds the model; options missing from the JSON take their defaults.
  // Unknown keys or bad values throw UsageError.
  std::function<ModelPtr(const nlohmann::json& options)> make;
  // The options the model was built with, defaults filled in (for config.json).
  std::function<nlohmann::json(const nlohmann::json& options)> resolve;

  // The inputs with these options: a model with a boolean "normals" option
  // reads inputs["normals"] exactly when it is true (vnt+n, or vnt-seg with
  // {"normals": true}). Throws UsageError on bad options, as resolve.
  std::vector<std::string> inputs_with(const nlohmann::json& options) const;
};

struct ModelTask {
  std::string name;         // "classification", "segmentation", "lm", "mhca", "spirals"
  std::string description;  // what it is and which command trains it
};
const std::vector<ModelTask>& model_tasks();

const std::vector<ModelEntry>& model_registry();
// Throws UsageError listing the known names.
const ModelEntry& find_model(const std::string& name);

// The names of the task's models, in registry order. std::invalid_argument
// for a task model_tasks() does not name (a wiring mistake, not a user's).
std::vector<std::string> models_for_task(const std::string& task);
// The help of a "--model" option for the task: one line per model, its name
// padded to a column and its description.
std::string model_help(const std::string& task);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace qkv::models
