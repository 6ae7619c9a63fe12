#pragma once
// Gradient check by central differences (LibTorch's C++ API has no
// gradcheck): the largest difference between autograd's gradient of
// L = sum(fn(inputs) * up) and (L(x + h) - L(x - h)) / 2h, over every element
// of every input. Meant for float64 inputs of a few hundred elements.
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace qkv::testing {

using TensorFn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

inline double max_gradient_error(const TensorFn& fn, const std::vector<at::Tensor>& inputs, double h = 1e-6) {
  std::vector<at::Tensor> leaves;
  for (const auto& t : inputs) leaves.push_back(t.detach().clone().requires_grad_());
  const auto out = fn(leaves);
  const auto up = torch::randn_like(out);
  (out * up).sum().backward();
  double worst = 0;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const auto analytic = leaves[j].grad().defined() ? leaves[j].grad().reshape({-1})
                                                     : torch::zeros({inputs[j].numel()}, inputs[j].options());
    for (int64_t i = 0; i < inputs[j].numel(); ++i) {
      auto shifted = [&](double delta) {
        std::vector<at::Tensor> args;
        for (const auto& t : inputs) args.push_back(t.detach().clone());
        args[j].view({-1})[i] += delta;
        torch::NoGradGuard no_grad;
        return (fn(args) * up).sum().item<double>();
      };
      const double numeric = (shifted(h) - shifted(-h)) / (2 * h);
      worst = std::max(worst, std::abs(analytic[i].item<double>() - numeric));
    }
  }
  return worst;
}

}  // namespace qkv::testing
