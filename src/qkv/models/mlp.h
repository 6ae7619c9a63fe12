#pragma once
// A multilayer perceptron on inputs["x"] [B, in]: the smallest model the
// trainer runs, used by the spirals demo and the trainer's tests.
#include <torch/nn/modules/container/sequential.h>

#include "qkv/models/live_layers.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"

namespace qkv::models {

struct MLPOptions {
  int64_t in_features = 2;
  int64_t hidden = 64;
  int64_t layers = 2;  // hidden layers
  int64_t classes = 3;
  double dropout = 0.0;

  static MLPOptions from_json(const nlohmann::json& j);
  static OptionHelpList option_help();  // a line per to_json() key
  nlohmann::json to_json() const;
};

// The MLP's size; it ignores any point count (one sample is in_features numbers).
ModelSize mlp_size(const MLPOptions& options);

class MLP : public Model {
 public:
  explicit MLP(const MLPOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  LiveSequential net_{nullptr};
};

}  // namespace qkv::models
