#pragma once
// Forward hooks on the parts of a module. PyTorch calls a submodule's forward
// hooks after it runs, with its inputs and output, and goes on with what a
// hook returns. In qkv the parts run inside one C++ forward, so each part's
// forward hands its result to observed(): while a PartHooks is alive on the
// calling thread and holds a hook for that part, the hook sees the part's
// tensor inputs and outputs and gives the outputs to go on with. A forward
// that computes several parts at once (one GEMM for two maps, the edge
// convolution's factorisation, the attention heads' split and merge) asks
// hooked()/hooked_below() and, when a part it would skip is hooked, runs its
// parts one by one instead: the same values, each part observed. With no
// hooks (the CLI, and a Python call without part hooks) each is one
// thread-local read.
#include <ATen/core/Tensor.h>

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace torch::nn {
class Module;
}

namespace qkv {

using Tensors = std::vector<at::Tensor>;

// A part's hook: (its tensor inputs, its outputs) -> the outputs to go on with.
using PartHook = std::function<Tensors(at::TensorList inputs, const Tensors& outputs)>;

// Hooks on parts of `root` on this thread, for its lifetime. Not copyable:
// it is a scope. Scopes nest; the innermost that hooks a part is used.
class PartHooks {
 public:
  explicit PartHooks(const torch::nn::Module& root);
  ~PartHooks();
  PartHooks(const PartHooks&) = delete;
  PartHooks& operator=(const PartHooks&) = delete;

  // UsageError unless `part` is root or a module below it.
  void add(const torch::nn::Module& part, PartHook hook);

 private:
  friend Tensors observed(const torch::nn::Module&, at::TensorList, Tensors);
  friend bool hooked(const torch::nn::Module&);
  friend bool hooked_below(const torch::nn::Module&);
  const torch::nn::Module& root_;
  std::unordered_map<const torch::nn::Module*, PartHook> hooks_;
  std::unordered_set<const torch::nn::Module*> above_hooked_;  // strict ancestors of hooked parts
  const PartHooks* outer_;
};

// What a part's forward returns: `outputs`, or what its hook gives for them.
Tensors observed(const torch::nn::Module& part, at::TensorList inputs, Tensors outputs);
at::Tensor observed(const torch::nn::Module& part, at::TensorList inputs, at::Tensor output);

// Whether `part` has a hook, and whether a module strictly below it has one.
bool hooked(const torch::nn::Module& part);
bool hooked_below(const torch::nn::Module& part);

}  // namespace qkv
