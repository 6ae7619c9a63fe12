"""qkv.ops: values against brute force or the composed version, gradients by
gradcheck in float64, and the errors of bad arguments."""
import pytest
import torch
from torch.autograd import gradcheck

import qkv


def brute_knn(points, k):
    d = ((points[:, :, None, :] - points[:, None, :, :]) ** 2).sum(-1)
    return torch.sort(d, dim=-1, stable=True).indices[:, :, :k]  # nearest first, ties by index


def brute_fps(points, m, start=0):
    out = [start]
    dist = ((points - points[start]) ** 2).sum(-1)
    for _ in range(m - 1):
        nxt = int(torch.argmax(dist))
        out.append(nxt)
        dist = torch.minimum(dist, ((points - points[nxt]) ** 2).sum(-1))
    return torch.tensor(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dims", [3, 24])
def test_knn_equals_brute_force(dtype, dims):
    points = torch.randn(2, 300, dims, dtype=torch.float64)
    got = qkv.ops.knn(points.to(dtype), 16)
    assert got.shape == (2, 300, 16) and got.dtype == torch.int64
    want = brute_knn(points, 16)
    if dtype == torch.float64:
        assert torch.equal(got, want)
    else:
        # float32 may swap neighbours whose distances agree to rounding:
        # compare the distances they stand at, relative to their scale.
        d = ((points[:, :, None, :] - points[:, None, :, :]) ** 2).sum(-1)
        got_d, want_d = d.gather(2, got), d.gather(2, want)
        assert torch.allclose(got_d, want_d, rtol=1e-5, atol=1e-5 * float(d.max()))


def test_knn_single_cloud_and_errors():
    points = torch.randn(50, 3)
    assert qkv.ops.knn(points, 4).shape == (50, 4)
    with pytest.raises(qkv.DataError, match="fewer points than k"):
        qkv.ops.knn(torch.randn(1, 5, 3), 8)
    with pytest.raises(ValueError, match="expected points"):
        qkv.ops.knn(torch.randn(5), 2)
    with pytest.raises(qkv.UsageError, match="k must be >= 1"):
        qkv.ops.knn(points, 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_farthest_point_sample_equals_brute_force(dtype):
    points = torch.randn(3, 400, 3, dtype=torch.float64)
    got = qkv.ops.farthest_point_sample(points.to(dtype), 32, start=5)
    assert got.shape == (3, 32)
    for b in range(3):
        assert torch.equal(got[b], brute_fps(points[b], 32, 5))
    with pytest.raises(qkv.UsageError):
        qkv.ops.farthest_point_sample(points, 401)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scan_sized_clouds_equal_brute_force(dtype):
    # Past the sizes where knn (1,024 points of xyz) and farthest_point_sample
    # (4,096) take the k-d tree: the same indices, ties included, on a cloud
    # with duplicates and a flat part (integer coordinates: exact distances).
    torch.manual_seed(0)
    points = torch.randint(-6, 7, (4500, 3)).to(dtype)
    points[:1500, 2] = 0
    cloud = points[:2100]
    d = ((cloud[:, None, :].double() - cloud[None, :, :].double()) ** 2).sum(-1)
    d.fill_diagonal_(-1.0)  # itself first, before its duplicates
    assert torch.equal(qkv.ops.knn(cloud, 10), torch.sort(d, dim=-1, stable=True).indices[:, :10])
    assert torch.equal(qkv.ops.farthest_point_sample(points, 200, start=3), brute_fps(points, 200, 3))


def test_nearest_points():
    torch.manual_seed(1)
    points = torch.randn(3000, 3, dtype=torch.float64)
    queries = torch.cat([torch.randn(400, 3, dtype=torch.float64), points[:50]])
    d = ((queries[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    assert torch.equal(qkv.ops.nearest_points(queries, points), d.argmin(1))
    assert torch.equal(qkv.ops.nearest_points(queries.float(), points.float())[:400], d.argmin(1)[:400])
    with pytest.raises(qkv.UsageError, match="nearest_point_indices"):
        qkv.ops.nearest_points(queries, points[:0])


def naive_attention(q, k, v, causal=False, key_padding_mask=None, scale=None):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = scale * q @ k.transpose(-1, -2)
    nq, nk = q.shape[-2], k.shape[-2]
    allowed = torch.ones(nq, nk, dtype=torch.bool)
    if causal:
        allowed = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + (nk - nq)
    allowed = allowed.expand(q.shape[0], q.shape[1], nq, nk)
    if key_padding_mask is not None:
        allowed = allowed & ~key_padding_mask[:, None, None, :]
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v


@pytest.mark.parametrize("causal", [False, True])
def test_attention_equals_naive_and_gradcheck(causal):
    q = torch.randn(2, 3, 150, 16, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 3, 170, 16, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 3, 170, 8, dtype=torch.float64, requires_grad=True)
    pad = torch.zeros(2, 170, dtype=torch.bool)
    pad[1, 160:] = True
    out = qkv.ops.attention(q, k, v, causal=causal, key_padding_mask=pad, scale=0.3)
    want = naive_attention(q, k, v, causal, pad, 0.3)
    assert out.shape == (2, 3, 150, 8)
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12)
    # Two heads of 40 rows at half the widths: the numerical Jacobian costs two
    # forward calls an input element (7.1 s at three heads and the full widths, 1.6 s).
    small = [t[:, :2, :40, :width].detach().clone().requires_grad_() for t, width in ((q, 8), (k, 8), (v, 4))]
    assert gradcheck(lambda a, b, c: qkv.ops.attention(a, b, c, causal=causal, backend="tiled"), small)


def test_attention_float32_relative_to_scale():
    q, k, v = (torch.randn(1, 2, 300, 32) * 3 for _ in range(3))
    got = qkv.ops.attention(q, k, v)
    want = naive_attention(q.double(), k.double(), v.double())
    assert float((got.double() - want).abs().max()) <= 1e-5 * float(want.abs().max())


def test_attention_torch_backend_follows_qkvs_masks_or_is_refused_by_name():
    # PyTorch's fused attention where qkv was built against torch >= 2.1
    # (its CPU kernels here), qkv's end-aligned causal and padding included.
    q = torch.randn(2, 3, 20, 8, dtype=torch.float64)
    k = torch.randn(2, 3, 30, 8, dtype=torch.float64)
    v = torch.randn(2, 3, 30, 4, dtype=torch.float64)
    pad = torch.zeros(2, 30, dtype=torch.bool)
    pad[0, 25:] = True
    if not qkv.ops.torch_attention_available():
        with pytest.raises(qkv.UsageError, match="2.1 or later"):
            qkv.ops.attention(q, k, v, backend="torch")
        return
    out = qkv.ops.attention(q, k, v, causal=True, key_padding_mask=pad, backend="torch")
    assert torch.allclose(out, naive_attention(q, k, v, True, pad), rtol=1e-12, atol=1e-12)
    small = [t[:, :, :6].detach().clone().requires_grad_() for t in (q, k, v)]
    assert gradcheck(lambda a, b, c: qkv.ops.attention(a, b, c, causal=True, backend="torch"), small)


def test_attention_errors():
    q = torch.randn(1, 2, 8, 4)
    with pytest.raises(qkv.UsageError):
        qkv.ops.attention(q, q, torch.randn(1, 2, 9, 4))
    with pytest.raises(qkv.UsageError, match="backend"):
        qkv.ops.attention(q, q, q, backend="fast")


def vn_input(b=2, c=4, n=20, k=None, dtype=torch.float64):
    shape = (b, c, 3, n) if k is None else (b, c, 3, n, k)
    return torch.randn(*shape, dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("with_cross", [False, True])
def test_edge_features_fused_equals_composed_and_gradcheck(with_cross):
    x = vn_input(n=12)
    idx = qkv.ops.knn(x.detach().flatten(1, 2).transpose(1, 2), 4)
    fused = qkv.ops.edge_features(x, idx, with_cross)
    assert fused.shape == (2, (3 if with_cross else 2) * 4, 3, 12, 4)
    assert torch.allclose(fused, qkv.ops.edge_features_composed(x, idx, with_cross), rtol=0, atol=1e-14)
    assert gradcheck(lambda t: qkv.ops.edge_features(t, idx, with_cross), (x,))


@pytest.mark.parametrize("shared", [False, True])
def test_vn_leaky_relu_fused_equals_composed_and_gradcheck(shared):
    x = vn_input(n=10)
    d = vn_input(c=1 if shared else 4, n=10)
    fused = qkv.ops.vn_leaky_relu(x, d, 0.2)
    assert torch.allclose(fused, qkv.ops.vn_leaky_relu_composed(x, d, 0.2), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda a, b: qkv.ops.vn_leaky_relu(a, b, 0.2), (x, d))


def test_vn_linear_and_batch_norm_gradcheck():
    x = vn_input(n=10)
    w = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(qkv.ops.vn_linear(x, w), torch.einsum("oc,bcxn->boxn", w, x), atol=1e-13)
    assert gradcheck(qkv.ops.vn_linear, (x, w))
    weight = torch.rand(4, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(4, dtype=torch.float64, requires_grad=True)

    def bn(fn, a, wt, bs):
        return fn(a, wt, bs, torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64), True)

    assert torch.allclose(bn(qkv.ops.vn_batch_norm, x, weight, bias),
                          bn(qkv.ops.vn_batch_norm_composed, x, weight, bias), rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda a, wt, bs: bn(qkv.ops.vn_batch_norm, a, wt, bs), (x, weight, bias))


def test_frame_coordinates_invariant_and_gradcheck():
    from conftest import random_rotation
    x = vn_input(n=7)
    frame = torch.randn(2, 3, 3, 7, dtype=torch.float64, requires_grad=True)
    out = qkv.ops.vn_frame_coordinates(x, frame)
    assert torch.allclose(out, qkv.ops.vn_frame_coordinates_composed(x, frame), rtol=1e-12, atol=1e-12)
    r = random_rotation()
    rot = lambda t: torch.einsum("ij,bcjn->bcin", r, t)  # noqa: E731
    assert torch.allclose(qkv.ops.vn_frame_coordinates(rot(x), rot(frame)), out, atol=1e-12)
    assert gradcheck(qkv.ops.vn_frame_coordinates, (x, frame))


def test_vn_attention_equivariant_and_gradcheck():
    from conftest import random_rotation
    q = torch.randn(1, 2, 9, 4, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 11, 4, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, 11, 5, 3, dtype=torch.float64, requires_grad=True)
    out = qkv.ops.vn_attention(q, k, v)
    assert out.shape == (1, 2, 9, 5, 3)
    r = random_rotation()
    rot = lambda t: t @ r.T  # noqa: E731
    assert torch.allclose(qkv.ops.vn_attention(rot(q), rot(k), rot(v)), rot(out), atol=1e-12)
    assert gradcheck(qkv.ops.vn_attention, (q, k, v))


def test_ops_on_the_meta_device_take_the_composed_path():
    # Another device than the CPU: the composed versions run (shape only on meta).
    x = torch.randn(1, 2, 3, 6).to("meta")
    d = torch.randn(1, 2, 3, 6).to("meta")
    assert qkv.ops.vn_leaky_relu(x, d).shape == (1, 2, 3, 6)


def test_ops_have_python_signatures_and_docstrings():
    import inspect
    assert list(inspect.signature(qkv.ops.knn).parameters) == ["points", "k"]
    assert inspect.signature(qkv.ops.knn).parameters["points"].annotation is torch.Tensor
    assert inspect.signature(qkv.ops.farthest_point_sample).parameters["start"].default == 0
    attention = inspect.signature(qkv.ops.attention).parameters
    assert attention["causal"].kind is inspect.Parameter.KEYWORD_ONLY and attention["causal"].default is False
    assert attention["key_padding_mask"].default is None
    assert inspect.signature(qkv.models.predict_parts).parameters["votes"].default == 3
    for name in qkv.ops.__all__:
        function = getattr(qkv.ops, name)
        inspect.signature(function)  # every op has one
        assert function.__name__ == name and len(function.__doc__) > 80, name
    # The wrapper passes keywords through to the binding.
    points = torch.randn(40, 3)
    assert torch.equal(qkv.ops.knn(points=points, k=3), qkv.ops.knn(points, 3))
