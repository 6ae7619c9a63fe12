"""What a hostile-input run found through Python: sizes checked before a
module allocates, NaN refused or spread as the reference does, kNN's own
point first among duplicates, rows named, files that are not regular refused."""
import os
import subprocess

import pytest
import torch

import qkv


@pytest.mark.parametrize("make", [
    lambda: qkv.nn.VNLinear(2 ** 31, 2),
    lambda: qkv.nn.VNMaxPool(2 ** 20),
    lambda: qkv.nn.VNAttention(4096, 1024, 1024),
    lambda: qkv.nn.VNTBlock(16, 2, 8, 2 ** 40),
    lambda: qkv.nn.VNFeedForward(16, 2 ** 15),  # the ReLU's 2^15 x 2^15 directions: 4 GiB
])
def test_a_module_too_large_is_refused_before_it_allocates(make):
    # VNLinear(2**31, 2) allocated and initialised 16 GiB before.
    with pytest.raises(qkv.UsageError, match="more than max_parameters"):
        make()


def test_the_size_bound_is_the_modules_own_parameter_count():
    # The bound is computed as the layers' constructors allocate, the same
    # formulas the registry's models are sized by.
    before = qkv.models.max_parameters()
    for module in (qkv.nn.VNFeedForward(4, 6), qkv.nn.VNAttention(4, 2, 3), qkv.nn.VNTBlock(4, 2, 3, 6, True)):
        count = sum(p.numel() for p in module.parameters())
        qkv.models.set_max_parameters(count)
        try:
            type(module)(*module._built_with[1], **module._built_with[2])  # exactly at the bound: built
            qkv.models.set_max_parameters(count - 1)
            with pytest.raises(qkv.UsageError, match="more than max_parameters"):
                type(module)(*module._built_with[1], **module._built_with[2])
        finally:
            qkv.models.set_max_parameters(before)


def test_module_sizes_must_be_positive():
    with pytest.raises(qkv.UsageError, match="out_channels must be at least 1, got 0"):
        qkv.nn.VNLinear(4, 0)
    assert qkv.nn.VNLinear(4, 3)(torch.randn(2, 4, 3, 5)).shape == (2, 3, 3, 5)


def test_fps_refuses_a_point_that_is_not_finite():
    # It returned index 0 twenty times.
    points = torch.rand(1, 64, 3)
    points[0, 9, 1] = float("nan")
    with pytest.raises(qkv.UsageError, match="point 9 of cloud 0 holds NaN or an infinity"):
        qkv.ops.farthest_point_sample(points, 20)


def test_attention_spreads_nan_as_the_reference_on_every_backend():
    # The tiled kernel dropped a NaN key; the naive one gave NaN.
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 300, 8), torch.randn(1, 2, 300, 8)
    k[0, 0, 17, 2] = float("nan")
    tiled = qkv.ops.attention(q, k, v, backend="tiled")
    naive = qkv.ops.attention(q, k, v, backend="naive")
    assert torch.isnan(tiled[0, 0]).all() and torch.isnan(naive[0, 0]).all()
    assert torch.isfinite(tiled[0, 1]).all()
    assert torch.allclose(tiled[0, 1], naive[0, 1], atol=1e-5 * naive[0, 1].abs().max().item())


def test_knn_puts_the_point_itself_first_among_its_duplicates():
    points = torch.zeros(1, 5, 3)
    points[0, 4] = 1.0
    idx = qkv.ops.knn(points, 3)
    assert idx[0, :, 0].tolist() == [0, 1, 2, 3, 4]
    assert idx[0, 2].tolist() == [2, 0, 1]  # then the duplicates by index


@pytest.mark.skipif(not qkv.optional_libraries()["NIfTI"], reason="this qkv was built without NIfTI")
def test_a_cohort_row_outside_the_cohort_is_named(tmp_path):
    from conftest import QKV_BINARY
    out = tmp_path / "c"
    subprocess.run([QKV_BINARY, "mhca", "synth", "--subjects", "8", "--cpg", "60", "--shape", "12,14,12",
                    "--threads", "1", "--out", str(out)], check=True, capture_output=True, timeout=300)
    with pytest.raises(qkv.UsageError, match="rows: row 99 is outside a cohort of 8 subjects"):
        qkv.data.Cohort(out / "manifest.csv", out / "methylation.csv", rows=[0, 99])
    with pytest.raises(qkv.UsageError, match="fit_rows: row -1 is outside"):
        qkv.data.Cohort(out / "manifest.csv", out / "methylation.csv", fit_rows=[-1])


def test_read_shape_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "shape.off"
    os.mkfifo(fifo)
    with pytest.raises(qkv.DataError, match="is not a regular file"):
        qkv.data.read_shape(fifo)
    (tmp_path / "zero.obj").symlink_to("/dev/zero")
    with pytest.raises(qkv.DataError, match="is not a regular file"):
        qkv.data.read_shape(tmp_path / "zero.obj")
