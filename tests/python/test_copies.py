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


class VectorsAndScalars(torch.nn.Module):
    """One of qkv's batch norms beside one of PyTorch's."""

    def __init__(self):
        super().__init__()
        self.vn = qkv.nn.VNBatchNorm(4, momentum=0.3)
        self.plain = torch.nn.BatchNorm1d(5, momentum=0.3)

    def forward(self, vectors, scalars):
        return self.vn(vectors), self.plain(scalars)


def test_update_bn_averages_qkv_and_torch_batch_norms_over_the_loader():
    # torch.optim.swa_utils.update_bn resets and recounts PyTorch's batch norms
    # only; qkv.nn.update_bn does both: the plain average over the batches,
    # as PyTorch's BatchNorm with momentum=None computes it.
    torch.manual_seed(0)
    model = VectorsAndScalars().double().eval()
    loader = [({"vectors": torch.randn(3, 4, 3, 7, dtype=torch.float64) * (i + 1),
                "scalars": torch.randn(6, 5, dtype=torch.float64) + i}, torch.zeros(3)) for i in range(4)]
    with torch.no_grad():
        for buffer in (model.vn.running_mean, model.plain.running_mean):
            buffer.fill_(7.0)  # statistics of other weights
    qkv.nn.update_bn(loader, model)
    norms = torch.nn.BatchNorm1d(4, momentum=None).double()  # VN batch norm normalises each vector's length
    scalars = torch.nn.BatchNorm1d(5, momentum=None).double()
    for inputs, _ in loader:
        norms((inputs["vectors"].pow(2).sum(2) + 1e-6 ** 2).sqrt())
        scalars(inputs["scalars"])
    for got, want in ((model.vn, norms), (model.plain, scalars)):
        assert torch.allclose(got.running_mean, want.running_mean, rtol=1e-12, atol=1e-12)
        assert torch.allclose(got.running_var, want.running_var, rtol=1e-12, atol=1e-12)
        assert int(got.num_batches_tracked) == 4
    # The mode and each layer's momentum are what they were: a training batch
    # now moves the statistics by 0.3 of the way.
    assert not model.training
    before = model.vn.running_mean.clone()
    vectors = loader[0][0]["vectors"]
    model.train()(vectors, loader[0][0]["scalars"])
    batch_mean = (vectors.pow(2).sum(2) + 1e-6 ** 2).sqrt().mean((0, 2))
    assert torch.allclose(model.vn.running_mean, 0.7 * before + 0.3 * batch_mean, rtol=1e-12, atol=1e-12)
    assert model.plain.momentum == 0.3


def test_update_bn_recounts_every_batch_norm_of_an_averaged_model():
    # After update_bn a model's statistics depend on the loader alone, not on
    # what its batch norms held before: every layer was reset and recounted
    # (the fused edge convolution's and the classifier head's included).
    torch.manual_seed(0)
    model = qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4)
    loader = [(torch.randn(4, 3, 32), torch.zeros(4)) for _ in range(3)]
    averaged = torch.optim.swa_utils.AveragedModel(model)
    stale = copy.deepcopy(averaged)
    with torch.no_grad():
        stale.train()(torch.randn(4, 3, 32) * 5)  # moves every layer's statistics
    assert any(not torch.equal(a, b) for a, b in zip(averaged.buffers(), stale.buffers()))
    for m in (averaged, stale):
        torch.manual_seed(1)  # the pass is in training mode: the head's dropout draws the same masks
        qkv.nn.update_bn(loader, m)
    names = [n for n, _ in averaged.named_buffers() if n.endswith("running_var")]
    assert len(names) == 5, names  # the edge convolution, the invariant layer (2) and the head (2)
    for (name, a), b in zip(averaged.named_buffers(), stale.buffers()):
        assert torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6 * float(a.abs().max() + 1)), name
    points = torch.randn(2, 3, 32)
    assert torch.allclose(averaged.eval()(points=points), stale.eval()(points=points), rtol=1e-4, atol=1e-5)


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


class TiedToALinear(torch.nn.Module):
    """A plain layer sharing a qkv module's weight (tied weights)."""

    def __init__(self):
        super().__init__()
        self.vn = qkv.nn.VNLinear(4, 4)
        self.lin = torch.nn.Linear(4, 4, bias=False)
        self.lin.weight = self.vn.weight


def _trains(module, optimizer, x):
    """Whether a step of `optimizer` on module(x).sum() changes every parameter of `module`."""
    before = [p.detach().clone() for p in module.parameters()]
    optimizer.zero_grad()
    module(x).sum().backward()
    optimizer.step()
    return all(not torch.equal(a, p) for a, p in zip(before, module.parameters()))


def test_copies_and_pickles_keep_a_parameter_one_object_with_its_optimizer_and_ties():
    # As nn.Module's: copy.deepcopy((model, optimizer)) gave an optimizer of
    # tensors the copy did not compute with (its steps changed nothing), and a
    # weight tied to a plain layer came apart in every copy (2 parameters).
    torch.manual_seed(0)
    x = torch.randn(2, 4, 3, 5)
    module = qkv.nn.VNLinear(4, 4)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    buf = io.BytesIO()
    torch.save({"model": module, "optimizer": optimizer}, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)  # PyTorch >= 2.6 allows no optimizer object otherwise
    copies = [copy.deepcopy((module, optimizer)), copy.deepcopy((optimizer, module))[::-1],
              (loaded["model"], loaded["optimizer"]), pickle.loads(pickle.dumps((module, optimizer)))]
    for duplicate, its_optimizer in copies:
        assert its_optimizer.param_groups[0]["params"][0] is duplicate.weight
        assert duplicate.weight is not module.weight
        assert torch.equal(duplicate(x), module(x))
        assert _trains(duplicate, its_optimizer, x)
    tied = TiedToALinear()
    buf = io.BytesIO()
    torch.save(tied, buf)
    buf.seek(0)
    for duplicate in (copy.deepcopy(tied), torch.load(buf, weights_only=False), pickle.loads(pickle.dumps(tied))):
        assert duplicate.lin.weight is duplicate.vn.weight and len(list(duplicate.parameters())) == 1
        with torch.no_grad():
            duplicate.lin.weight.add_(1.0)  # the qkv forward computes with the tied weight
        assert torch.allclose(duplicate.vn(x), torch.einsum("oc,bcjn->bojn", duplicate.lin.weight, x), atol=1e-6)
        assert not torch.equal(duplicate.vn(x), tied.vn(x))


def test_a_module_holding_an_assigned_parameter_converts_it_with_the_rest():
    # .double() converted the assigned parameter but not the registered one it
    # is bound to: the next call failed ("given Double ... weights are Float").
    module = qkv.nn.VNLinear(4, 6)
    module.weight = torch.nn.Parameter(module.weight.detach().clone())
    module.double()
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    assert module.weight.dtype == torch.float64
    assert torch.allclose(module(x), torch.einsum("oc,bcjn->bojn", module.weight, x), rtol=1e-12, atol=1e-12)


def test_a_move_to_the_meta_device_is_refused_and_leaves_the_module_as_it_was():
    module = qkv.nn.VNLinear(4, 6)
    before = module.weight.detach().clone()
    with pytest.raises(qkv.UsageError, match="cannot move to the meta device"):
        module.to("meta")
    assert module.weight.device.type == "cpu" and torch.equal(module.weight, before)
