"""qkv's kernels as functions on torch tensors (docs/python.md).

Autograd: attention, edge_features, vn_linear, vn_leaky_relu,
vn_batch_norm, vn_frame_coordinates and vn_attention have first derivatives
(qkv's own backward kernels on the CPU); knn, farthest_point_sample and
nearest_points return indices (a k-d tree on large clouds of xyz). float32
and float64 on the CPU run qkv's fused kernels;
on another device the composed PyTorch version runs (correct, not fast),
and farthest_point_sample samples a CPU copy.

VN features are [B, C, 3, N] (a list of C 3-D vectors per point), as in
Vector Neurons; points for knn and farthest_point_sample are [B, N, D] or
[N, D].
"""
from ._qkv.ops import (  # noqa: F401
    knn,
    farthest_point_sample,
    nearest_points,
    attention,
    torch_attention_available,
    edge_features,
    edge_features_composed,
    vn_linear,
    vn_leaky_relu,
    vn_leaky_relu_composed,
    vn_batch_norm,
    vn_batch_norm_composed,
    vn_frame_coordinates,
    vn_frame_coordinates_composed,
    vn_attention,
    vn_norm,
)

from ._signatures import with_signature as _with_signature

# The *_composed functions are the same operations from plain LibTorch ops:
# the references the tests compare the fused kernels with.
__all__ = [
    "knn",
    "farthest_point_sample",
    "nearest_points",
    "attention",
    "torch_attention_available",
    "edge_features",
    "edge_features_composed",
    "vn_linear",
    "vn_leaky_relu",
    "vn_leaky_relu_composed",
    "vn_batch_norm",
    "vn_batch_norm_composed",
    "vn_frame_coordinates",
    "vn_frame_coordinates_composed",
    "vn_attention",
    "vn_norm",
]

# Each with a Python signature (inspect.signature, help, editors), read from the binding.
globals().update({_name: _with_signature(globals()[_name]) for _name in __all__})
