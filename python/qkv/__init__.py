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

from . import _qkv
from ._qkv import DataError, UsageError, blas_summary, set_threads
from . import data, models, nn, ops
from .models import load

__version__ = _qkv.__version__
__all__ = ["ops", "nn", "models", "data", "load", "UsageError", "DataError", "set_threads", "blas_summary"]


def _warn_about_openblas():
    # The CLI re-executes itself with the better kernels; a module can only tell.
    advice = _qkv.openblas_core_advice()
    if advice:
        import warnings
        warnings.warn("qkv: " + advice, RuntimeWarning, stacklevel=3)


_warn_about_openblas()
