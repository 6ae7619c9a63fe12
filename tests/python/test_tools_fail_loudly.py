"""What PyTorch's tools and a user's code do with qkv's modules where the
answer once came back wrong without a word: copies under no_grad, copies of
subclasses, copies that changed the original, backward hooks on parts,
create_graph after an in-place edit, one NaN point in kNN, half weights,
inputs given under another name, sizes past max_parameters."""
import copy

import pytest
import torch
import torch.nn.utils.parametrizations
import torch.nn.utils.parametrize
import torch.nn.utils.prune

import qkv

ops = qkv.ops


class _Double(torch.nn.Module):
    def forward(self, w):
        return 2 * w


def test_a_copy_taken_under_no_grad_keeps_parametrized_and_pruned_weights_trainable():
    parametrized = qkv.nn.VNLinear(4, 5)
    torch.nn.utils.parametrize.register_parametrization(parametrized, "weight", _Double())
    pruned = qkv.nn.VNFeedForward(4, 8)
    torch.nn.utils.prune.l1_unstructured(pruned.lin1, "weight", amount=0.5)
    for module in (parametrized, pruned):
        with torch.no_grad():
            copies = [copy.deepcopy(module), copy.copy(module)]
        for c in copies:
            assert all(p.requires_grad for p in c.parameters()), type(module).__name__


def test_a_subclass_that_adds_a_head_is_copied_with_it():
    class Net(qkv.nn.VNLinear):
        def __init__(self, n):
            super().__init__(n, n)
            self.head = torch.nn.Linear(n, 2)
            self.register_buffer("offset", torch.randn(2))

    net = Net(4)
    x = torch.randn(3, 4, 3, 5)

    def run(m):
        return m.head(m(x).norm(dim=2).mean(-1)) + m.offset

    for duplicate in (copy.deepcopy(net), torch.optim.swa_utils.AveragedModel(net).module):
        assert torch.equal(run(duplicate), run(net))
        with torch.no_grad():
            duplicate.head.weight.add_(1.0)
        assert not torch.equal(duplicate.head.weight, net.head.weight)  # its own head


def test_copying_leaves_the_original_as_it_was():
    # The old spectral_norm's pre-hook steps its power iteration in training mode.
    module = qkv.nn.VNFeedForward(4, 8)
    torch.nn.utils.spectral_norm(module.lin1)
    module(torch.randn(2, 4, 3, 5))
    u = module.lin1.weight_u.clone()
    duplicate = copy.deepcopy(module)
    assert torch.equal(module.lin1.weight_u, u)
    x = torch.randn(2, 4, 3, 5)
    assert torch.allclose(duplicate.eval()(x), module.eval()(x), rtol=1e-5, atol=1e-6)


def test_a_backward_hook_on_a_part_is_refused_and_on_the_module_fires():
    module = qkv.nn.VNFeedForward(4, 8)
    for register in (module.lin1.register_full_backward_hook, module.lin1.register_backward_hook):
        with pytest.raises(qkv.UsageError, match="would never fire.*register_hook"):
            register(lambda *args: None)
    fired = []
    module.register_full_backward_hook(lambda m, gin, gout: fired.append(gout[0].shape))
    # The part's output gradient, as the message says: a forward hook that registers a tensor hook.

    def hook_the_output(part, inputs, output):
        output.register_hook(lambda grad: fired.append("lin1"))

    module.lin1.register_forward_hook(hook_the_output)
    module(torch.randn(2, 4, 3, 5, requires_grad=True)).sum().backward()
    assert "lin1" in fired and torch.Size([2, 4, 3, 5]) in fired


@pytest.mark.parametrize("op", ["vn_leaky_relu", "vn_frame_coordinates", "vn_batch_norm", "edge_features"])
def test_create_graph_refuses_an_input_changed_in_place_as_a_plain_backward_does(op):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 3, 6, generator=g, requires_grad=True)
    d = torch.randn(2, 4, 3, 6, generator=g, requires_grad=True)
    h = x * 1  # a tensor with history, then changed in place after the forward
    if op == "vn_leaky_relu":
        y, wrt = ops.vn_leaky_relu(h, d), d
    elif op == "vn_frame_coordinates":
        y, wrt = ops.vn_frame_coordinates(h, d[:, :3]), d
    elif op == "vn_batch_norm":
        w = torch.ones(4, requires_grad=True)
        y, wrt = ops.vn_batch_norm(h, w, torch.zeros(4), torch.zeros(4), torch.ones(4), True), x
    else:
        y, wrt = ops.edge_features(h, torch.randint(0, 6, (2, 6, 3), generator=g)), x
    with torch.no_grad():
        h.add_(1.0)
    for create_graph in (False, True):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.grad(y.sum(), wrt, create_graph=create_graph, retain_graph=True)


@pytest.mark.parametrize("points", [20, 1100])
def test_a_nan_point_ranks_last_in_knn_and_leaves_the_others_neighbours(points):
    torch.manual_seed(points)
    p = torch.randn(1, points, 3)
    p[0, 1] = float("nan")
    got = ops.knn(p, 4)[0]
    finite = torch.cat([torch.tensor([0]), torch.arange(2, points)])
    without = ops.knn(p[:, finite], 4)[0]
    assert torch.equal(got[finite], finite[without])
    assert got[1].tolist() == [1, 0, 2, 3]  # itself, then the others by index


