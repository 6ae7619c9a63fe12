"""The nn.Module face of qkv's C++ modules.

A qkv C++ module keeps its weights in tensors it registered with LibTorch.
CppModule mirrors its tree of submodules as nn.Modules and registers those
same tensors (the same objects, not copies) as their parameters and buffers:
an optimizer stepping model.parameters() updates the weights the C++ forward
reads, state_dict() has the C++ names (the names of qkv's checkpoints),
gradients land in .grad, .to()/.double() convert in place.

What a part holds at call time is what the forward computes with: on every
call each weight is read as PyTorch's own modules read theirs (getattr), and
one that is not the registered tensor (torch.func.functional_call's, a
parametrization's, pruning's masked weight, an nn.Parameter assigned in its
place) is bound to it for the call (layers/weight_binding.h), gradients flowing
back through it. Its sizes, dtype and device must be the registered ones.

There is one forward, the C++ one; the parts of the mirror are not called on
their own. A part's forward hooks fire where the C++ forward runs that part
(layers/part_hooks.h), with its tensor inputs and output, and what a hook
returns is the output the forward goes on with; a part with several outputs
(an LSTM's output, h and c) gives them as one flat tuple. A part's forward
pre-hooks run before each call with no inputs (pruning and the old
weight_norm/spectral_norm recompute their weight there). A ModuleList is
never called, as in PyTorch: a hook on one warns. Hooks on the CppModule
itself work as on any module.

Copies and pickles are rebuilt, not cloned: a CppModule is made again from
the arguments it was built with (a registry model from its name and options),
outside torch's random stream (copying draws no random numbers), and given
the original's state_dict, dtype, device and train/eval mode. copy.copy is
therefore a deep copy too (the weights are the C++ module's own). A part of a
module is not copied on its own. A parameter stays one object with whatever
is copied or pickled with it (an optimizer, a module it is tied to), as
nn.Module's do: the copy holds that object in place of its registered weight.
"""
import contextlib
import functools
import inspect
import warnings

import torch

from . import _qkv

_FULL_PRECISION = (torch.float32, torch.float64)


def _autocast_devices():
    try:
        return [d for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)]
    except TypeError:  # torch < 2.4: no device argument
        return (["cpu"] if torch.is_autocast_cpu_enabled() else []) + (["cuda"] if torch.is_autocast_enabled() else [])


def call_cpp(what, forward, *args, weights_dtype=None, **kwargs):
    """forward(*args, **kwargs), a C++ forward, as PyTorch's tools may call it
    (CppModule._call adds the weights its parts hold at call time).

    - torch.jit.trace is refused: the C++ kernels' loops would be recorded as
      constants, and the traced module would differ from this one silently.
    - Under torch.autocast, qkv computes in float32 (our choice: its kernels
      have no bfloat16 or half path, and ATen's bfloat16 fallbacks inside them
      made a step 7.7x slower): autocast is off inside, and bfloat16 or half
      inputs are taken as float32.
    - Outside autocast, bfloat16 or half inputs are refused in one line, and
      so are float32 or float64 inputs of another dtype than weights_dtype
      (the module's weights): LibTorch's "expected scalar type Double but
      found Float" named neither the input nor the module.
    """
    if torch.jit.is_tracing():
        raise _qkv.UsageError("%s: torch.jit.trace cannot record qkv's C++ kernels (the traced module would differ "
                              "from this one); use the module itself, or qkv's checkpoints (qkv.models.load)" % what)
    devices = _autocast_devices()

    def checked(value, name):
        if isinstance(value, dict):
            return {k: checked(v, k) for k, v in value.items()}
        if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
            return value
        if value.dtype not in _FULL_PRECISION:
            if devices:
                return value.float()
            raise _qkv.UsageError("%s: %s is %s; qkv computes in float32 or float64 (.float() it, or run under "
                                  "torch.autocast, inside which qkv takes it as float32)" % (what, name, value.dtype))
        if weights_dtype is not None and value.dtype != weights_dtype and not devices:
            raise _qkv.UsageError("%s: %s is %s, its weights are %s (.to(%s) the input, or the module)" % (
                what, name, value.dtype, weights_dtype, weights_dtype))
        return value

    args = [checked(a, "input %d" % i) for i, a in enumerate(args)]
    kwargs = {k: checked(v, k) for k, v in kwargs.items()}
    with contextlib.ExitStack() as stack:
        for device in devices:
            stack.enter_context(torch.autocast(device_type=device, enabled=False))
        return forward(*args, **kwargs)



