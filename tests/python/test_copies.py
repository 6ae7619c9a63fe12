"""Copies and pickles of qkv modules and models: built again from their
arguments (a model from its name and options) with the original's state,
so deepcopy, copy, pickle, torch.save(model) and AveragedModel work."""
import copy
import io
import pickle

import pytest
import torch

import qkv


@pytest.mark.parametrize("make,shape", [
    (lambda: qkv.nn.VNLinearLeakyReLU(4, 6), (2, 4, 3, 10)),
    (lambda: qkv.nn.VNTBlock(8, 2, 4, 16, layer_norm=True), (2, 8, 3, 12)),
    (lambda: qkv.nn.VNStdFeature(8, normalize_frame=True), (2, 8, 3, 12)),
])
def test_deepcopy_and_pickle_give_an_equal_independent_module(make, shape):
    module = make().eval()
    x = torch.randn(*shape)
    expected = module(x)
    for duplicate in (copy.deepcopy(module), copy.copy(module), pickle.loads(pickle.dumps(module))):
        assert type(duplicate) is type(module) and not duplicate.training
        got = duplicate(x)
        for a, b in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
            assert torch.equal(a, b)
        # Its own weights: changing the copy leaves the original as it was.
        with torch.no_grad():
            next(duplicate.parameters()).add_(1.0)
        again = module(x)
        assert torch.equal(again if not isinstance(again, tuple) else again[0],
                           expected if not isinstance(expected, tuple) else expected[0])


def test_copying_draws_no_random_numbers_and_keeps_dtype_and_mode():
    module = qkv.nn.VNLinear(3, 5).double().train()
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    duplicate = copy.deepcopy(module)
    assert torch.equal(torch.rand(4), expected)
    assert duplicate.training and all(p.dtype == torch.float64 for p in duplicate.parameters())


def test_a_frozen_parameter_stays_frozen_in_every_copy():
    # As torch.nn's own modules: a frozen backbone stays frozen in its copies
    # (an EMA or SWA copy, a pickle sent to a worker).
    module = qkv.nn.VNTBlock(8, 2, 4, 16, layer_norm=True)
    names = [n for n, _ in module.named_parameters()]
    frozen = set(names[::2])
    for n, p in module.named_parameters():
        p.requires_grad_(n not in frozen)
    torch.nn.utils.parametrize.register_parametrization(module.attn.w_q, "weight", Double())
    model = qkv.models.create("vn-dgcnn", classes=2, k=4).requires_grad_(False)
    for original in (module, model):
        expected = {n: p.requires_grad for n, p in original.named_parameters()}
        assert any(expected.values()) or original is model
        for duplicate in (copy.deepcopy(original), copy.copy(original), pickle.loads(pickle.dumps(original))):
            got = {n: p.requires_grad for n, p in duplicate.named_parameters()}
            # The parametrized weight is copied as the plain weight it computes, trainable as its original.
            expected_here = {("attn.w_q.weight" if "parametrizations" in n else n): v for n, v in expected.items()}
            assert got == expected_here


class Double(torch.nn.Module):
    def forward(self, weight):
        return 2 * weight


def test_a_model_round_trips_through_torch_save_and_averaged_model(tmp_path):
    torch.manual_seed(0)
    model = qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4).eval()
    points = torch.randn(2, 3, 32)
    expected = model(points=points)
    path = tmp_path / "model.pt"
    torch.save(model, path)
    loaded = torch.load(path)
    assert isinstance(loaded, qkv.models.Model) and loaded.name == "vnt" and loaded.options == model.options
    assert torch.equal(loaded(points=points), expected)
    # EMA / SWA deep-copy the model; the average of one model is itself.
    averaged = torch.optim.swa_utils.AveragedModel(model)
    averaged.update_parameters(model)
    assert torch.allclose(averaged(points=points), expected)
    buf = io.BytesIO()
    pickle.dump(copy.deepcopy(model), buf)
    buf.seek(0)
    assert torch.equal(pickle.load(buf)(points=points), expected)


def test_a_model_takes_its_points_as_a_plain_tensor():
    # model(x), as every PyTorch classifier is called, failed with "dictionary update sequence element".
    torch.manual_seed(0)
    model = qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4).eval()
    points = torch.randn(2, 3, 32)
    assert torch.equal(model(points), model(points=points))
    with pytest.raises(qkv.UsageError, match="points given twice"):
        model(points, points=points)
    # The other layout is refused with the one expected, and how to get it.
    with pytest.raises(qkv.UsageError, match=r"expected \[B, 3, N\], got \[2, 32, 3\] \(points as rows: pass "
                                             r"points\.transpose\(1, 2\)\)"):
        model(points.transpose(1, 2).contiguous())


def test_module_signatures_are_the_bindings():
    # Names and defaults written once, in the binding: the class shows them to inspect, help and editors.
    import inspect
    parameters = inspect.signature(qkv.nn.VNLeakyReLU).parameters
    assert list(parameters) == ["channels", "share", "negative_slope"]
    assert parameters["share"].default is False and parameters["negative_slope"].default == 0.2
    assert inspect.signature(qkv.nn.MultiHeadAttention).parameters["kv_heads"].default == 0
    layer = qkv.nn.VNLeakyReLU(4, negative_slope=0.1)
    assert "negative_slope=0.1" in repr(layer)
    with pytest.raises(TypeError):
        qkv.nn.VNLinear(4, 6, 8)


def test_repr_shows_the_sizes_a_module_was_built_with():
    assert repr(qkv.nn.VNLinear(4, 6)) == "VNLinear(in_channels=4, out_channels=6)"
    assert "channels=8, heads=2, head_dim=4" in repr(qkv.nn.VNAttention(8, 2, 4))
    # A registry model's parts name their C++ class and their own weights' sizes.
    text = repr(qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4))
    assert "(map_to_feat): _Part(VNLinear: weight=[4, 2])" in text, text
    assert "qkv::" not in text and "Impl" not in text, text
