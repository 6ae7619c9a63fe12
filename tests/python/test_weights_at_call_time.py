"""What a module holds at call time is what runs: PyTorch's tools that hand a
module other tensors for a call (torch.func.functional_call, parametrize,
prune, an nn.Parameter assigned in place of another) change a qkv module's
output and receive its gradients, as they do for PyTorch's own modules."""
import copy
import warnings

import pytest
import torch
import torch.nn.utils.parametrize as parametrize
import torch.nn.utils.prune as prune

import qkv
from networks import MODELS, MODEL_IDS, POINT_CLOUD, inputs_of, weighted_sum

try:
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call


def test_every_network_of_the_registry_is_covered():
    covered = {name for name, _ in MODELS}
    assert covered == {n for n in qkv.models.names() if qkv.models.describe(n)["network"]}


@pytest.mark.parametrize("name,options", MODELS, ids=MODEL_IDS)
def test_every_weight_of_every_model_is_read_at_call_time(name, options):
    model = qkv.models.create(name, **options).eval()
    inputs = inputs_of(model)
    weighted_sum(model(**inputs)).backward()
    reference = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    expected = model(**inputs).detach()
    model.zero_grad(set_to_none=True)

    # Copies of every weight, bound for one call: the same output, and every gradient reaches the copies (a
    # weight the C++ forward read from its own tensor would leave its copy without one, and give the
    # registered parameter a gradient).
    copies = {n: p.detach().clone().requires_grad_(True) for n, p in model.named_parameters()}
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    out = functional_call(model, {**copies, **buffers}, (), inputs)
    assert torch.equal(out, expected)
    weighted_sum(out).backward()
    assert [n for n, p in model.named_parameters() if p.grad is not None] == []
    for n, grad in reference.items():
        if grad is None:
            assert copies[n].grad is None, n
        else:
            assert copies[n].grad is not None, "%s: no gradient reached the tensor bound to it" % n
            torch.testing.assert_close(copies[n].grad, grad, rtol=1e-5, atol=1e-6 * float(grad.abs().max()) + 1e-12)

    # Other values change the output.
    shifted = {n: p.detach() * 1.5 + 0.05 for n, p in model.named_parameters()}
    assert not torch.allclose(functional_call(model, shifted, (), inputs), expected)


@pytest.mark.parametrize("name,options", MODELS, ids=MODEL_IDS)
def test_buffers_bound_for_a_training_call_take_its_updates(name, options):
    model = qkv.models.create(name, **options).train()
    inputs = inputs_of(model)
    before = {n: b.clone() for n, b in model.named_buffers()}
    bound = {n: b.clone() for n, b in model.named_buffers()}
    torch.manual_seed(1)
    functional_call(model, bound, (), inputs)
    for n, b in model.named_buffers():
        assert torch.equal(b, before[n]), "%s: the registered buffer changed in a call that bound another" % n
    torch.manual_seed(1)
    model(**inputs)  # the same call on the registered buffers updates the same ones, equally
    for n, b in model.named_buffers():
        torch.testing.assert_close(bound[n], b, rtol=1e-6, atol=1e-7, msg=n)
    if before:
        assert any(not torch.equal(b, before[n]) for n, b in model.named_buffers())


def vn_reference(weight, x):
    return torch.einsum("oi,bijn->bojn", weight, x)


def test_an_assigned_parameter_is_the_one_that_runs_and_trains():
    layer = qkv.nn.VNLinear(4, 6)
    x = torch.randn(2, 4, 3, 10)
    new = torch.nn.Parameter(torch.randn(6, 4))
    layer.weight = new
    torch.testing.assert_close(layer(x), vn_reference(new, x))
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    before = new.detach().clone()
    layer(x).pow(2).sum().backward()
    optimizer.step()
    assert not torch.equal(new, before)
    torch.testing.assert_close(layer(x), vn_reference(new, x))


def test_a_parametrization_runs_and_its_original_trains():
    layer = qkv.nn.VNLinear(4, 6)
    x = torch.randn(2, 4, 3, 10)
    plain = layer(x).detach()
    torch.nn.utils.parametrizations.spectral_norm(layer)
    normed = layer.weight
    assert not torch.allclose(normed, layer.parametrizations.weight.original)
    out = layer(x)
    torch.testing.assert_close(out, vn_reference(normed, x))
    assert not torch.allclose(out, plain)
    out.pow(2).sum().backward()
    assert layer.parametrizations.weight.original.grad.abs().sum() > 0


