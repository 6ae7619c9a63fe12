#include "qkv/models/mlp.h"

#include <torch/torch.h>

#include "qkv/models/live_layers.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

// Activations: the input, per hidden layer the Linear's and the ReLU's outputs
// (and the dropout's), the logits.
ModelSize mlp_size(const MLPOptions& o) {
  ModelSize s;
  if (o.layers == 0) {
    s.parameters = linear_parameters(o.in_features, o.classes);
  } else {  // in -> hidden, layers - 1 times hidden -> hidden, hidden -> classes (no loop: layers may be huge)
    s.parameters =
        sat_add(linear_parameters(o.in_features, o.hidden),
                sat_mul(o.layers - 1, linear_parameters(o.hidden, o.hidden)), linear_parameters(o.hidden, o.classes));
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
