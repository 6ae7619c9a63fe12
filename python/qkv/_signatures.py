"""Python signatures for the C++ bindings, so that inspect.signature, help()
and editors that introspect see parameter names, defaults and types. They are
read from the first line pybind11 writes into each binding's __doc__
("knn(points: at::Tensor, k: int) -> at::Tensor"), so the names and defaults
are written once, in the binding."""
import ast
import functools
import inspect
import re
import typing

import torch

# As pybind11 2 (LibTorch 1.13's), pybind11 3.0 (PyTorch 2.11's) and 3.1 spell them.
_TYPES = {"at::Tensor": torch.Tensor, "torch.Tensor": torch.Tensor, "int": int, "typing.SupportsInt": int,
          "typing.SupportsInt | typing.SupportsIndex": int, "float": float, "typing.SupportsFloat": float,
          "typing.SupportsFloat | typing.SupportsIndex": float, "bool": bool, "str": str, "tuple": tuple}


def _annotation(text):
    text = text.strip()
    optional = re.fullmatch(r"Optional\[(.*)\]", text) or re.fullmatch(r"(.*) \| None", text)
    if optional:
        inner = _annotation(optional.group(1))
        return inspect.Parameter.empty if inner is inspect.Parameter.empty else typing.Optional[inner]
    return _TYPES.get(text, inspect.Parameter.empty)


def _split_top_level(text):
    """The comma-separated items of text, commas inside brackets or quotes kept."""
    items, depth, quote, current = [], 0, None, ""
    for c in text:
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        current += c
    if current.strip():
        items.append(current)
    return items


def signature_of(builtin):
    """The inspect.Signature of a pybind11 function, from its __doc__'s first line."""
    first = (builtin.__doc__ or "").split("\n", 1)[0]
    match = re.fullmatch(r"\w+\((.*)\)(?: -> (.*))?", first)
    if not match:
        raise ValueError("%s: no pybind11 signature line in its __doc__" % getattr(builtin, "__name__", builtin))
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = []
    for item in _split_top_level(match.group(1)):
        item = item.strip()
        if item == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        name, _, rest = item.partition(":")
        annotation, _, default = rest.partition(" = ")
        value = inspect.Parameter.empty
        if default:
            try:
                value = ast.literal_eval(default.strip())
            except (ValueError, SyntaxError):
                value = default.strip()  # a value pybind11 prints as C++ (kept as text)
        parameters.append(inspect.Parameter(name.strip(), kind, default=value, annotation=_annotation(annotation)))
    returns = _annotation(match.group(2) or "")
    return inspect.Signature(parameters, return_annotation=returns)


def with_signature(builtin):
    """builtin behind a Python function that carries its signature and docstring."""
    @functools.wraps(builtin)
    def call(*args, **kwargs):
        return builtin(*args, **kwargs)

    call.__signature__ = signature_of(builtin)
    return call
