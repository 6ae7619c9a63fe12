"""Every model of qkv's registry (`qkv params` lists them) as an nn.Module.

    model = qkv.models.create("vnt", classes=40)          # the CLI's defaults
    logits = model(x)                                      # x [B, 3, N]: the first input; others by keyword
    model, config = qkv.load("runs/vnt"), ...              # a run of the CLI

Inputs are keyword tensors named as the model's `inputs` ("points" [B, 3, N],
"normals", "category", "tokens", "spect", "methylation"); the output is the
logits. Parameter names are those of qkv's checkpoints, so a state dict
saved from Python (torch.save(model.state_dict(), path)) is read by the CLI's
--init-weights, and load() reads the CLI's runs.
"""
import collections
import functools
import json

import torch

from . import _qkv
from ._modules import CppModule
from ._settings import path_text, settings_text
from ._signatures import signature_of


AttentionMaps = collections.namedtuple("AttentionMaps", ["weights", "keys"])
AttentionMaps.__doc__ = """Model.attention_maps' result: weights, a list of [B, H, N, N] (or [B, H, N, k]) tensors, one per
attention layer; keys, the [B, N, k] points local attention weighs, or None where every point is a key."""


def _registry():
    return json.loads(_qkv.model_registry())


# The inputs that hold indices (int64), not values.
_INDEX_INPUTS = ("tokens", "category")


@functools.lru_cache(maxsize=None)
def _input_names():
    """Every input some registered model reads (points, normals, category, tokens, ...)."""
    return frozenset(i for e in _registry() for i in e["inputs"])


def set_max_parameters(limit):
    """The most parameters a model may be built with (the CLI's --max-params); larger options are refused
    before anything is allocated."""
    _qkv.set_max_parameters(int(limit))


def max_parameters():
    return _qkv.max_parameters()


def names(task=None):
    """The registered model names (of one task: classification, segmentation, lm, mhca, spirals)."""
    return [e["model"] for e in _registry() if task is None or e["task"] == task]


def describe(name):
    """The registry's entry as `qkv params --model NAME --json` shows it, less the sizes: model,
    description, task, inputs, network (XGBoost is not one: create() refuses it) and options
    {key: {value, default, help[, source]}}."""
    for e in _registry():
        if e["model"] == name:
            return e
    _qkv.create_model(name, "{}")  # raises qkv.UsageError listing the known names


def _rebuild_model(name, options, config, state, training, where, frozen=()):
    from ._modules import _rebuilt

    def make():
        return Model(_qkv.create_model(name, settings_text(options, name)), name, options, config)
    return _rebuilt(make, state, training, where, frozen)


