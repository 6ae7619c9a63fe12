#pragma once
// The contract between models and the trainer: a Module that maps a Batch's
// named inputs to logits ([B, C], or [B, ..., C] for per-point / per-token
// outputs). Models know nothing of files; the registry lets the CLI build any
// model by name from JSON options and says what each takes (its task, its
// inputs, its options with defaults and help), so that help and checks derive
// from it.
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/data/dataset.h"

namespace qkv::models {

// The attention weights of one forward, each attention layer's in order:
// [B, H, N, N] where every point attends to every point; [B, H, N, k] for
// local attention, whose columns are the points keys[b, i, :] ([B, N, k]).
struct AttentionMaps {
  std::vector<at::Tensor> layers;
  at::Tensor keys;  // undefined where every point is a key
};

class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const data::Batch& batch) = 0;
  // The per-sample embedding the classification head reads, [B, F]: for the
  // VN point-cloud classifiers the pooled rotation-invariant features. Models
  // that have none refuse (UsageError).
  virtual at::Tensor features(const data::Batch& batch);
  // The attention weights of the forward on `batch` (AttentionMaps); models
  // without self-attention over the points refuse (UsageError).
  virtual AttentionMaps attention_maps(const data::Batch& batch);
};
using ModelPtr = std::shared_ptr<Model>;

// One option of a registered model, as `qkv params` shows it.
struct ModelOption {
  std::string key;
  nlohmann::json default_value;  // resolve({})[key]
  std::string help;              // one line
  std::string source;            // where the default comes from, when it matters; may be empty
};

// The most parameters a model may have before it is built (--max-params):
// 2^28 by default, 1 GiB of float32 weights (our choice: 4 GiB with Adam's
// two moments and the gradient, a sixth of this 24 GiB class of machine).
inline constexpr int64_t kDefaultMaxParameters = int64_t{1} << 28;

// What a model may cost, as the front end was told (--max-params, or
// qkv.models.set_max_parameters()); passed to every build, never global.
struct ModelLimits {
  int64_t max_parameters = kDefaultMaxParameters;
};

// What a model costs, from its options alone (no tensor is allocated).
struct ModelSize {
  int64_t parameters = 0;         // exactly count_parameters() of the built model
  int64_t activation_floats = 0;  // estimate: float values one sample's forward pass keeps for backward
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
  // Builds the model, unchecked: make() is the way in.
  std::function<ModelPtr(const nlohmann::json& options)> build;
  // The options the model was built with, defaults filled in (for config.json).
  std::function<nlohmann::json(const nlohmann::json& options)> resolve;
  // The size with these options for one sample of `points` points (point-cloud
  // models; the LM takes it as its sequence length, the task's context, since
  // its options have none; MHCA uses its volume_shape, the MLP its feature
  // count). Overflow-checked: a count that does not fit in int64 saturates at
  // INT64_MAX (std::numeric_limits<int64_t>::max()). Throws UsageError on bad
  // options, as resolve, and on points < 1 for the models that use it.
  std::function<ModelSize(const nlohmann::json& options, int64_t points)> size;
  // False for a model that is not a torch module (the XGBoost baseline): its
  // task trains it by its own code, make() refuses, size() counts nothing.
  bool network = true;

  // The inputs with these options: a model with a boolean "normals" option
  // reads inputs["normals"] exactly when it is true (vnt+n, or vnt-seg with
  // {"normals": true}). Throws UsageError on bad options, as resolve.
  std::vector<std::string> inputs_with(const nlohmann::json& options) const;
  // Whether forward() reads `input` with the default options.
  bool reads(const std::string& input) const;

  // UsageError (check_parameter_count) when these options make a model of
  // more parameters than limits.max_parameters, or bad options; nothing is
  // built or allocated.
  void check_parameter_limit(const nlohmann::json& options, const ModelLimits& limits) const;
  // Builds the model; options missing from the JSON take their defaults.
  // Unknown keys or bad values throw UsageError, and so does a model with
  // more parameters than limits.max_parameters, before anything is allocated.
  ModelPtr make(const nlohmann::json& options, const ModelLimits& limits = {}) const;
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
// The help of a model option for the task: one line per model, its name
// padded to a column and its description.
std::string model_help(const std::string& task);

int64_t count_parameters(const torch::nn::Module& module);

// UsageError naming the model and --max-params when `size` has more
// parameters than limits.max_parameters.
void check_parameter_count(const std::string& model, const ModelSize& size, const ModelLimits& limits);

// check_parameter_count, then a UsageError when one sample of `points`
// points (tokens) would need more memory for its activations than this
// machine has, naming the model and the options; a warning on stderr when a
// batch of `batch_size` would. Estimates
// (ModelSize::activation_floats) run high, up to ~4x for attention models,
// so only a sample that cannot fit is refused.
void check_activation_memory(const ModelEntry& entry, const nlohmann::json& options, int64_t points, int64_t batch_size,
                             const ModelLimits& limits);

}  // namespace qkv::models
