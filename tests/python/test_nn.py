"""qkv.nn: the modules are ordinary nn.Modules over qkv's C++ weights, and
they keep the equivariance the library's tests establish."""
import io

import pytest
import torch

import qkv
from conftest import random_rotation


def rotate_vn(x, r):
    return torch.einsum("ij,bcj...->bci...", r, x)


def test_parameters_are_the_cpp_weights():
    layer = qkv.nn.VNLinearLeakyReLU(4, 8)
    names = dict(layer.named_parameters())
    assert set(names) == {"map_to_feat.weight", "map_to_dir.weight", "batchnorm.weight", "batchnorm.bias"}
    assert all(isinstance(p, torch.nn.Parameter) for p in names.values())
    assert set(dict(layer.named_buffers())) == {"batchnorm.running_mean", "batchnorm.running_var",
                                                "batchnorm.num_batches_tracked"}
    x = torch.randn(2, 4, 3, 30)
    before = layer(x).detach()
    with torch.no_grad():
        names["map_to_feat.weight"].mul_(2)  # the C++ forward reads the same tensor
    assert not torch.allclose(layer(x), before)
    layer(x).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in names.values())


def test_optimizer_step_changes_the_forward():
    layer = qkv.nn.VNLinear(3, 5)
    x = torch.randn(4, 3, 3, 10)
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
    loss0 = layer(x).pow(2).sum()
    loss0.backward()
    opt.step()
    assert float(layer(x).pow(2).sum()) < float(loss0)


def test_state_dict_round_trip_and_to_double():
    a, b = qkv.nn.VNTBlock(8, 2, 4, 16), qkv.nn.VNTBlock(8, 2, 4, 16)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b.load_state_dict(torch.load(buf))
    x = torch.randn(2, 8, 3, 20)
    assert torch.equal(a(x), b(x))
    b.double()
    assert all(p.dtype == torch.float64 for p in b.parameters())
    assert torch.allclose(b(x.double()), a(x).double(), rtol=1e-5, atol=1e-5)


def test_train_and_eval_reach_the_cpp_module():
    bn = qkv.nn.VNBatchNorm(4)
    x = torch.randn(8, 4, 3, 16) * 3
    bn.train()
    bn(x)
    assert int(bn.num_batches_tracked) == 1 and not torch.allclose(bn.running_mean, torch.zeros(4))
    bn.eval()
    mean = bn.running_mean.clone()
    bn(x)
    assert int(bn.num_batches_tracked) == 1 and torch.equal(bn.running_mean, mean)


@pytest.mark.parametrize("module,args", [
    (lambda: qkv.nn.VNLinearLeakyReLU(4, 6), ()),
    (lambda: qkv.nn.VNAttention(4, 2, 3), ()),
    (lambda: qkv.nn.VNFeedForward(4, 8), ()),
    (lambda: qkv.nn.VNTBlock(4, 2, 3, 8, True), ()),
    (lambda: qkv.nn.VNLayerNorm(4), ()),
])
def test_vn_modules_are_equivariant_in_float64(module, args):
    m = module().double().eval()
    x = torch.randn(2, 4, 3, 25, dtype=torch.float64)
    r = random_rotation()
    y = m(x)
    y = y[0] if isinstance(y, tuple) else y
    y_rot = m(rotate_vn(x, r))
    y_rot = y_rot[0] if isinstance(y_rot, tuple) else y_rot
    assert torch.allclose(y_rot, rotate_vn(y, r), rtol=0, atol=1e-11 * float(y.abs().max()))


class TinyVNTNet(torch.nn.Module):
    """A VNT-Net in miniature assembled from qkv.nn: edge conv on a kNN graph,
    a VNT block, the invariant layer, mean pool, a linear classifier."""

    def __init__(self, channels=8, classes=4, k=8):
        super().__init__()
        self.k = k
        self.edge = qkv.nn.VNEdgeConv(1, channels, k)
        self.block = qkv.nn.VNTBlock(channels, 2, 4, 16)
        self.invariant = qkv.nn.VNStdFeature(channels * 2)
        self.head = torch.nn.Linear(channels * 2 * 3, classes)

    def forward(self, points):  # [B, 3, N]
        idx = qkv.ops.knn(points.transpose(1, 2), self.k)
        x = self.edge(points.unsqueeze(1), idx)
        x = self.block(x)
        x = torch.cat([x, x.mean(-1, keepdim=True).expand_as(x)], 1)
        inv, _ = self.invariant(x)
        return self.head(inv.mean(-1).flatten(1))


def test_vnt_net_from_qkv_nn_is_rotation_invariant():
    net = TinyVNTNet().double().eval()
    points = torch.randn(3, 3, 64, dtype=torch.float64)
    logits = net(points)
    for _ in range(3):
        r = random_rotation()
        assert torch.allclose(net(r @ points), logits, rtol=0, atol=1e-10 * float(logits.abs().max()))


