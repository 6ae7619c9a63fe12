"""torch.nn.Module classes around qkv's C++ modules (docs/python.md).

Each class builds the C++ module and adopts its weights as ordinary
nn.Parameters (see _modules.CppModule): state_dict, .to(), optimizers,
hooks on parameters and torch.save(m.state_dict()) work as usual. Shapes
follow the library: VN features [B, C, 3, N] (or [B, C, 3, N, k] on a kNN
graph); attention inputs [B, N, D].
"""
from . import _qkv
from ._modules import CppModule


class VNLinear(CppModule):
    """W x over channels (no bias): [B, C_in, 3, ...] -> [B, C_out, 3, ...]."""

    def __init__(self, in_channels, out_channels):
        super().__init__(_qkv.VNLinear(in_channels, out_channels))


class VNLeakyReLU(CppModule):
    """Vector leaky ReLU with a learned direction per channel (or one shared)."""

    def __init__(self, channels, share=False, negative_slope=0.2):
        super().__init__(_qkv.VNLeakyReLU(channels, share, negative_slope))


class VNBatchNorm(CppModule):
    """Batch norm of the vector norms, directions kept; any trailing dims."""

    def __init__(self, channels, momentum=0.1, eps=1e-5):
        super().__init__(_qkv.VNBatchNorm(channels, momentum, eps))


class VNLayerNorm(CppModule):
    """Layer norm of the vector norms over the channels of each point."""

    def __init__(self, channels, eps=1e-5):
        super().__init__(_qkv.VNLayerNorm(channels, eps))


class VNLinearLeakyReLU(CppModule):
    """Vector Neurons' VNLinearLeakyReLU: BN(W x), direction U x, leaky ReLU (fused)."""

    def __init__(self, in_channels, out_channels, share=False, negative_slope=0.2, batch_norm=True):
        super().__init__(_qkv.VNLinearLeakyReLU(in_channels, out_channels, share, negative_slope, batch_norm))


class VNMaxPool(CppModule):
    """Max pool over the last dim by a learned direction: [B, C, 3, N] -> [B, C, 3]."""

    def __init__(self, channels):
        super().__init__(_qkv.VNMaxPool(channels))


class VNStdFeature(CppModule):
    """The invariant layer: forward(x) -> (invariant [B, C, 3, ...], frame [B, 3, 3, ...])."""

    def __init__(self, in_channels, normalize_frame=False, share=False, negative_slope=0.2):
        super().__init__(_qkv.VNStdFeature(in_channels, normalize_frame, share, negative_slope))


class VNEdgeConv(CppModule):
    """Edge features on a kNN graph, VNLinearLeakyReLU, mean over neighbours: forward(x, idx)."""

    def __init__(self, in_channels, out_channels, k, with_cross=False, negative_slope=0.2):
        super().__init__(_qkv.VNEdgeConv(in_channels, out_channels, k, with_cross, negative_slope))


class VNAttention(CppModule):
    """VNT-Net's multi-head VNAttention: forward(x [B, C, 3, N], need_weights=False)
    -> (y [B, C, 3, N], weights [B, H, N, N] or None). The residual is the caller's."""

    def __init__(self, channels, heads, head_dim):
        super().__init__(_qkv.VNMultiHeadAttention(channels, heads, head_dim))


class VNFeedForward(CppModule):
    """The VN-FFN: VNLinear, VN-ReLU, VNLinear."""

    def __init__(self, channels, hidden):
        super().__init__(_qkv.VNFeedForward(channels, hidden))


class VNTBlock(CppModule):
    """VNT-Net's block: x + VNAttention(x), then + VN-FFN (pre-norm with layer_norm)."""

    def __init__(self, channels, heads, head_dim, ffn_hidden, layer_norm=False):
        super().__init__(_qkv.VNTBlock(channels, heads, head_dim, ffn_hidden, layer_norm))


KVCache = _qkv.KVCache
kv_cache_bytes = _qkv.kv_cache_bytes


class MultiHeadAttention(CppModule):
    """Multi-head attention with per-head query/key width qk_dim (r) and value
    width v_dim (d_v) independent of embed_dim (D), and W_O back to D.

    forward(query, key, value, causal=False, key_padding_mask=None,
            attn_mask=None, need_weights=False) -> (out [B, Nq, D], weights or None)
    forward_cached(x, cache, layer=0, causal=True) -> out: self-attention of the
    new positions x [B, n, D] over a KVCache(layers, B, kv_heads, max_len, qk_dim,
    v_dim, cache_dtype="int8", window=W), whose keys and values it appends.
    kv_heads < heads (a divisor; 1 = multi-query) shares each key/value head
    among heads / kv_heads query heads.
    """

    def __init__(self, embed_dim, heads, qk_dim=0, v_dim=0, kv_dim=0, bias=True, dropout=0.0, kv_heads=0):
        super().__init__(_qkv.MultiHeadAttention(embed_dim, heads, qk_dim, v_dim, kv_dim, bias, dropout, kv_heads))

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


__all__ = ["VNLinear", "VNLeakyReLU", "VNBatchNorm", "VNLayerNorm", "VNLinearLeakyReLU", "VNMaxPool", "VNStdFeature",
           "VNEdgeConv", "VNAttention", "VNFeedForward", "VNTBlock", "MultiHeadAttention", "KVCache", "kv_cache_bytes"]
