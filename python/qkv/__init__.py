"""qkv from PyTorch: the kernels, layers, models and readers of qkv's C++
library (https://github.com/ -- see the repository's README, "From Python").

    qkv.ops     functions on tensors with autograd (knn, farthest_point_sample,
                attention, the fused vector-neuron operations)
    qkv.nn      torch.nn.Module classes: the VN layers, VNT-Net's attention,
                multi-head attention with a KV cache
    qkv.models  every model of `qkv params`: create(name, **options), load(run)
    qkv.data    read_shape, ModelNet40 / ShapeNetPart / synthetic data sets,
                read_nifti, the MHCA cohort

Every call runs qkv's C++ code; errors arrive as qkv.UsageError (a bad
argument) or qkv.DataError (a bad file, named in the message), both
ValueErrors. The API reference is docs/python.md.
"""
import torch  # noqa: F401 (loads LibTorch and its Python bindings before qkv's module)


def _check_built_for():
    # The module links the LibTorch and libpython it was built against; under
    # another torch or Python it would fail to load with an "undefined
    # symbol", or load and crash. The build records both (CMakeLists.txt).
    import json
    import os
    import sys
    path = os.path.join(os.path.dirname(__file__), "_built_for.json")
    try:
        with open(path) as f:
            built = json.load(f)
    except (OSError, ValueError):
        return  # a build without the record: nothing to compare
    python = "%d.%d" % sys.version_info[:2]
    if built.get("torch") != torch.__version__ or built.get("python") != python:
        raise ImportError("qkv was built for torch %s on Python %s, but this interpreter (%s) has torch %s on "
                          "Python %s: rebuild qkv for it (pip install --no-build-isolation . with this "
                          "interpreter; docs/python.md)" % (built.get("torch"), built.get("python"), sys.executable,
                                                           torch.__version__, python))


_check_built_for()

from . import _qkv  # noqa: E402
from ._qkv import (DataError, UsageError, blas_summary, keep_freed_memory, optional_libraries, release_memory,
                   set_threads)
from . import data, models, nn, ops
from .models import load

__version__ = _qkv.__version__
__all__ = ["ops", "nn", "models", "data", "load", "UsageError", "DataError", "set_threads", "blas_summary",
           "keep_freed_memory", "release_memory", "optional_libraries"]


def _keep_freed_memory_unless_told():
    # glibc's malloc unmaps large freed blocks and faults them in again on the next step; keeping them is what
    # makes a training step from python3 run at the C++ speed (keep_freed_memory's doc, docs/python.md).
    import os
    setting = os.environ.get("QKV_KEEP_FREED_MEMORY", "1")
    if setting not in ("0", "1"):
        raise ImportError("QKV_KEEP_FREED_MEMORY=%s: expected 0 (leave glibc's malloc as it is) or 1 (the default)"
                          % setting)
    if setting == "1":
        keep_freed_memory(True)


_keep_freed_memory_unless_told()


def _allow_weights_only_loads():
    # torch.load reads with weights_only=True by default from PyTorch 2.6 on:
    # only allow-listed callables may run. A pickled qkv module or model is
    # its rebuild function, its class (for qkv.nn), its constructor's plain
    # arguments and tensors; listing those lets torch.load(f) read qkv objects
    # without allowing anything else.
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is None:
        return
    from ._modules import CppModule, _rebuild
    classes = [c for c in vars(nn).values() if isinstance(c, type) and issubclass(c, CppModule)]
    add([models._rebuild_model, _rebuild] + classes)


_allow_weights_only_loads()


def _warn_about_openblas():
    # The CLI re-executes itself with the better kernels; a module can only tell.
    advice = _qkv.openblas_core_advice()
    if advice:
        import warnings
        warnings.warn("qkv: " + advice, RuntimeWarning, stacklevel=3)


_warn_about_openblas()
