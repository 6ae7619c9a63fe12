"""Second-order gradients through qkv's fused kernels: gradgradcheck passes
for every op with a fused backward; the gradient a create_graph backward
gives is the plain backward's, also where one input of an op is computed from
another, in every network of the registry; and a gradient penalty through a
whole VNT-Net has the derivative finite differences give (the fused backwards
differentiate their composed references under create_graph=True,
layers/second_order.h)."""
import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import qkv
from networks import MODELS, MODEL_IDS, inputs_of, weighted_sum

ops = qkv.ops


def f64(*shape, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=g).requires_grad_(grad)


def both_checks(fn, inputs):
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6)
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-6)


def test_vn_leaky_relu_second_order():
    both_checks(lambda x, d: ops.vn_leaky_relu(x, d, 0.2), (f64(2, 3, 3, 5, seed=1), f64(2, 3, 3, 5, seed=2)))
    both_checks(lambda x, d: ops.vn_leaky_relu(x, d, 0.0), (f64(2, 3, 3, 5, seed=3), f64(2, 1, 3, 5, seed=4)))


def test_edge_features_second_order():
    x = f64(2, 2, 3, 6, seed=5)
    idx = ops.knn(x.detach()[:, 0].transpose(1, 2).contiguous(), 3)
    both_checks(lambda x: ops.edge_features(x, idx, with_cross=True), (x,))


@pytest.mark.parametrize("backend", ["tiled", "torch"])
def test_attention_second_order_in_the_fused_kernels(backend):
    # The tiled kernel, and PyTorch's fused attention where qkv was built
    # against torch >= 2.1: both differentiate the naive formula under
    # create_graph, as every fused backward does.
    if backend == "torch" and not ops.torch_attention_available():
        pytest.skip("this build's torch has no fused attention")
    q, k, v = f64(1, 2, 5, 4, seed=6), f64(1, 2, 7, 4, seed=7), f64(1, 2, 7, 3, seed=8)
    pad = torch.zeros(1, 7, dtype=torch.bool)
    pad[0, 6] = True
    for causal in (False, True):
        both_checks(lambda q, k, v: ops.attention(q, k, v, causal=causal, key_padding_mask=pad, backend=backend),
                    (q, k, v))