def _as_parameter(tensor):
    # The C++ tensor's own Python object becomes an nn.Parameter: LibTorch
    # keeps one Python object per tensor, so this is the weight itself.
    if not isinstance(tensor, torch.nn.Parameter):
        tensor.__class__ = torch.nn.Parameter
    return tensor


# Autograd sees a qkv module's C++ forward as one operation: there is no
# backward of a part alone to hook (nn.Module's backward hooks wrap the part's
# own call, which never happens). Silence would be worse than a refusal.
_NO_BACKWARD_HOOKS = ("qkv: %s on %s would never fire: a part runs inside its parent's C++ forward, which autograd "
                      "sees as one operation; register a forward hook on the part that calls output.register_hook(...) "
                      "for the gradient of its output")


class _Part(torch.nn.Module):
    """A submodule of a CppModule: its parameters, buffers and children."""

    def __init__(self, impl):
        super().__init__()
        object.__setattr__(self, "_impl", impl)
        registered = {}
        for name, tensor in impl.parameters():
            self.register_parameter(name, _as_parameter(tensor))
            registered[name] = tensor
        for name, tensor in impl.buffers():
            self.register_buffer(name, tensor)
            registered[name] = tensor
        # The tensors the C++ forward reads unless others are bound for a call.
        object.__setattr__(self, "_registered", registered)
        for name, child in impl.children():
            self.add_module(name, (_ListPart if child.type_name.endswith(_LISTS) else _Part)(child))

    def extra_repr(self):
        # The C++ class without its namespace and Impl, then its own weights' sizes:
        # "VNLinear: weight=[8, 4]".
        name = self._impl.type_name.rsplit("::", 1)[-1]
        name = name[:-4] if name.endswith("Impl") else name
        name = name[4:] if name.startswith("Live") else name  # LiveLinear is LibTorch's Linear (live_layers.h)
        sizes = ", ".join("%s=[%s]" % (key, ", ".join(str(d) for d in p.shape))
                          for key, p in self._parameters.items())
        return name + (": " + sizes if sizes else "")

    def forward(self, *args, **kwargs):
        raise RuntimeError(
            "a part of a qkv module runs inside its parent's C++ forward; call the qkv module itself")

    def register_forward_hook(self, hook, *args, **kwargs):
        if self._impl.type_name.endswith(("ModuleListImpl", "ModuleDictImpl")):
            warnings.warn("qkv: a forward hook on a %s does not fire: a container is not called, as in PyTorch (hook "
                          "its elements)" % self.extra_repr(), stacklevel=2)
        return super().register_forward_hook(hook, *args, **kwargs)

    def register_full_backward_hook(self, hook, *args, **kwargs):
        raise _qkv.UsageError(_NO_BACKWARD_HOOKS % ("a backward hook", self.extra_repr()))

    if hasattr(torch.nn.Module, "register_full_backward_pre_hook"):  # torch >= 2.0
        def register_full_backward_pre_hook(self, hook, *args, **kwargs):
            raise _qkv.UsageError(_NO_BACKWARD_HOOKS % ("a backward pre-hook", self.extra_repr()))

    def register_backward_hook(self, hook):
        raise _qkv.UsageError(_NO_BACKWARD_HOOKS % ("a backward hook", self.extra_repr()))

    def _run_forward_hooks(self, inputs, outputs):
        """This part's forward hooks, as nn.Module runs them after its forward (in order, each given what the one
        before returned): called from the C++ forward with the part's tensor inputs and outputs; returns the
        outputs to go on with."""
        args = tuple(inputs)
        result = outputs[0] if len(outputs) == 1 else tuple(outputs)
        with_kwargs = getattr(self, "_forward_hooks_with_kwargs", {})
        for hook_id, hook in list(self._forward_hooks.items()):
            returned = hook(self, args, {}, result) if hook_id in with_kwargs else hook(self, args, result)
            if returned is not None:
                result = returned
        given = [result] if len(outputs) == 1 else list(result) if isinstance(result, (tuple, list)) else [result]
        if len(given) != len(outputs) or not all(isinstance(t, torch.Tensor) for t in given):
            raise _qkv.UsageError("a forward hook on %s returned %s; the part's output is %s" % (
                self.extra_repr(), type(result).__name__,
                "a tensor" if len(outputs) == 1 else "a tuple of %d tensors" % len(outputs)))
        return given

    def train(self, mode=True):
        super().train(mode)
        self._impl.train(mode)
        return self

    def _apply(self, fn, recurse=True):
        # In place, like nn.Module's parameters: the C++ module keeps reading
        # the same tensors (buffers included, which nn.Module would replace).
        # A conversion to half or bfloat16 is refused before anything changes:
        # qkv's kernels compute in float32 or float64 (call_cpp), and a half
        # module failed at its first call with LibTorch's "expected scalar type".
        with torch.no_grad():
            probe = fn(torch.empty(0, dtype=torch.float32, device="cpu"))
        what = self._what() if isinstance(self, CppModule) else self.extra_repr()
        if (probe.is_floating_point() or probe.is_complex()) and probe.dtype not in _FULL_PRECISION:
            raise _qkv.UsageError("qkv: %s cannot hold %s weights: qkv computes in float32 or float64 (run it under "
                                  "torch.autocast to take half inputs)" % (what, probe.dtype))
        if not torch._has_compatible_shallow_copy_type(torch.empty(0), probe):
            # nn.Module would put new tensors in place of its own (a meta tensor cannot hold a CPU one's
            # data); the C++ module keeps reading the ones it registered.
            raise _qkv.UsageError("qkv: %s cannot move to the %s device: its C++ module computes with the tensors it "
                                  "registered, which cannot hold that device's (the module is as it was)"
                                  % (what, probe.device.type))
        if recurse:
            for child in self.children():
                child._apply(fn)
        # The tensors the part holds, then the registered ones it holds no longer (an nn.Parameter assigned in
        # place of one is bound to it at call time, and must stay of its dtype and device).
        tensors = {id(t): t for t in list(self._parameters.values()) + list(self._buffers.values()) +
                   list(self.__dict__.get("_registered", {}).values()) if t is not None}
        for tensor in tensors.values():
            with torch.no_grad():
                converted = fn(tensor)
            if converted is not tensor:
                tensor.data = converted
            if tensor.grad is not None:
                with torch.no_grad():
                    tensor.grad = fn(tensor.grad)
        return self

    def __deepcopy__(self, memo):
        raise TypeError("a part of a qkv module cannot be copied alone; copy the qkv module it belongs to")

    def __reduce_ex__(self, protocol):
        raise TypeError("a part of a qkv module cannot be pickled alone; pickle the qkv module it belongs to")


