#pragma once
// torch.func's transforms (grad, vmap, jacrev, jvp, ...) wrap the tensors a
// function sees: wrappers carry no storage (a raw data loop cannot read
// them) and C++ custom autograd Functions refuse them. So while a transform
// runs, every fused kernel of qkv takes its composed reference instead
// (differentiable ATen ops, which the transforms support): the same values,
// at ATen's speed. Outside a transform this costs one thread-local read.
namespace qkv {

// Whether a torch.func transform is running on this thread.
bool under_function_transform();

}  // namespace qkv
