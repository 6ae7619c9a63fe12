#pragma once
// Second-order gradients through qkv's fused kernels. A fused backward
// computes its gradient with loops over raw data, which leave no graph: under
// create_graph=True (a gradient penalty, a Hessian-vector product,
// gradgradcheck) its gradient would be treated as a constant and every
// second derivative through it would be silently wrong. So when the caller
// asks for a graph, each fused backward differentiates its op's composed
// reference instead (differentiable ATen ops, to any order): the same first
// derivative, now with its own graph.
#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace torch::autograd {
struct AutogradContext;
}

namespace qkv {

// A fused op's forward keeps the inputs a create_graph backward
// differentiates (the Function's own inputs, with their history) and the
// version of each. Its saved tensors are copies or views the fused backward
// reads; these are not among them, so autograd's check that nothing it saved
// changed in place would not cover them.
// `op` names it in the refusal. An inference tensor (torch.inference_mode)
// has no version; it is kept unchecked (no backward can reach it anyway).
void keep_inputs_for_graph(torch::autograd::AutogradContext* ctx, const char* op,
                           const std::vector<at::Tensor>& inputs);

// Those inputs, in the order kept; an error, as autograd gives for a saved
// tensor, when one was changed in place after the forward (its gradient
// would be taken at its new value, silently).
std::vector<at::Tensor> inputs_for_graph(torch::autograd::AutogradContext* ctx);

// Inside a custom autograd Function's backward: whether the gradient must
// itself be differentiable (the engine runs a create_graph backward with
// grad mode on, and a plain one with it off).
bool gradient_graph_requested();

// The vector-Jacobian product of composed(inputs) with grad_outputs, as a
// graph: the partial derivatives with respect to each of `inputs` (the
// Function's original inputs, with their history; one may be computed from
// another, or be the same tensor), an undefined tensor for an input that
// does not require grad. `composed` returns its outputs in the order of
// grad_outputs.
std::vector<at::Tensor> composed_vjp(
    const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& composed,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& grad_outputs);

}  // namespace qkv
