"""The nn.Module face of qkv's C++ modules.

A qkv C++ module keeps its weights in tensors it registered with LibTorch.
CppModule mirrors its tree of submodules as nn.Modules and registers those
same tensors (the same objects, not copies) as their parameters and buffers:
an optimizer stepping model.parameters() updates the weights the C++ forward
reads, state_dict() has the C++ names (the names of qkv's checkpoints),
gradients land in .grad, .to()/.double() convert in place. There is one
forward, the C++ one; submodules of the mirror are not called on their own,
so forward hooks fire on the CppModule itself, not on its parts.
"""
import torch



def _as_parameter(tensor):
    # The C++ tensor's own Python object becomes an nn.Parameter: LibTorch
    # keeps one Python object per tensor, so this is the weight itself.
    if not isinstance(tensor, torch.nn.Parameter):
        tensor.__class__ = torch.nn.Parameter
    return tensor


class _Part(torch.nn.Module):
    """A submodule of a CppModule: its parameters, buffers and children."""

    def __init__(self, impl):
        super().__init__()
        object.__setattr__(self, "_impl", impl)
        for name, tensor in impl.parameters():
            self.register_parameter(name, _as_parameter(tensor))
        for name, tensor in impl.buffers():
            self.register_buffer(name, tensor)
        for name, child in impl.children():
            self.add_module(name, _Part(child))

    def extra_repr(self):
        return self._impl.type_name

    def forward(self, *args, **kwargs):
        raise RuntimeError(
            "a part of a qkv module runs inside its parent's C++ forward; call the qkv module itself")

    def train(self, mode=True):
        super().train(mode)
        self._impl.train(mode)
        return self

    def _apply(self, fn):
        # In place, like nn.Module's parameters: the C++ module keeps reading
        # the same tensors (buffers included, which nn.Module would replace).
        for child in self.children():
            child._apply(fn)
        for tensor in list(self._parameters.values()) + list(self._buffers.values()):
            if tensor is None:
                continue
            with torch.no_grad():
                converted = fn(tensor)
            if converted is not tensor:
                tensor.data = converted
            if tensor.grad is not None:
                with torch.no_grad():
                    tensor.grad = fn(tensor.grad)
        return self

    def __deepcopy__(self, memo):
        raise TypeError("a qkv module cannot be deep-copied; build a new one and load_state_dict() into it")

    def __reduce_ex__(self, protocol):
        raise TypeError("a qkv module is not picklable; save its state_dict() (torch.save(m.state_dict(), path))")


class CppModule(_Part):
    """An nn.Module whose forward is a qkv C++ module's."""

    def forward(self, *args, **kwargs):
        return self._impl.forward(*args, **kwargs)
