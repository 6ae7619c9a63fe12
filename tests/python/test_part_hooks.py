"""Forward hooks on the parts of a qkv module fire as PyTorch's do: once per
run of the part, with its inputs and output, and what a hook returns is the
output that goes on (layers/part_hooks.h). A forward that fuses several parts
runs them one by one while one of them is hooked, with the same result."""
import warnings

import pytest
import torch

import qkv
from networks import MODELS, MODEL_IDS, inputs_of, weighted_sum


def double_inputs(model):
    return {k: (v.double() if v.is_floating_point() else v) for k, v in inputs_of(model).items()}


def relative(a, b):
    return float((a - b).detach().abs().max() / (b.detach().abs().max() + 1e-300))


def kind(part):
    return part._impl.type_name.rsplit("::", 1)[-1]


def parts_of(model):
    # Every part that runs: a ModuleList is a container, never called (as in PyTorch).
    return [(n, p) for n, p in model.named_modules() if p is not model and kind(p) != "ModuleListImpl"]


@pytest.mark.parametrize("name,options", MODELS, ids=MODEL_IDS)
def test_every_part_reports_its_own_computation_and_the_result_stays(name, options):
    model = qkv.models.create(name, **options).eval().double()
    inputs = double_inputs(model)
    expected = model(**inputs)
    seen = {}
    for n, part in parts_of(model):
        part.register_forward_hook(lambda m, args, out, n=n: seen.setdefault(n, []).append((args, out)))
    # With every part hooked, the fused forwards run their parts one by one: the same logits.
    assert relative(model(**inputs), expected) < 1e-12
    assert sorted(seen) == sorted(n for n, _ in parts_of(model)), "parts whose hooks did not fire"
    for n, part in parts_of(model):
        args, out = seen[n][0]
        if kind(part) == "VNLinearImpl":  # W x over the channels of [B, C, 3, ...]
            torch.testing.assert_close(out, torch.einsum("oc,bc...->bo...", part.weight, args[0]), rtol=1e-12, atol=1e-12)
        elif kind(part) == "LiveLinearImpl":
            torch.testing.assert_close(out, torch.nn.functional.linear(args[0], part.weight, getattr(part, "bias", None)))
    # Each part runs once per call, except a dropout used twice by a transformer block.
    assert [n for n, calls in seen.items() if len(calls) != 1 and not n.endswith(".drop")] == []


# A leaf deep inside each fused path, and the last part of the head: replacing its output changes the logits.
REPLACED = [
    ("vnt", "edge_conv.conv.map_to_feat"),    # the factorised edge convolution
    ("vnt", "blocks.0.attn.w_v"),             # the heads' split
    ("vnt", "blocks.1.attn.w_o"),             # the heads' merge
    ("vnt", "invariant.vn1.map_to_dir"),      # the stacked GEMM of VNLinearLeakyReLU, with the mean
    ("vnt-local", "blocks.0.attn.w_q"),
    ("vn-dgcnn", "convs.2.map_to_dir"),       # the fused edge convolution with mean pooling
    ("vn-dgcnn-seg", "convs.0.batchnorm"),
    ("transformer-lm", "blocks.0.drop"),
    ("mhca", "co_attention.res_q"),
    ("mlp", "net.1"),                         # LibTorch's ReLU, in a Sequential
]


@pytest.mark.parametrize("name,part_name", REPLACED, ids=["%s:%s" % r for r in REPLACED])
def test_what_a_hook_returns_is_the_output_that_goes_on(name, part_name):
    options = dict(MODELS)[name]
    model = qkv.models.create(name, **options).eval().double()
    inputs = double_inputs(model)
    expected = model(**inputs)
    part = model.get_submodule(part_name)
    same = part.register_forward_hook(lambda m, args, out: out.clone())
    assert relative(model(**inputs), expected) < 1e-12
    same.remove()
    scale = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    part.register_forward_hook(lambda m, args, out: out * scale + 0.25)
    changed = model(**inputs)
    assert relative(changed, expected) > 1e-6
    weighted_sum(changed).backward()  # the replacement is in the graph
    assert scale.grad is not None and scale.grad.abs() > 0


def test_hooks_in_training_mode_and_a_second_step():
    model = qkv.models.create("vnt", **dict(MODELS)["vnt"]).train()
    inputs = inputs_of(model)
    norms = []
    model.get_submodule("blocks.0.attn.w_k").register_forward_hook(lambda m, args, out: norms.append(float(out.norm())))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        weighted_sum(model(**inputs)).backward()
        optimizer.step()
    assert len(norms) == 2 and norms[0] != norms[1]


def test_a_hook_on_a_part_of_a_qkv_nn_module():
    layer = qkv.nn.VNLinearLeakyReLU(4, 6).double().eval()
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    expected = layer(x)
    seen = []
    layer.map_to_dir.register_forward_hook(lambda m, args, out: seen.append(out))
    assert relative(layer(x), expected) < 1e-12
    torch.testing.assert_close(seen[0], torch.einsum("oc,bc...->bo...", layer.map_to_dir.weight, x))


def test_several_outputs_are_one_flat_tuple():
    model = qkv.models.create("lstm-lm", **dict(MODELS)["lstm-lm"]).eval()
    inputs = inputs_of(model)
    expected = model(**inputs)
    seen = []

    def hook(module, args, out):
        seen.append(len(out))
        output, h, c = out
        return output * 0, h, c

    model.rnn.register_forward_hook(hook)
    assert seen == [] and not torch.allclose(model(**inputs), expected) and seen == [3]


def test_a_wrong_return_is_refused_and_a_module_list_hook_warns():
    model = qkv.models.create("vnt", **dict(MODELS)["vnt"]).eval()
    inputs = inputs_of(model)
    handle = model.get_submodule("blocks.0.ffn").register_forward_hook(lambda m, args, out: (out, out))
    with pytest.raises(qkv.UsageError, match="returned tuple; the part's output is a tensor"):
        model(**inputs)
    handle.remove()
    model(**inputs)
    with pytest.warns(UserWarning, match="a container is not called"):
        model.get_submodule("blocks").register_forward_hook(lambda *a: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.get_submodule("blocks.0").register_forward_hook(lambda *a: None)
