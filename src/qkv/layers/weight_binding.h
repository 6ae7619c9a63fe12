#pragma once
// Weights bound from outside a module for one call. A LibTorch module's
// forward reads the tensors it registered; Python's tools hand a module other
// tensors for a call instead (torch.func.functional_call, a parametrization,
// pruning's masked weight, an nn.Parameter assigned in place of the old one),
// and expect the forward to compute with them, gradients flowing back through
// them. So every forward of qkv reads each registered parameter and buffer
// through live(): while a WeightBinding is alive on the calling thread, that
// is the tensor bound to the registered one; otherwise the registered tensor
// itself (the C++ programs never bind anything, and pay one thread-local read).
#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>

namespace qkv {

// The tensor a forward computes with for its registered parameter or buffer
// `registered` (undefined stays undefined).
const at::Tensor& live(const at::Tensor& registered);

// Binds tensors to registered weights on this thread, for its lifetime.
// Bindings nest: an inner one sees the outer one's too. Not copyable: it is
// a scope.
class WeightBinding {
 public:
  WeightBinding();
  ~WeightBinding();
  WeightBinding(const WeightBinding&) = delete;
  WeightBinding& operator=(const WeightBinding&) = delete;

  // `value` computes in place of `registered` (named `name` in messages):
  // UsageError unless it has the registered tensor's sizes, dtype and
  // device, since the module's kernels were built for those.
  void bind(const std::string& name, const at::Tensor& registered, const at::Tensor& value);
  bool empty() const { return bound_.empty(); }

 private:
  friend const at::Tensor& live(const at::Tensor& registered);
  std::unordered_map<const c10::TensorImpl*, at::Tensor> bound_;
  const WeightBinding* outer_;
};

}  // namespace qkv
