#include "qkv/models/mlp.h"

#include <torch/torch.h>

#include "qkv/models/live_layers.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

MLPOptions MLPOptions::from_json(const nlohmann::json& j) {
  MLPOptions o;
  OptionReader r("mlp", j);
  r.get("in_features", o.in_features, 1);
  r.get("hidden", o.hidden, 1);
  r.get("layers", o.layers, 0);
  r.get("classes", o.classes, 2);
  r.get("dropout", o.dropout, 0.0, 1.0);
  r.finish();
  return o;
}

nlohmann::json MLPOptions::to_json() const {
  return {{"in_features", in_features}, {"hidden", hidden}, {"layers", layers}, {"classes", classes},
          {"dropout", dropout}};
}

OptionHelpList MLPOptions::option_help() {
  return {{"in_features", "width of inputs[\"x\"] (2 for the spirals' points)"},
          {"hidden", "units per hidden layer"},
          {"layers", "hidden layers, each Linear + ReLU (0: a linear classifier)"},
          {"classes", "output classes (3 spirals)"},
          {"dropout", "dropout after each hidden layer's ReLU"}};
}

// Activations: the input, per hidden layer the Linear's and the ReLU's outputs
// (and the dropout's), the logits.
ModelSize mlp_size(const MLPOptions& o) {
  ModelSize s;
  if (o.layers == 0) {
    s.parameters = linear_parameters(o.in_features, o.classes);
  } else {  // in -> hidden, layers - 1 times hidden -> hidden, hidden -> classes (no loop: layers may be huge)
    s.parameters = sat_add(linear_parameters(o.in_features, o.hidden),
                           sat_mul(o.layers - 1, linear_parameters(o.hidden, o.hidden)),
                           linear_parameters(o.hidden, o.classes));
  }
  s.activation_floats = sat_add(o.in_features, sat_mul(o.layers, o.dropout > 0 ? 3 : 2, o.hidden), o.classes);
  return s;
}

MLP::MLP(const MLPOptions& o) {
  net_ = LiveSequential();
  int64_t width = o.in_features;
  for (int64_t i = 0; i < o.layers; ++i) {
    net_->push_back(LiveLinear(width, o.hidden));
    net_->push_back(LiveReLU());
    if (o.dropout > 0) net_->push_back(LiveDropout(o.dropout));
    width = o.hidden;
  }
  net_->push_back(LiveLinear(width, o.classes));
  register_module("net", net_);
}

at::Tensor MLP::forward(const data::Batch& batch) { return net_->forward(batch.input("x")); }

}  // namespace qkv::models