def test_running_statistics_of_another_size_are_refused():
    x = torch.randn(2, 4, 3, 5)
    with pytest.raises(qkv.UsageError, match=r"running_mean \[1\] and running_var \[1\] must both be \[4\]"):
        ops.vn_batch_norm(x, torch.ones(4), torch.zeros(4), torch.zeros(1), torch.ones(1), False)


def test_int32_neighbour_indices_are_taken_as_int64():
    x = torch.randn(2, 4, 3, 6)
    idx = torch.randint(0, 6, (2, 6, 3))
    assert torch.equal(ops.edge_features(x, idx.int()), ops.edge_features(x, idx))
    with pytest.raises(qkv.UsageError, match=r"idx holds a point outside 0..5"):
        ops.edge_features(x, (idx + 6).int())


def test_half_weights_are_refused_before_anything_changes():
    module = qkv.nn.VNLinear(4, 6)
    before = module.weight.clone()
    for convert in (lambda m: m.half(), lambda m: m.to(torch.bfloat16)):
        with pytest.raises(qkv.UsageError, match="float32 or float64"):
            convert(module)
        assert module.weight.dtype == torch.float32 and torch.equal(module.weight, before)
    assert module.double().weight.dtype == torch.float64  # full precision converts as before


def test_a_layer_norm_of_other_channels_names_the_input():
    with pytest.raises(qkv.UsageError, match=r"VNLayerNorm: expected x \[B, 4, 3, \.\.\.\].*got \[2, 5, 3, 5\]"):
        qkv.nn.VNLayerNorm(4)(torch.randn(2, 5, 3, 5))


def test_an_input_no_model_reads_is_refused_by_name():
    model = qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4).eval()
    points = torch.randn(2, 3, 32)
    with pytest.raises(qkv.UsageError, match="no input named nomrals"):
        model(points=points, nomrals=points)
    with pytest.raises(qkv.UsageError, match="missing input points .*no input is named pionts"):
        model(pionts=points)
    # One another model reads is left unread, by keyword (model(**inputs)) or in a batch dict.
    assert torch.equal(model(points=points, normals=points), model(points))
    assert torch.equal(model({"points": points, "normals": points}), model(points))


def test_models_run_under_inference_mode():
    # No version counter on inference tensors: the create_graph check must not ask for one.
    for name, options in (("vnt", dict(linear_dim=4, heads=2, head_dim=4, k=4)), ("vn-dgcnn", dict(k=4))):
        model = qkv.models.create(name, classes=3, **options).eval()
        points = torch.randn(2, 3, 32)
        with torch.no_grad():
            expected = model(points)
        with torch.inference_mode():
            assert torch.equal(model(points), expected)


def test_copying_leaves_a_parametrized_spectral_norm_as_it_was():
    module = qkv.nn.VNFeedForward(4, 8)
    torch.nn.utils.parametrizations.spectral_norm(module.lin1)
    module(torch.randn(2, 4, 3, 5))
    u = module.lin1.parametrizations.weight[0]._u.clone()
    copy.deepcopy(module)
    assert torch.equal(module.lin1.parametrizations.weight[0]._u, u)
    assert module.lin1.parametrizations.weight[0].training  # its mode restored


def test_a_model_subclass_is_copied_with_what_it_added():
    class Net(qkv.models.Model):
        def __init__(self):
            base = qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4)
            super().__init__(base._impl, base.name, base.options)
            self.extra = torch.nn.Linear(3, 2)

    net = Net().eval()
    duplicate = copy.deepcopy(net)
    assert type(duplicate) is Net and torch.equal(duplicate.extra.weight, net.extra.weight)
    points = torch.randn(2, 3, 32)
    assert torch.equal(duplicate(points), net(points))


def test_multi_head_attention_is_sized_before_it_is_allocated():
    limit = qkv.models.max_parameters()
    qkv.models.set_max_parameters(1000)
    try:
        with pytest.raises(qkv.UsageError, match="MultiHeadAttention: these sizes ask for 16640 parameters"):
            qkv.nn.MultiHeadAttention(64, 4)
        with pytest.raises(qkv.UsageError, match="MultiHeadAttention: these sizes ask for"):
            qkv.nn.MultiHeadAttention(8, 1, qk_dim=2**28)
    finally:
        qkv.models.set_max_parameters(limit)


def test_a_kv_cache_copy_is_its_own():
    cache = qkv.nn.KVCache(1, 1, 2, 8, 4, 4)
    cache.append(0, torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    for duplicate in (copy.deepcopy(cache), copy.copy(cache)):
        assert len(duplicate) == 3 and torch.equal(duplicate.keys(0), cache.keys(0))
        duplicate.append(0, torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
        assert len(duplicate) == 4 and len(cache) == 3
        duplicate.reset()
        assert len(cache) == 3