def test_a_parametrization_inside_a_model():
    class Doubled(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    model = qkv.models.create("vnt", **POINT_CLOUD, classes=3, head_hidden=[8]).eval()
    points = torch.randn(2, 3, 24)
    doubled = copy.deepcopy(model)
    with torch.no_grad():
        doubled.get_submodule("blocks.0.attn.w_v").weight.mul_(2)
    parametrize.register_parametrization(model.get_submodule("blocks.0.attn.w_v"), "weight", Doubled())
    torch.testing.assert_close(model(points), doubled(points))


def test_pruning_masks_the_weight_that_runs():
    block = qkv.nn.VNTBlock(8, 2, 4, 16)
    x = torch.randn(2, 8, 3, 12)
    masked = copy.deepcopy(block)
    prune.l1_unstructured(block.attn.w_q, "weight", amount=0.5)
    mask = block.attn.w_q.weight_mask
    assert 0 < mask.sum() < mask.numel()
    with torch.no_grad():
        masked.attn.w_q.weight.mul_(mask)
    torch.testing.assert_close(block(x), masked(x))
    block(x).sum().backward()
    grad = block.attn.w_q.weight_orig.grad
    assert torch.all(grad[mask == 0] == 0) and grad[mask == 1].abs().sum() > 0
    block(x).sum().backward()  # the pre-hook recomputes the masked weight: a second backward works
    copied = copy.deepcopy(block)  # a plain module holding the masked weight
    assert not hasattr(copied.attn.w_q, "weight_orig")
    torch.testing.assert_close(copied(x), masked(x))
    prune.remove(block.attn.w_q, "weight")
    torch.testing.assert_close(block(x), masked(x))


def test_functional_call_on_a_qkv_nn_module_equals_loaded_weights():
    attention = qkv.nn.MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    other = {n: torch.randn_like(p) for n, p in attention.named_parameters()}
    loaded = copy.deepcopy(attention)
    loaded.load_state_dict(other)
    out, _ = functional_call(attention, other, (x,))
    torch.testing.assert_close(out, loaded(x)[0])
    assert not torch.allclose(out, attention(x)[0])


def test_a_weight_of_other_sizes_or_dtype_is_refused_by_name():
    model = qkv.models.create("vnt", **POINT_CLOUD, classes=3, head_hidden=[8])
    points = torch.randn(2, 3, 24)
    with pytest.raises(qkv.UsageError, match=r"blocks\.0\.attn\.w_q\.weight: given \[3, 3\], but the module was "
                                             r"built for \[8, 4\]"):
        functional_call(model, {"blocks.0.attn.w_q.weight": torch.randn(3, 3)}, (points,))
    with pytest.raises(qkv.UsageError, match=r"head.*Double.*Float"):
        functional_call(model, {"head.layers.0.weight": torch.randn(8, 144, dtype=torch.float64)}, (points,))
    layer = qkv.nn.VNLinear(4, 6)
    layer.weight = None
    with pytest.raises(qkv.UsageError, match="weight: holds NoneType, not a tensor"):
        layer(torch.randn(1, 4, 3, 5))


def test_load_weights_reaches_an_assigned_parameter_and_refuses_a_computed_one(tmp_path):
    source = qkv.models.create("vnt", **POINT_CLOUD, classes=3, head_hidden=[8]).eval()
    path = tmp_path / "weights.pt"
    torch.save(source.state_dict(), str(path))
    inputs = {"points": torch.randn(2, 3, 24)}

    model = qkv.models.create("vnt", **POINT_CLOUD, classes=3, head_hidden=[8]).eval()
    w_q = model.get_submodule("blocks.0.attn.w_q")
    w_q.weight = torch.nn.Parameter(torch.zeros_like(w_q.weight))  # what runs now
    qkv.models.load_weights(model, path)
    assert torch.equal(w_q.weight, source.get_submodule("blocks.0.attn.w_q").weight)
    assert torch.equal(model(**inputs), source(**inputs))

    parametrized = qkv.models.create("vnt", **POINT_CLOUD, classes=3, head_hidden=[8]).eval()
    before = {n: t.clone() for n, t in parametrized.state_dict().items()}
    parametrize.register_parametrization(parametrized.get_submodule("head.layers.0"), "weight", torch.nn.Identity())
    with pytest.raises(qkv.UsageError, match="head.layers.0.weight: computed at call time"):
        qkv.models.load_weights(parametrized, path)
    assert torch.equal(parametrized.get_submodule("blocks.0.attn.w_q").weight, before["blocks.0.attn.w_q.weight"])
