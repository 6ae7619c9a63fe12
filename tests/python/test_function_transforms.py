"""torch.func's transforms over qkv: grad, vmap, jacrev and jvp give what
PyTorch's autograd gives for the same module (inside a transform the fused
kernels take their composed references, layers/function_transforms.h)."""
import pytest
import torch

import qkv
from networks import MODELS, MODEL_IDS, inputs_of, weighted_sum

func = pytest.importorskip("torch.func", reason="torch.func arrived in torch 2.0")

# PyTorch has no batching rule for aten::lstm and aten::gru: torch.nn.LSTM and GRU refuse vmap too.
NO_VMAP_RULE = {"lstm-lm", "gru-lm"}


def double_inputs(model):
    return {k: (v.double() if v.is_floating_point() else v) for k, v in inputs_of(model).items()}


def relative(a, b):
    return float((a - b).detach().abs().max() / (b.detach().abs().max() + 1e-300))


@pytest.mark.parametrize("name,options", MODELS, ids=MODEL_IDS)
def test_grad_equals_autograd(name, options):
    model = qkv.models.create(name, **options).eval().double()
    inputs = double_inputs(model)
    params = {n: p.detach() for n, p in model.named_parameters()}
    grads = func.grad(lambda p: weighted_sum(func.functional_call(model, p, (), inputs)))(params)
    reference = torch.autograd.grad(weighted_sum(model(**inputs)), list(model.parameters()), allow_unused=True)
    for (n, _), r in zip(model.named_parameters(), reference):
        expected = torch.zeros_like(grads[n]) if r is None else r
        assert relative(grads[n], expected) < 1e-10, n


@pytest.mark.parametrize("name,options", MODELS, ids=MODEL_IDS)
def test_vmap_over_samples_equals_the_batch(name, options):
    model = qkv.models.create(name, **options).eval().double()
    inputs = double_inputs(model)

    def one_sample(*values):
        return model(**{k: v.unsqueeze(0) for k, v in zip(inputs, values)}).squeeze(0)

    if name in NO_VMAP_RULE:
        with pytest.raises(RuntimeError, match="Batching rule not implemented"):
            func.vmap(one_sample)(*inputs.values())
        return
    assert relative(func.vmap(one_sample)(*inputs.values()), model(**inputs)) < 1e-12


@pytest.mark.parametrize("name", ["vnt", "vnt-local", "vn-dgcnn", "vnt-seg"])
def test_jacobians_of_the_points_agree_with_autograd(name):
    options = dict(MODELS)[name]
    model = qkv.models.create(name, **options).eval().double()
    inputs = double_inputs(model)
    points = inputs.pop("points")[:, :, :8]

    def logits(p):
        return model(points=p, **inputs)

    jacobian = func.jacrev(logits)(points)
    reference = torch.autograd.functional.jacobian(logits, points)
    assert relative(jacobian, reference) < 1e-10
    tangent = torch.randn_like(points)
    _, pushed = func.jvp(logits, (points,), (tangent,))
    assert relative(pushed, (reference * tangent).flatten(-3).sum(-1)) < 1e-10


def test_training_mode_batch_norm_is_refused_as_pytorchs_own():
    # Batch norm updates its running statistics in place, which a grad transform refuses: for
    # torch.nn.BatchNorm1d and qkv's VNBatchNorm alike (torch.func's advice: eval mode, or no running stats).
    for module, x in [(torch.nn.BatchNorm1d(4), torch.randn(5, 4, 7)), (qkv.nn.VNBatchNorm(4), torch.randn(5, 4, 3, 7))]:
        params = {n: p.detach() for n, p in module.named_parameters()}
        with pytest.raises(RuntimeError, match="in-place operation"):
            func.grad(lambda p: func.functional_call(module, p, (x,)).sum())(params)
        module.eval()
        func.grad(lambda p: func.functional_call(module, p, (x,)).sum())(params)
