"""torch.nn.Module classes around qkv's C++ modules (docs/python.md).

Each class builds the C++ module and adopts its weights as ordinary
nn.Parameters (see _modules.CppModule): state_dict, .to(), optimizers,
hooks on parameters and torch.save(m.state_dict()) work as usual. Shapes
follow the library: VN features [B, C, 3, N] (or [B, C, 3, N, k] on a kNN
graph); attention inputs [B, N, D]. update_bn and sync_batch_norm are
torch.optim.swa_utils.update_bn and torch.nn.SyncBatchNorm.convert_sync_batchnorm
for models that hold them.
"""
import torch

from . import _qkv
from ._modules import CppModule, _Part
from ._signatures import signature_of


def _init_from(cpp):
    """An __init__ that builds the C++ module cpp(*args, **kwargs), with the binding's signature: argument names
    and defaults are written once, in the binding (python/src/modules.cpp)."""
    def __init__(self, *args, **kwargs):
        CppModule.__init__(self, cpp(*args, **kwargs))

    __init__.__signature__ = signature_of(cpp.__init__)
    return __init__


class VNLinear(CppModule):
    """W x over channels (no bias): [B, C_in, 3, ...] -> [B, C_out, 3, ...]."""

    __init__ = _init_from(_qkv.VNLinear)


class VNLeakyReLU(CppModule):
    """Vector leaky ReLU with a learned direction per channel (or one shared)."""

    __init__ = _init_from(_qkv.VNLeakyReLU)


class VNBatchNorm(CppModule):
    """Batch norm of the vector norms, directions kept; any trailing dims."""

    __init__ = _init_from(_qkv.VNBatchNorm)


class VNLayerNorm(CppModule):
    """Layer norm of the vector norms over the channels of each point."""

    __init__ = _init_from(_qkv.VNLayerNorm)


class VNLinearLeakyReLU(CppModule):
    """Vector Neurons' VNLinearLeakyReLU: BN(W x), direction U x, leaky ReLU (fused)."""

    __init__ = _init_from(_qkv.VNLinearLeakyReLU)


class VNMaxPool(CppModule):
    """Max pool over the last dim by a learned direction: [B, C, 3, N] -> [B, C, 3]."""

    __init__ = _init_from(_qkv.VNMaxPool)


class VNStdFeature(CppModule):
    """The invariant layer: forward(x) -> (invariant [B, C, 3, ...], frame [B, 3, 3, ...])."""

    __init__ = _init_from(_qkv.VNStdFeature)


class VNEdgeConv(CppModule):
    """Edge features on a kNN graph, VNLinearLeakyReLU, mean over neighbours: forward(x, idx)."""

    __init__ = _init_from(_qkv.VNEdgeConv)


class VNAttention(CppModule):
    """VNT-Net's multi-head VNAttention: forward(x [B, C, 3, N], need_weights=False)
    -> (y [B, C, 3, N], weights [B, H, N, N] or None). The residual is the caller's."""

    __init__ = _init_from(_qkv.VNMultiHeadAttention)


class VNFeedForward(CppModule):
    """The VN-FFN: VNLinear, VN-ReLU, VNLinear."""

    __init__ = _init_from(_qkv.VNFeedForward)


class VNTBlock(CppModule):
    """VNT-Net's block: x + VNAttention(x), then + VN-FFN (pre-norm with layer_norm)."""

    __init__ = _init_from(_qkv.VNTBlock)


KVCache = _qkv.KVCache
kv_cache_bytes = _qkv.kv_cache_bytes


