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


def test_vn_pooling_and_norm_refuse_a_feature_without_its_points_or_axes():
    # VNMaxPool([B, C, 3]) pooled over x, y and z: neither equivariant nor invariant, without a word.
    with pytest.raises(qkv.UsageError, match=r"VNMaxPool: expected x \[B, C, 3, N\], got \[2, 4, 3\]"):
        qkv.nn.VNMaxPool(4)(torch.randn(2, 4, 3))
    with pytest.raises(qkv.UsageError, match=r"vn_norm: expected a VN feature \[B, C, 3, \.\.\.\], got \[2, 4, 5\]"):
        qkv.ops.vn_norm(torch.randn(2, 4, 5))


def test_vn_norms_refuse_an_integer_feature():
    # VNLayerNorm and VNBatchNorm had taken int64 features and returned float32 without a word.
    features = torch.randint(-3, 3, (2, 4, 3, 5))
    for module in (qkv.nn.VNLayerNorm(4), qkv.nn.VNBatchNorm(4)):
        with pytest.raises(qkv.UsageError, match=r"a VN feature is floating point, got Long"):
            module(features)
    assert qkv.nn.VNLayerNorm(4)(features.float()).dtype == torch.float32


SMALL_VNT = dict(linear_dim=8, heads=2, head_dim=4, k=6, head_hidden=[16], blocks=2)


@pytest.mark.parametrize("name,options", [("vnt", SMALL_VNT), ("vn-dgcnn", dict(k=6))])
def test_an_empty_batch_gives_empty_logits(name, options):
    # As PyTorch's layers (and qkv's other models) do; a reshape that inferred a size from no elements failed.
    model = qkv.models.create(name, classes=5, **options).eval()
    assert model(torch.randn(0, 3, 32)).shape == (0, 5)
    assert qkv.nn.VNStdFeature(4)(torch.randn(0, 4, 3, 10))[0].shape == (0, 4, 3, 10)


def test_a_models_lists_of_parts_index_as_module_lists():
    model = qkv.models.create("vnt", classes=5, **SMALL_VNT)
    assert len(model.blocks) == 2
    assert model.blocks[-1] is model.blocks[1] is model.get_submodule("blocks.1")
    assert [b for b in model.blocks] == list(model.blocks[0:2])
    fired = []
    model.blocks[-1].register_forward_hook(lambda part, inputs, output: fired.append(output.shape))
    model.eval()(torch.randn(2, 3, 32))
    assert len(fired) == 1
    block = model.blocks[0]  # a part, not a list: no length, true as any module
    assert bool(block) and not hasattr(block, "__len__")


def test_settings_take_numpy_numbers_and_name_a_value_that_is_not_finite():
    np = pytest.importorskip("numpy")
    model = qkv.models.create("vnt", classes=np.int64(5), dropout=np.float32(0.25), **SMALL_VNT)
    assert model.options["classes"] == 5 and model.options["dropout"] == 0.25
    with pytest.raises(qkv.UsageError, match="vnt: dropout must be a finite number, got nan"):
        qkv.models.create("vnt", dropout=float("nan"), **SMALL_VNT)
    with pytest.raises(qkv.UsageError, match="forward_tokens .* is the transformer language model's"):
        qkv.models.create("lstm-lm").forward_tokens(torch.zeros(1, 3, dtype=torch.long))


def test_inputs_of_another_dtype_are_named_with_the_module():
    # LibTorch's "expected scalar type Float but found Double" and a kernel's "not implemented for 'Long'"
    # named neither the input nor the module.
    model = qkv.models.create("vnt", classes=5, **SMALL_VNT).eval()
    with pytest.raises(qkv.UsageError, match="vnt: input 'points' is torch.int64; it takes float32 or float64"):
        model(torch.randint(0, 5, (2, 3, 32)))
    with pytest.raises(qkv.UsageError, match="vnt: points is torch.float64, its weights are torch.float32"):
        model(torch.randn(2, 3, 32, dtype=torch.float64))
    with pytest.raises(qkv.UsageError, match="VNLinear: input 0 is torch.float64, its weights are torch.float32"):
        qkv.nn.VNLinear(4, 6)(torch.randn(2, 4, 3, 5, dtype=torch.float64))


def test_a_path_given_as_bytes_is_the_file_it_names(tmp_path):
    path = tmp_path / "tri.off"
    path.write_text("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")
    assert qkv.data.read_shape(bytes(path))["vertices"].shape == (3, 3)


def test_a_query_holding_nan_is_refused_as_a_point_is():
    # Its nearest point was any one (111 in one run, 365 in another).
    queries = torch.randn(50, 3)
    queries[3, 0] = float("nan")
    with pytest.raises(qkv.UsageError, match="nearest_point_indices: query 3 holds NaN or an infinity"):
        qkv.ops.nearest_points(queries, torch.randn(400, 3))
