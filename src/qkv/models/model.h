#pragma once
// The contract between models and the trainer: a Module that maps a Batch's
// named inputs to logits ([B, C], or [B, ..., C] for per-point / per-token
// outputs). Models know nothing of files; the registry lets the CLI build any
// model by name from JSON options.
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

struct ModelEntry {
  std::string name;
  std::string description;
  // Builds the model; options missing from the JSON take their defaults.
  // Unknown keys or bad values throw UsageError.
  std::function<ModelPtr(const nlohmann::json& options)> make;
  // The options the model was built with, defaults filled in (for config.json).
  std::function<nlohmann::json(const nlohmann::json& options)> resolve;
};

const std::vector<ModelEntry>& model_registry();
// Throws UsageError listing the known names.
const ModelEntry& find_model(const std::string& name);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace qkv::models