class Model(CppModule):
    """A registered qkv model. forward(**inputs) -> logits. Copies and pickles
    are built again from the name and options, with this one's state."""

    def __init__(self, impl, name, options, config=None):
        super().__init__(impl)
        self.name = name
        self.options = options  # every option, defaults filled in (as config.json records them)
        self.inputs = _qkv.model_inputs(name, settings_text(options, name))
        self.config = config  # the run configuration of a loaded checkpoint, else None

    def forward(self, batch=None, **inputs):
        """model(x), model(points=x) or model({"points": x}) -> logits. A tensor alone is the model's
        first input ("points" [B, 3, N] for point clouds, "tokens" for the LM); the others by keyword."""
        return self._call(self._impl.forward, self._named_inputs(batch, inputs))

    def features(self, batch=None, **inputs):
        """The embedding the classification head reads, [B, F], inputs as forward takes them: for the
        VNT-Net (vnt, vnt+n, vnt-local) and VN-DGCNN classifiers the pooled rotation-invariant features of each
        shape (the same for a rotated copy). Other models raise qkv.UsageError."""
        return self._call_method("features", batch, inputs)

    def attention_maps(self, batch=None, **inputs):
        """The attention weights of one forward, inputs as forward takes them: AttentionMaps(weights, keys) with
        weights a list, one [B, H, N, N] tensor per VNT block (row i: how point i weighs every point; rows sum to
        1), and keys None; for vnt-local [B, H, N, neighbours] tensors whose columns are the points
        keys[b, i, :] ([B, N, neighbours]). Models without attention over the points raise qkv.UsageError.
        Computed without a graph unless gradients are enabled; call under torch.no_grad() to keep memory low."""
        weights, keys = self._call_method("attention_maps", batch, inputs)
        return AttentionMaps(list(weights), keys)

    def _call_method(self, method, batch, inputs):
        """The C++ model's `method` on the inputs; its refusal ("method: this model ...") names the model."""
        try:
            return self._call(getattr(self._impl, method), self._named_inputs(batch, inputs))
        except _qkv.UsageError as e:
            if str(e).startswith(method + ":"):
                raise _qkv.UsageError("%s: %s" % (self.name, e)) from None
            raise

    def _named_inputs(self, batch, inputs):
        # A keyword no model reads is a mistake (a misspelt "nomrals" ran without normals); one another model
        # reads is taken and left unread, as a batch dict's are (model(**inputs) with a data set's normals).
        unknown = [k for k in inputs if k not in self.inputs and k not in _input_names()]
        if isinstance(batch, torch.Tensor):
            first = self.inputs[0]
            if first in inputs:
                raise _qkv.UsageError("%s: %s given twice (as the tensor and by keyword)" % (self.name, first))
            batch = {first: batch}
        if batch is not None:
            inputs = dict(batch, **inputs)
        missing = [k for k in self.inputs if k not in inputs]
        if missing:
            raise _qkv.UsageError("%s: missing input%s %s (it reads %s)%s" % (
                self.name, "s" if len(missing) > 1 else "", ", ".join(missing), ", ".join(self.inputs),
                "; no input is named %s" % ", ".join(unknown) if unknown else ""))
        if unknown:
            raise _qkv.UsageError("%s: no input named %s (it reads %s)" % (self.name, ", ".join(unknown),
                                                                          ", ".join(self.inputs)))
        for key in self.inputs:  # values, not indices: integers failed inside a kernel ("not implemented for 'Long'")
            value = inputs[key]
            if key not in _INDEX_INPUTS and isinstance(value, torch.Tensor) and not value.is_floating_point():
                raise _qkv.UsageError("%s: input '%s' is %s; it takes float32 or float64 values" % (
                    self.name, key, value.dtype))
        return inputs

    def extra_repr(self):
        return "name=%s, options=%s" % (self.name, json.dumps(self.options))

    def _what(self):
        return self.name

    def _rebuild_args(self):
        # A subclass with an __init__ of its own is built again by it (what it added included).
        if self.__dict__.get("_built_with", (Model,))[0] is not Model:
            return super()._rebuild_args()
        return _rebuild_model, (self.name, self.options, self.config)

    def forward_tokens(self, tokens, cache=None):
        """The LM only: logits of tokens [B, n], following (and extending) a KVCache when given
        (under torch.no_grad(): the cache keeps no autograd graph)."""
        if not hasattr(self._impl, "forward_tokens"):
            raise _qkv.UsageError("%s: forward_tokens (logits that follow a KVCache) is the transformer language "
                                  "model's (transformer-lm); call this model on the tokens: model(tokens)" % self.name)
        return self._call(self._impl.forward_tokens, tokens, cache)


def create(name, **options):
    """A new model with qkv's initialisation; options and defaults as `qkv params NAME` lists them.
    Seed it with torch.manual_seed (qkv draws from torch's generator)."""
    text = settings_text(options, name)
    resolved = json.loads(_qkv.resolve_model_options(name, text))
    return Model(_qkv.create_model(name, text), name, resolved)


def load(path, allow_non_finite=False):
    """The model of a checkpoint file or a run folder (its checkpoints/best.ckpt), with its weights,
    in eval mode; model.config is the run's configuration (config.json)."""
    impl, config_text = _qkv.load_checkpoint(path_text(path), allow_non_finite)
    config = json.loads(config_text)
    model = Model(impl, config["model"]["name"], config["model"]["options"], config)
    return model.eval()


def load_weights(model, path):
    """Copies a weights file (torch.save of a state dict, `qkv export-weights`, a checkpoint) into model;
    names and shapes are checked first, all mismatches named in one qkv.DataError. A weight a part holds in
    place of its registered one (an assigned nn.Parameter) takes the loaded values, since it is what runs; a
    weight computed at call time (a parametrization, pruning) is refused first, since loading cannot set it."""
    held = model._held_weights()
    _qkv.load_weights(model._impl, path_text(path))
    with torch.no_grad():
        for registered, tensor in held:
            tensor.copy_(registered)
    return model


def predict_parts(run, points, category, **options):
    return _qkv.predict_parts(path_text(run), points, category, **options)


predict_parts.__doc__ = _qkv.predict_parts.__doc__  # the C++ binding's: defaults written once
predict_parts.__signature__ = signature_of(_qkv.predict_parts)


def parameter_count(name, points=1024, **options):
    """(parameters, activation floats per sample) from the options alone, as `qkv params` computes them."""
    return _qkv.model_size(name, settings_text(options, name), points)


__all__ = ["create", "load", "load_weights", "names", "describe", "parameter_count", "predict_parts",
           "set_max_parameters", "max_parameters", "Model", "AttentionMaps"]