class MultiHeadAttention(CppModule):
    """Multi-head attention with per-head query/key width qk_dim (r) and value
    width v_dim (d_v) independent of embed_dim (D), and W_O back to D.

    forward(query, key, value, causal=False, key_padding_mask=None,
            attn_mask=None, need_weights=False) -> (out [B, Nq, D], weights or None)
    The masks mean what torch.nn.MultiheadAttention's do: key_padding_mask
    [B, Nk] bool, True = padding; attn_mask broadcast to [B, H, Nq, Nk] (torch's
    3-D [B*H, Nq, Nk] only for B = 1), bool with True = may not attend, or float
    added to the scores.
    forward_cached(x, cache, layer=0, causal=True) -> out: self-attention of the
    new positions x [B, n, D] over a KVCache(layers, B, kv_heads, max_len, qk_dim,
    v_dim, cache_dtype="int8", window=W), whose keys and values it appends.
    kv_heads < heads (a divisor; 1 = multi-query) shares each key/value head
    among heads / kv_heads query heads.
    """

    __init__ = _init_from(_qkv.MultiHeadAttention)

    def forward(self, query, key=None, value=None, causal=False, key_padding_mask=None, attn_mask=None,
                need_weights=False):
        key = query if key is None else key
        value = key if value is None else value
        return self._call(self._impl.forward, query, key, value, causal, key_padding_mask, attn_mask, need_weights)

    def forward_cached(self, x, cache, layer=0, causal=True):
        return self._call(self._impl.forward_cached, x, cache, layer, causal)

    @property
    def qk_dim(self):
        return self._impl.qk_dim

    @property
    def v_dim(self):
        return self._impl.v_dim


def _to_device(batch, device):
    if isinstance(batch, dict):
        return {key: _to_device(value, device) for key, value in batch.items()}
    return batch.to(device) if isinstance(batch, torch.Tensor) else batch


def update_bn(loader, model, device=None) -> None:
    """torch.optim.swa_utils.update_bn for models that hold qkv modules.

    PyTorch's update_bn finds only its own batch norms (qkv's are not
    torch.nn.BatchNorm modules, so it leaves their statistics as they were).
    This recomputes both: every batch norm of `model`, qkv's and PyTorch's, is
    reset, and its running statistics become the plain average over the
    batches of `loader` (PyTorch's BatchNorm with momentum=None), one pass in
    training mode without gradients; each layer's momentum and the model's
    mode are restored after. As PyTorch's: a batch that is a list or tuple
    gives its first element (its inputs), moved to `device` when given; inputs
    that are a dict (qkv.data's) are passed as keyword arguments.
    """
    parts = [module._impl for module in model.modules() if isinstance(module, _Part)]
    torch_norms = {module: module.momentum for module in model.modules()
                   if isinstance(module, torch.nn.modules.batchnorm._BatchNorm)}
    recount = _qkv.BatchStatisticsRecount(parts)  # resets qkv's batch norms
    was_training = model.training
    try:
        if not recount.layers and not torch_norms:
            return
        for norm in torch_norms:
            norm.reset_running_stats()
            norm.momentum = None
        model.train()
        with torch.no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = _to_device(batch, device)
                if isinstance(batch, dict):
                    model(**batch)
                else:
                    model(batch)
    finally:
        recount.end()
        for norm, momentum in torch_norms.items():
            norm.momentum = momentum
        model.train(was_training)


def sync_batch_norm(model, process_group=None):
    """torch.nn.SyncBatchNorm.convert_sync_batchnorm for qkv's batch norms.

    PyTorch's conversion finds only its own batch norms. After this, every
    qkv batch norm of `model` computes its training statistics over the batch
    of all ranks of `process_group` (torch.distributed's default group when
    None), in the forward and in the backward, as qkv's own data-parallel
    trainer does; returns `model`. Call convert_sync_batchnorm as well for
    PyTorch's batch norms. A copy of the model (deepcopy, AveragedModel) is
    not synchronised.
    """
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise _qkv.UsageError("sync_batch_norm: torch.distributed is not initialized (call "
                              "torch.distributed.init_process_group first)")
    group = process_group if process_group is not None else dist.group.WORLD

    def all_reduce(tensor):
        dist.all_reduce(tensor, group=group)

    for module in model.modules():
        if isinstance(module, CppModule):  # held by the module: the layers sum over the ranks while it lives
            object.__setattr__(module, "_batch_norm_ranks",
                               _qkv.BatchNormRanks([module._impl], all_reduce, dist.get_world_size(group)))
    return model


__all__ = ["VNLinear", "VNLeakyReLU", "VNBatchNorm", "VNLayerNorm", "VNLinearLeakyReLU", "VNMaxPool", "VNStdFeature",
           "VNEdgeConv", "VNAttention", "VNFeedForward", "VNTBlock", "MultiHeadAttention", "KVCache", "kv_cache_bytes",
           "update_bn", "sync_batch_norm"]
