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

  static MLPOptions from_json(const nlohmann::json& j) { return read_model_options<MLPOptions>("mlp", j); }
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(MLPOptions& o, V&& visit) {
  visit(Field{"in_features", "width of inputs[\"x\"] (2 for the spirals' points)"}.at_least(1), o.in_features);
  visit(Field{"hidden", "units per hidden layer"}.at_least(1), o.hidden);
  visit(Field{"layers", "hidden layers, each Linear + ReLU (0: a linear classifier)"}.at_least(0), o.layers);
  visit(Field{"classes", "output classes (3 spirals)"}.at_least(2), o.classes);
  visit(Field{"dropout", "dropout after each hidden layer's ReLU"}.range(0, 1), o.dropout);
}

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
