#include "qkv/layers/second_order.h"

#include <torch/torch.h>

namespace qkv {

bool gradient_graph_requested() { return at::GradMode::is_enabled(); }

void keep_inputs_for_graph(torch::autograd::AutogradContext* ctx, const char* op,
                           const std::vector<at::Tensor>& inputs) {
  std::vector<int64_t> versions;
  for (const auto& t : inputs)
    versions.push_back(t.defined() && !t.is_inference() ? static_cast<int64_t>(t._version()) : -1);
  ctx->saved_data["graph_inputs"] = inputs;
  ctx->saved_data["graph_input_versions"] = versions;
  ctx->saved_data["graph_op"] = std::string(op);
}

std::vector<at::Tensor> inputs_for_graph(torch::autograd::AutogradContext* ctx) {
  auto inputs = ctx->saved_data.at("graph_inputs").toTensorVector();
  const auto versions = ctx->saved_data.at("graph_input_versions").toIntVector();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (versions[i] < 0) continue;
    const auto now = static_cast<int64_t>(inputs[i]._version());
    TORCH_CHECK(now == versions[i],
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                "input ",
                i, " of ", ctx->saved_data.at("graph_op").toStringRef(), " (", inputs[i].sizes(), ") is at version ",
                now, "; expected version ", versions[i],
                " instead (create_graph differentiates the op at the inputs its forward saw)");
  }
  return inputs;
}

std::vector<at::Tensor> composed_vjp(
    const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& composed,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& grad_outputs) {
  // The composed op runs on an alias of each input that requires grad, and is
  // differentiated with respect to the aliases: a partial derivative each.
  // With respect to the inputs themselves, autograd would give each input's
  // total derivative, paths through the other inputs included where one is
  // computed from another (attention(x, x, x), vn_leaky_relu(x, U x)), and
  // the engine, which sends each input's gradient back along its history,
  // would count those paths again. An alias is a new node after its input:
  // no other input's history passes through it, and its gradient still flows
  // back through the input's history to any order.
  std::vector<at::Tensor> wrt, aliased = inputs;
  std::vector<size_t> position;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      aliased[i] = inputs[i].view_as(inputs[i]);
      wrt.push_back(aliased[i]);
      position.push_back(i);
    }
  std::vector<at::Tensor> result(inputs.size());
  if (wrt.empty()) return result;
  const auto outputs = composed(aliased);
  std::vector<at::Tensor> differentiated, weights;
  for (size_t o = 0; o < outputs.size() && o < grad_outputs.size(); ++o)
    if (grad_outputs[o].defined() && outputs[o].requires_grad()) {
      differentiated.push_back(outputs[o]);
      weights.push_back(grad_outputs[o]);
    }
  if (differentiated.empty()) return result;
  const auto grads = torch::autograd::grad(differentiated, wrt, weights, /*retain_graph=*/true,
                                           /*create_graph=*/true, /*allow_unused=*/true);
  for (size_t j = 0; j < wrt.size(); ++j) result[position[j]] = grads[j];
  return result;
}

}  // namespace qkv
