"""Arguments as qkv's C++ side reads them: settings as JSON text, from the
values Python code passes (numpy's and 0-d tensors' numbers included), and
paths as text."""
import json
import math
import numbers
import os

import torch

from . import _qkv


def _plain(value, name, what):
    """value with numpy's and torch's scalars as Python's; UsageError naming `name` for NaN or an infinity,
    which JSON cannot hold (json.dumps wrote NaN, which the C++ parser refused as "not JSON")."""
    if isinstance(value, dict):
        return {k: _plain(v, k, what) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, name, what) for v in value]
    if isinstance(value, torch.Tensor) and value.dim() == 0:
        value = value.item()
    if isinstance(value, (bool, str)) or value is None:
        return value
    if type(value).__name__ == "bool_":  # numpy's bool, not an Integral
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise _qkv.UsageError("%s: %s must be a finite number, got %r" % (what, name, float(value)))
        return float(value)
    return value  # json.dumps names what it cannot write


def settings_text(settings, what):
    """The JSON text of the dict `settings` (what: the model or data set, for messages)."""
    return json.dumps(_plain(settings, "", what))


def path_text(path):
    """A path given as str, bytes or os.PathLike, as text (str(b"x") is "b'x'", a name no file has)."""
    return os.fsdecode(os.fspath(path))
