"""What PyTorch's precision and export tools get from qkv's modules: under
torch.autocast qkv computes in float32 (the same output as without it),
bfloat16 or half inputs outside autocast are refused in one line, and
torch.jit.trace is refused instead of recording the C++ kernels as constants."""
import pytest
import torch

import qkv


def small_vnt():
    torch.manual_seed(0)
    return qkv.models.create("vnt", classes=3, linear_dim=4, heads=2, head_dim=4, k=4).eval()


def test_autocast_runs_qkv_in_float32():
    model = small_vnt()
    points = torch.randn(2, 3, 32)
    expected = model(points)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(points)
        from_bf16 = model(points.bfloat16())
    assert got.dtype == torch.float32 and torch.equal(got, expected)
    assert torch.equal(from_bf16, model(points.bfloat16().float()))
    layer = qkv.nn.VNLinear(4, 6)
    x = torch.randn(2, 4, 3, 10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(layer(x), layer(x.clone()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_outside_autocast_are_refused_in_one_line(dtype):
    model = small_vnt()
    with pytest.raises(qkv.UsageError) as e:
        model(torch.randn(2, 3, 32).to(dtype))
    message = str(e.value)
    assert "\n" not in message and "points" in message and str(dtype) in message and "float32" in message
    with pytest.raises(qkv.UsageError):
        qkv.nn.VNLinear(4, 6)(torch.randn(2, 4, 3, 10).to(dtype))


def test_tracing_is_refused_with_a_message():
    model = small_vnt()
    with pytest.raises(qkv.UsageError, match="torch.jit.trace"):
        torch.jit.trace(model, torch.randn(2, 3, 32))