def test_a_training_batch_of_one_is_refused_and_leaves_the_statistics_finite():
    # A DataLoader's last batch of one sample: PyTorch's BatchNorm raises; the
    # running variance would otherwise turn NaN and every later eval with it.
    model = qkv.models.create("vnt", classes=3, linear_dim=4, heads=1, head_dim=4, k=4)
    model.train()
    with pytest.raises(ValueError, match="training batch of 1 value per channel.*drop_last=True"):
        model(points=torch.randn(1, 3, 32))
    model(points=torch.randn(2, 3, 32))
    assert all(torch.isfinite(b).all() for b in model.buffers())
    model.eval()
    assert torch.isfinite(model(points=torch.randn(1, 3, 32))).all()


def test_multi_head_attention_with_cache_matches_full_causal():
    mha = qkv.nn.MultiHeadAttention(16, 4, qk_dim=3, v_dim=5).double().eval()
    assert (mha.qk_dim, mha.v_dim) == (3, 5)
    assert dict(mha.named_parameters())["w_o"].shape == (16, 20)
    x = torch.randn(2, 10, 16, dtype=torch.float64)
    full, _ = mha(x, causal=True)
    cache = qkv.nn.KVCache(1, 2, 4, 16, 3, 5, dtype=torch.float64)
    # The cache keeps no autograd graph: decoding with gradients wanted would
    # train W_O alone, so it is refused and appends nothing.
    with pytest.raises(qkv.UsageError, match="keeps no autograd graph"):
        mha.forward_cached(x[:, :6], cache)
    assert len(cache) == 0
    with torch.no_grad():
        steps = [mha.forward_cached(x[:, :6], cache)] + [mha.forward_cached(x[:, t:t + 1], cache) for t in range(6, 10)]
        assert len(cache) == 10
        assert torch.allclose(torch.cat(steps, 1), full, rtol=0, atol=1e-12)
        with pytest.raises(qkv.UsageError):
            mha.forward_cached(torch.randn(2, 7, 16, dtype=torch.float64), cache)  # past max_len 16


def test_shared_heads_and_an_int8_window_cache_from_python():
    mha = qkv.nn.MultiHeadAttention(16, 4, kv_heads=1).eval()
    assert dict(mha.named_parameters())["w_k"].shape == (4, 16)  # one key head of width 16 / 4
    x = torch.randn(2, 12, 16)
    seen = torch.ones(12, 12, dtype=torch.bool).tril() & ~torch.ones(12, 12, dtype=torch.bool).tril(-4)
    full, _ = mha(x, causal=True, attn_mask=~seen)  # each position sees itself and the 3 before
    cache = qkv.nn.KVCache(1, 2, 1, 12, 4, 4, cache_dtype="int8", window=4)
    assert cache.cache_dtype == "int8" and cache.heads == 1
    with torch.inference_mode():
        steps = [mha.forward_cached(x[:, :5], cache)] + [mha.forward_cached(x[:, t:t + 1], cache) for t in range(5, 12)]
    # int8 keys and values: within a few quantisation steps of the float result.
    assert torch.allclose(torch.cat(steps, 1), full, rtol=0, atol=0.05 * float(full.abs().max()))
    with pytest.raises(qkv.UsageError, match="cache_dtype 'int3'"):
        qkv.nn.KVCache(1, 2, 1, 12, 4, 4, cache_dtype="int3")


def test_multi_head_attention_weights_and_masks():
    mha = qkv.nn.MultiHeadAttention(8, 2)
    x = torch.randn(1, 5, 8)
    pad = torch.tensor([[False, False, False, True, True]])
    out, w = mha(x, key_padding_mask=pad, need_weights=True)
    assert out.shape == (1, 5, 8) and w.shape == (1, 2, 5, 5)
    assert torch.all(w[..., 3:] == 0) and torch.allclose(w.sum(-1), torch.ones(1, 2, 5))


def test_attn_mask_means_what_torch_multihead_attentions_does():
    # A bool attn_mask is True where a query may NOT attend, as in
    # torch.nn.MultiheadAttention; a float one is added to the scores.
    mha = qkv.nn.MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    blocked = torch.rand(5, 5) < 0.4
    blocked.fill_diagonal_(False)
    out, w = mha(x, attn_mask=blocked, need_weights=True)
    added = torch.zeros(5, 5, dtype=torch.float64).masked_fill(blocked, float("-inf"))
    assert torch.allclose(out, mha(x, attn_mask=added)[0], rtol=0, atol=1e-12)
    assert torch.all(w[..., blocked] == 0)
    with pytest.raises(qkv.UsageError, match=r"attn_mask \[5, 4\] does not broadcast to the scores"):
        mha(x, attn_mask=blocked[:, :4])
    with pytest.raises(qkv.UsageError, match="attn_mask must be bool .* or floating point"):
        mha(x, attn_mask=blocked.long())


def test_parts_are_not_called_alone_and_not_copied_alone():
    block = qkv.nn.VNTBlock(4, 2, 3, 8)
    with pytest.raises(RuntimeError, match="inside its parent"):
        block.attn(torch.randn(1, 4, 3, 5))
    import copy
    with pytest.raises(TypeError, match="cannot be copied alone"):
        copy.deepcopy(block.attn)


def test_bad_constructor_arguments_raise():
    with pytest.raises(qkv.UsageError):
        qkv.nn.MultiHeadAttention(10, 3)  # 10 not divisible by 3
    with pytest.raises(ValueError):
        qkv.nn.VNLinear(4, 2)(torch.randn(2, 3, 3, 5))  # 3 channels into a 4-channel layer
