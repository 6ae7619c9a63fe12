#include "qkv/layers/part_hooks.h"

#include <torch/nn/module.h>

#include "qkv/core/errors.h"

namespace qkv {
namespace {

thread_local const PartHooks* t_innermost_hooks = nullptr;

// Whether `part` is `m` or below it; each module on the way (`m` included,
// `part` not) goes into `above`.
bool mark_path(const torch::nn::Module& m, const torch::nn::Module* part,
               std::unordered_set<const torch::nn::Module*>& above) {
  if (&m == part) return true;
  bool found = false;
  for (const auto& child : m.children()) found = mark_path(*child, part, above) || found;
  if (found) above.insert(&m);
  return found;
}

}  // namespace

PartHooks::PartHooks(const torch::nn::Module& root) : root_(root), outer_(t_innermost_hooks) {
  t_innermost_hooks = this;
}

PartHooks::~PartHooks() { t_innermost_hooks = outer_; }

void PartHooks::add(const torch::nn::Module& part, PartHook hook) {
  if (!mark_path(root_, &part, above_hooked_))
    throw UsageError("a forward hook on " + part.name() + ", which is not a part of the " + root_.name() + " called");
  hooks_[&part] = std::move(hook);
}

Tensors observed(const torch::nn::Module& part, at::TensorList inputs, Tensors outputs) {
  for (const PartHooks* h = t_innermost_hooks; h != nullptr; h = h->outer_) {
    const auto it = h->hooks_.find(&part);
    if (it == h->hooks_.end()) continue;
    auto replaced = it->second(inputs, outputs);
    if (replaced.size() != outputs.size())
      throw UsageError("a forward hook on " + part.name() + " returned " + std::to_string(replaced.size()) +
                       " outputs for the part's " + std::to_string(outputs.size()));
    return replaced;
  }
  return outputs;
}

at::Tensor observed(const torch::nn::Module& part, at::TensorList inputs, at::Tensor output) {
  if (t_innermost_hooks == nullptr) return output;
  return observed(part, inputs, Tensors{std::move(output)}).front();
}

bool hooked(const torch::nn::Module& part) {
  for (const PartHooks* h = t_innermost_hooks; h != nullptr; h = h->outer_)
    if (h->hooks_.count(&part)) return true;
  return false;
}

bool hooked_below(const torch::nn::Module& part) {
  for (const PartHooks* h = t_innermost_hooks; h != nullptr; h = h->outer_)
    if (h->above_hooked_.count(&part)) return true;
  return false;
}

}  // namespace qkv