def _owner(module, name):
    """(the submodule holding the weight `name`, its attribute name)."""
    prefix, _, leaf = name.rpartition(".")
    return (module.get_submodule(prefix) if prefix else module), leaf


_LISTS = ("ModuleListImpl", "SequentialImpl")


class _ListPart(_Part):
    """A C++ ModuleList or Sequential: its parts by position, as torch.nn.ModuleList gives them
    (model.blocks[-1].register_forward_hook(...), len(model.blocks), for block in model.blocks)."""

    def __getitem__(self, index):
        parts = list(self._modules.values())
        return tuple(parts[index]) if isinstance(index, slice) else parts[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules.values()))


def _rebuilt(make, state, training, where, frozen=()):
    """A module made by make() without touching torch's random stream, holding `state`, on the device and
    dtype of its tensors (as torch.load's map_location left them; else where: (device, floating dtype) or None),
    in its mode, its parameters named in `frozen` not requiring grad (as the original's). A parameter in
    `state` (pickled as itself, not as a copy) is held as it is: pickle gave the same object to whatever else
    held it (an optimizer, a module it is tied to), as nn.Module's own pickles do."""
    with torch.random.fork_rng(devices=[]):
        module = make()
    floating = [t for t in state.values() if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if floating:
        where = (floating[0].device, floating[0].dtype)
    if where is not None:
        module.to(device=where[0], dtype=where[1])
    module.load_state_dict(state)
    for name, value in state.items():
        owner, leaf = _owner(module, name)
        held = owner._parameters.get(leaf)
        if isinstance(value, torch.nn.Parameter) and held is not None and held is not value:
            with torch.no_grad():
                held.data = value.data  # the registered tensor keeps no copy of its own
            setattr(owner, leaf, value)
    frozen = set(frozen)
    for name, parameter in module.named_parameters():
        if name in frozen:
            parameter.requires_grad_(False)
    return module.train(training)


def _rebuild(cls, args, kwargs, state, training, where, frozen=()):
    return _rebuilt(lambda: cls(*args, **kwargs), state, training, where, frozen)


class CppModule(_Part):
    """An nn.Module whose forward is a qkv C++ module's."""

    def __init_subclass__(cls, **kwargs):
        # Each class records the arguments it was built with (the outermost
        # __init__ of a subclass chain), so that copies can be built again.
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def recording_init(self, *args, **kw):
            outermost = "_built_with" not in self.__dict__
            if outermost:
                object.__setattr__(self, "_built_with", (cls, args, kw))
            init(self, *args, **kw)
            if outermost:
                # What the __init__s added beside the C++ weights (a subclass's head, a parameter): a copy is
                # built again by the same __init__ and given these too. What is added later is not copied.
                registered = set(self._registered_names())
                object.__setattr__(self, "_added_state", [k for k in self.state_dict() if k not in registered])

        cls.__init__ = recording_init

    # The module itself is called: its hooks fire.
    register_forward_hook = torch.nn.Module.register_forward_hook
    register_full_backward_hook = torch.nn.Module.register_full_backward_hook
    register_backward_hook = torch.nn.Module.register_backward_hook
    if hasattr(torch.nn.Module, "register_full_backward_pre_hook"):  # torch >= 2.0
        register_full_backward_pre_hook = torch.nn.Module.register_full_backward_pre_hook

    def forward(self, *args, **kwargs):
        return self._call(self._impl.forward, *args, **kwargs)

    def _call(self, forward, *args, **kwargs):
        """forward (one of the C++ module's methods) through call_cpp, with the weights its parts hold now and
        their forward hooks."""
        bound = self._bound_weights()
        hooks = [(part._impl, part._run_forward_hooks) for part in self.modules()
                 if part is not self and part._forward_hooks and "_impl" in part.__dict__]
        if bound or hooks:
            forward = functools.partial(_qkv.call_with_parts, self._impl, bound, hooks, forward)
        dtype = next((t.dtype for t in self.parameters() if t.is_floating_point()), None)
        return call_cpp(self._what(), forward, *args, weights_dtype=dtype if dtype in _FULL_PRECISION else None,
                        **kwargs)

    def _what(self):
        return type(self).__name__

    def _weights_now(self, for_copy=False):
        """(name, registered, current) for every weight of every part: the tensor the C++ forward registered and
        the one the part holds now (an attribute, as nn.Module reads it), after running the parts' forward
        pre-hooks (with no inputs), which may recompute it. for_copy: the hooks run as in eval mode, so that
        copying changes nothing of the original (the old spectral_norm's hook steps its power iteration, and
        updates its vectors, in training mode only)."""
        for prefix, part in self.named_modules():
            registered = part.__dict__.get("_registered")
            if registered is None:  # a parametrization's container, not a part
                continue
            # For a copy, the part and its parametrizations as in eval mode: the old spectral_norm's pre-hook
            # and the new one's parametrization step their power iteration in training mode only. The
            # attribute alone: the C++ module is left as it is.
            flipped = []
            if for_copy:
                parametrizations = part._modules.get("parametrizations")
                for m in [part] + (list(parametrizations.modules()) if parametrizations is not None else []):
                    flipped.append((m, m.training))
                    object.__setattr__(m, "training", False)
            try:
                if part is not self:
                    for hook in list(part._forward_pre_hooks.values()):
                        hook(part, ())
                current = [(name, tensor, getattr(part, name, None)) for name, tensor in registered.items()]
            finally:
                for m, training in flipped:
                    object.__setattr__(m, "training", training)
            for name, tensor, now in current:
                yield (prefix + "." + name if prefix else name), tensor, now

    def _registered_names(self):
        """The state_dict names of the C++ module's own weights."""
        for prefix, part in self.named_modules():
            for name in part.__dict__.get("_registered", ()):
                yield prefix + "." + name if prefix else name

    def _held_weights(self):
        """(registered, held) for every weight a part holds as a tensor of its own in place of the registered
        one (an assigned nn.Parameter or buffer); UsageError for one computed at call time (a parametrization,
        pruning), which no copy into a tensor can set."""
        held = []
        for prefix, part in self.named_modules():
            registered = part.__dict__.get("_registered")
            if registered is None:
                continue
            for name, tensor in registered.items():
                own = part._parameters.get(name, part._buffers.get(name))
                if own is tensor:
                    continue
                if own is None:
                    raise _qkv.UsageError("%s: computed at call time (a parametrization or pruning), so loaded "
                                          "weights cannot set it; load them before parametrizing, or use "
                                          "load_state_dict" % (prefix + "." + name if prefix else name))
                held.append((tensor, own))
        return held

    def _bound_weights(self):
        """The weights to bind for a call: those whose part holds another tensor than the registered one."""
        return [(name, registered, current) for name, registered, current in self._weights_now()
                if current is not registered]

    def extra_repr(self):
        # The arguments it was built with, by name: VNLinear(in_channels=4, out_channels=6).
        built = self.__dict__.get("_built_with")
        if built is None:
            return super().extra_repr()
        cls, args, kwargs = built
        try:
            bound = inspect.signature(cls.__init__).bind(self, *args, **kwargs)
        except TypeError:
            return super().extra_repr()
        return ", ".join("%s=%r" % (k, v) for k, v in list(bound.arguments.items())[1:])

    def _placement(self):
        floating = [t for t in list(self.parameters()) + list(self.buffers()) if t.is_floating_point()]
        return (floating[0].device, floating[0].dtype) if floating else None

    def _rebuild_args(self):
        cls, args, kwargs = self.__dict__["_built_with"]
        return _rebuild, (cls, args, kwargs)

    def __reduce_ex__(self, protocol):
        function, head, state, tail = self._reduced(share=True)
        return function, head + (state,) + tail

    def _reduced(self, share):
        """(function, head, state, tail): function(*head, state, *tail) builds this module again. share: each
        parameter a part holds is given in state as itself (pickle's memo then keeps it one object with whatever
        else holds it); else as a copy."""
        # The weights that would run now, under the C++ names: a parametrized or pruned part is copied as a plain
        # one holding its effective weight; then what a subclass's __init__ added (an nn.Linear head).
        function, head = self._rebuild_args()
        state, frozen = {}, []
        # Grad mode on, whatever the caller's (a copy saved under torch.no_grad()): a weight computed at call
        # time requires grad as what it is computed from does, and only a frozen one is recorded frozen.
        with torch.enable_grad():
            weights = [(name, current) for name, _, current in self._weights_now(for_copy=True)]
            for key in self.__dict__.get("_added_state", ()):
                weights.append((key, getattr(*_owner(self, key), None)))
        for name, current in weights:
            if not isinstance(current, torch.Tensor):
                raise TypeError("%s: cannot copy a qkv module whose %s is %s" % (self._what(), name,
                                                                                type(current).__name__))
            state[name] = current if share and isinstance(current, torch.nn.Parameter) else current.detach().clone()
            if not current.requires_grad:  # a frozen parameter stays frozen (buffers never require grad)
                frozen.append(name)
        return function, head, state, (self.training, self._placement(), frozen)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        function, head, state, tail = self._reduced(share=False)
        copy = function(*head, state, *tail)
        memo[id(self)] = copy
        # Each parameter stays one object with what else is copied with it, as copy.deepcopy keeps nn.Module's:
        # one copied before (an optimizer's, a module it is tied to) is held by the copy; one copied later
        # finds the copy's. A parametrized part's weight is computed, not held: the copy's is its own.
        for name in state:
            original_owner, leaf = _owner(self, name)
            original = original_owner._parameters.get(leaf)  # a parametrization's weight is computed, not held
            if original is None:
                continue
            owner, leaf = _owner(copy, name)
            mine = owner._parameters.get(leaf)
            known = memo.get(id(original))
            if known is None:
                memo[id(original)] = mine
            elif known is not mine and isinstance(known, torch.nn.Parameter):
                setattr(owner, leaf, known)
        return copy

    def __copy__(self):
        return self.__deepcopy__({})