def test_vn_batch_norm_second_order_keeps_the_running_statistics():
    x, w, b = f64(4, 3, 3, 5, seed=9), f64(3, seed=10), f64(3, seed=11)
    mean, var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    for training in (True, False):
        both_checks(lambda x, w, b: ops.vn_batch_norm(x, w, b, mean.clone(), var.clone(), training), (x, w, b))
    # A create_graph backward recomputes from copies: the statistics move once per forward only.
    running_mean, running_var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    y = ops.vn_batch_norm(x, w, b, running_mean, running_var, True)
    after_forward = running_mean.clone()
    (gx,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
    gx.pow(2).sum().backward()
    assert torch.equal(running_mean, after_forward)


def test_vn_frame_coordinates_second_order():
    both_checks(ops.vn_frame_coordinates, (f64(2, 3, 3, 4, seed=12), f64(2, 3, 3, 4, seed=13)))


def relative(a, b):
    return float((a - b).abs().max() / (b.abs().max() + 1e-300))


def mix(x, seed):
    """A fixed linear map of x's channels [B, C, 3, M]: another input computed from x."""
    u = torch.randn(x.shape[1], x.shape[1], dtype=x.dtype, generator=torch.Generator().manual_seed(seed))
    return torch.einsum("oc,bcim->boim", u, x)


SHARED_HISTORY = {
    # The same tensor as two or three inputs, and an input computed from another.
    "attention(x, x, x)": lambda x: ops.attention(x, x, x, backend="tiled"),
    "attention(x, 2x, x) causal": lambda x: ops.attention(x, 2 * x, x, causal=True, backend="tiled"),
    "torch attention(x, x, x)": lambda x: ops.attention(x, x, x, backend="torch"),
    "vn_leaky_relu(x, U x)": lambda x: ops.vn_leaky_relu(mix(x, 1)[:, :, :, :5], mix(x, 2)[:, :, :, :5], 0.2),
    "vn_frame_coordinates(x, U x)": lambda x: ops.vn_frame_coordinates(x[:, :, :, :4], mix(x, 3)[:, :, :, :4]),
    "vn_batch_norm(x, x0, x1)": lambda x: ops.vn_batch_norm(
        x, x[0, :, 0, 0], x[1, :, 1, 1], torch.zeros(3, dtype=x.dtype), torch.ones(3, dtype=x.dtype), True),
}


@pytest.mark.parametrize("case", list(SHARED_HISTORY))
def test_a_create_graph_backward_gives_the_plain_gradient_where_inputs_share_history(case):
    # autograd.grad with respect to an op's own inputs would give each the
    # total derivative, paths through the others included, and the engine
    # would add those paths again (attention(x, x, x): three times the gradient).
    if case.startswith("torch") and not ops.torch_attention_available():
        pytest.skip("this build's torch has no fused attention")
    fn = SHARED_HISTORY[case]
    x = f64(2, 3, 3, 6, seed=15)
    out = fn(x)
    weights = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(16))
    (plain,) = torch.autograd.grad((out * weights).sum(), x, retain_graph=True)
    (graphed,) = torch.autograd.grad((out * weights).sum(), x, create_graph=True)
    assert graphed.requires_grad
    assert relative(graphed, plain) < 1e-12
    assert gradgradcheck(fn, (x,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("name,options", MODELS, ids=MODEL_IDS)
def test_every_network_gives_the_plain_gradient_under_create_graph(name, options, training):
    # A network feeds one tensor into several inputs of a fused op (q, k and v;
    # a VN feature and its learnt direction): the gradient penalty's first
    # derivative must be the plain one, for the inputs and every parameter.
    torch.manual_seed(0)
    model = qkv.models.create(name, **options).double().train(training)
    inputs = {k: (v.double().requires_grad_() if v.is_floating_point() else v) for k, v in inputs_of(model).items()}
    wrt = [v for v in inputs.values() if v.requires_grad] + [p for p in model.parameters()]
    loss = weighted_sum(model(**inputs))
    plain = torch.autograd.grad(loss, wrt, retain_graph=True, allow_unused=True)
    graphed = torch.autograd.grad(loss, wrt, create_graph=True, allow_unused=True)
    for i, (p, g) in enumerate(zip(plain, graphed)):
        assert (p is None) == (g is None), i
        if p is not None:
            assert relative(g, p) < 1e-10, i


@pytest.mark.parametrize("name,options", [("vnt", dict(linear_dim=4, heads=2, head_dim=4)), ("vn-dgcnn", {})])
def test_a_gradient_penalty_through_a_model_has_the_finite_difference_derivative(name, options):
    torch.manual_seed(0)
    model = qkv.models.create(name, classes=3, k=4, **options).double().eval()
    points = f64(2, 3, 24, seed=14, grad=False)

    def penalty(create_graph):
        # Differenced with the plain backward's gradient: independent of the
        # create_graph path that the analytic derivative takes.
        x = points.clone().requires_grad_()
        (g,) = torch.autograd.grad(model(points=x).logsumexp(-1).sum(), x, create_graph=create_graph)
        return g.pow(2).sum()

    p = penalty(True)
    weights = [w for w in model.parameters() if w.dim() == 2]
    analytic = torch.autograd.grad(p, weights[0])[0]
    w = weights[0]
    h = 1e-6
    for index in [(0, 0), (1, 2)]:
        index = tuple(i % s for i, s in zip(index, w.shape))
        with torch.no_grad():
            w[index] += h
        up = penalty(False).item()
        with torch.no_grad():
            w[index] -= 2 * h
        down = penalty(False).item()
        with torch.no_grad():
            w[index] += h
        numeric = (up - down) / (2 * h)
        assert analytic[index].item() == pytest.approx(numeric, rel=1e-5, abs=1e-7), index
