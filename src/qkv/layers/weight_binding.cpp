#include "qkv/layers/weight_binding.h"

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"

namespace qkv {
namespace {

thread_local const WeightBinding* t_innermost_binding = nullptr;

}  // namespace

WeightBinding::WeightBinding() : outer_(t_innermost_binding) { t_innermost_binding = this; }

WeightBinding::~WeightBinding() { t_innermost_binding = outer_; }

void WeightBinding::bind(const std::string& name, const at::Tensor& registered, const at::Tensor& value) {
  if (!registered.defined()) throw UsageError(name + ": this module has no such weight to bind a tensor to");
  if (!value.defined()) throw UsageError(name + ": bound to None; the module computes with it");
  if (value.sizes() != registered.sizes())
    throw UsageError(name + ": given " + shape_of(value) + ", but the module was built for " + shape_of(registered));
  if (value.scalar_type() != registered.scalar_type() || value.device() != registered.device())
    throw UsageError(name + ": given " + std::string(c10::toString(value.scalar_type())) + " on " +
                     value.device().str() + ", but the module's weights are " +
                     c10::toString(registered.scalar_type()) + " on " + registered.device().str() +
                     " (.to() the module, or the tensor)");
  bound_[registered.unsafeGetTensorImpl()] = value;
}

const at::Tensor& live(const at::Tensor& registered) {
  for (const WeightBinding* b = t_innermost_binding; b != nullptr; b = b->outer_) {
    const auto it = b->bound_.find(registered.unsafeGetTensorImpl());
    if (it != b->bound_.end()) return it->second;
  }
  return registered;
}

}  // namespace qkv
