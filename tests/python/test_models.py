"""qkv.models: every registered model from Python, with the CLI's options,
parameter names and counts; runs of the CLI continue in Python and weights
saved from Python are read by the CLI."""
import json
import os
import subprocess

import pytest
import torch

import qkv
from conftest import random_rotation

TINY = ["--synth-classes", "box,sphere", "--synth-train-per-class", "6", "--synth-test-per-class", "4",
        "--points-per-shape", "64", "--points", "32", "--batch-size", "4", "--linear-dim", "4", "--heads", "2",
        "--head-dim", "4", "--model-options", '{"k":4}', "--threads", "1", "--seed", "3"]
TINY_OPTIONS = dict(linear_dim=4, heads=2, head_dim=4, k=4, classes=2)


def run_cli(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from conftest import QKV_BINARY
    run = tmp_path_factory.mktemp("cli") / "run"
    run_cli(QKV_BINARY, "vnt", "train", *TINY, "--epochs", "2", "--out", str(run))
    return run


def test_every_registered_model_is_created_with_its_exact_size():
    names = qkv.models.names()
    assert {"vnt", "vnt+n", "vn-dgcnn", "xyz-transformer", "mhca", "concatnet", "spectnet"} <= set(names)
    for name in names:
        if not qkv.models.describe(name)["network"]:  # XGBoost: in the registry, built by its task
            with pytest.raises(qkv.UsageError, match="not a network"):
                qkv.models.create(name)
            continue
        model = qkv.models.create(name)
        count = sum(p.numel() for p in model.parameters())
        assert count == qkv.models.parameter_count(name)[0], name
        assert isinstance(model, torch.nn.Module) and model.inputs, name
        assert set(model.options) == set(qkv.models.describe(name)["options"]), name
    card = qkv.models.describe("vnt")  # the card `qkv params --model vnt --json` prints
    assert card["model"] == "vnt" and card["task"] == "classification" and card["network"]
    assert card["options"]["heads"]["default"] == card["options"]["heads"]["value"] == 24


def test_options_are_checked_like_the_cli():
    with pytest.raises(qkv.UsageError, match="unknown option 'bogus'"):
        qkv.models.create("vnt", bogus=1)
    with pytest.raises(qkv.UsageError, match="heads"):
        qkv.models.create("vnt", heads=-2)
    with pytest.raises(qkv.UsageError, match="known"):
        qkv.models.create("no-such-model")
    with pytest.raises(qkv.UsageError, match=r"raise qkv\.models\.set_max_parameters\(\)"):
        qkv.models.create("vnt", linear_dim=1 << 20)
    limit = qkv.models.max_parameters()
    qkv.models.set_max_parameters(100)
    try:
        with pytest.raises(qkv.UsageError, match=r"more than qkv\.models\.set_max_parameters\(\) 100"):
            qkv.models.create("vnt", **TINY_OPTIONS)
    finally:
        qkv.models.set_max_parameters(limit)
    model = qkv.models.create("vnt", **TINY_OPTIONS)
    with pytest.raises(qkv.UsageError, match="missing input points"):
        model(normals=torch.zeros(1, 3, 8))


def test_a_cli_run_continues_in_python(tiny_run, qkv_binary):
    model = qkv.load(tiny_run)
    assert not model.training and model.name == "vnt" and model.config["command"] == "vnt train"
    # The CLI's evaluation of the test split without rotation ...
    cli = json.loads(run_cli(qkv_binary, "vnt", "eval", "--checkpoint", str(tiny_run), "--rotate", "none",
                             "--threads", "1").stdout)
    # ... equals the same evaluation in Python, through qkv.data with the run's settings.
    settings = dict(model.config["data"], protocol="none/none")
    settings.pop("source")
    # A run records its own synthetic folder (RUN/synthetic) as an empty synth_dir.
    assert settings.pop("synth_dir") == ""
    test = qkv.data.SyntheticShapes(tiny_run / "synthetic", "test", **settings)
    inputs, target = test.batch(range(len(test)))
    with torch.no_grad():
        predicted = model(**inputs).argmax(-1)
    assert len(test) == cli["size"] == 8
    assert float((predicted == target).double().mean()) == pytest.approx(cli["accuracy"], abs=1e-12)
    # float64: the same model in double precision agrees with float32 to its rounding
    with torch.no_grad():
        logits32 = model(**inputs)
        logits64 = model.double()(points=inputs["points"].double())
    assert torch.allclose(logits64, logits32.double(), rtol=0, atol=1e-4 * float(logits32.abs().max()))


def test_python_weights_go_to_the_cli_and_back(tmp_path, tiny_run, qkv_binary):
    model = qkv.models.create("vnt", **TINY_OPTIONS)
    torch.save(model.state_dict(), tmp_path / "w.pt")
    # The CLI starts a run from them (names and shapes checked before training) ...
    run_cli(qkv_binary, "vnt", "train", *TINY, "--epochs", "1", "--lr", "1e-30", "--init-weights",
            str(tmp_path / "w.pt"), "--synth-dir", str(tmp_path / "shapes"), "--out", str(tmp_path / "run"))
    # ... and its checkpoint holds them (a learning rate of 1e-30 moves nothing).
    trained = qkv.load(tmp_path / "run")
    for name, p in model.named_parameters():
        assert torch.allclose(dict(trained.named_parameters())[name], p, rtol=0, atol=1e-20), name
    # A CLI export loads into a Python model by name.
    run_cli(qkv_binary, "export-weights", "--checkpoint", str(tiny_run), "--output", str(tmp_path / "run.pt"))
    fresh = qkv.models.load_weights(qkv.models.create("vnt", **TINY_OPTIONS), tmp_path / "run.pt")
    reference = qkv.load(tiny_run)
    for (name, a), (_, b) in zip(fresh.state_dict().items(), reference.state_dict().items()):
        assert torch.equal(a, b), name


def test_bad_checkpoints_raise_naming_the_file(tmp_path):
    with pytest.raises(qkv.UsageError, match="no such file"):
        qkv.load(tmp_path / "missing.ckpt")
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(qkv.DataError, match="bad.ckpt"):
        qkv.load(bad)
    with pytest.raises(qkv.UsageError, match="without checkpoints/best.ckpt"):
        qkv.load(tmp_path)
    with pytest.raises(qkv.DataError, match="w.pt"):
        (tmp_path / "w.pt").write_bytes(b"PK\x03\x04junk")
        qkv.models.load_weights(qkv.models.create("vnt", **TINY_OPTIONS), tmp_path / "w.pt")


def test_the_language_model_decodes_with_a_cache():
    lm = qkv.models.create("transformer-lm", dk=8, dv=12).eval()
    tokens = torch.randint(0, 256, (1, 12))
    full = lm(tokens=tokens)
    o = lm.options
    heads = o["heads"]
    cache = qkv.nn.KVCache(o["layers"], 1, heads, 16, o["dk"], o["dv"])
    with torch.no_grad():  # the cache keeps no autograd graph
        step = torch.cat([lm.forward_tokens(tokens[:, :8], cache)] +
                         [lm.forward_tokens(tokens[:, t:t + 1], cache) for t in range(8, 12)], 1)
    assert torch.allclose(step, full, rtol=0, atol=1e-4 * float(full.abs().max()))


@pytest.mark.parametrize("name,options,width", [
    ("vnt", dict(linear_dim=4, heads=2, head_dim=4, k=4), 2 * 3 * 2 * 3 * 4),  # max+mean of 3 * 2 * blocks * C
    ("vn-dgcnn", dict(k=4), 2 * 682 * 3),
])
def test_point_cloud_classifiers_give_their_invariant_embedding(name, options, width):
    model = qkv.models.create(name, classes=3, **options).double().eval()
    points = torch.randn(2, 3, 32, dtype=torch.float64)
    embedding = model.features(points)
    assert embedding.shape == (2, width)
    turned = torch.einsum("ij,bjn->bin", random_rotation(), points)
    assert (model.features(points=turned) - embedding).abs().max().item() < 1e-9
    assert model.features({"points": points}).equal(embedding)


def test_a_model_without_an_embedding_says_so():
    model = qkv.models.create("xyz-transformer", classes=3)
    with pytest.raises(qkv.UsageError, match="xyz-transformer: features: this model gives no embedding"):
        model.features(torch.randn(2, 3, 16))


@pytest.mark.parametrize("name,extra", [("vnt", {}), ("vnt-seg", dict(categories=2, parts=3, seg_hidden=[8]))])
def test_attention_maps_are_each_blocks_rotation_invariant_weights(name, extra):
    model = qkv.models.create(name, linear_dim=4, heads=2, head_dim=4, k=4, **extra).double().eval()
    points = torch.randn(2, 3, 20, dtype=torch.float64)
    inputs = dict(points=points, category=torch.tensor([0, 1])) if name == "vnt-seg" else dict(points=points)
    with torch.no_grad():
        maps = model.attention_maps(**inputs)
        turned = model.attention_maps(**dict(inputs, points=torch.einsum("ij,bjn->bin", random_rotation(), points)))
    assert maps.keys is None and len(maps.weights) == 3
    for w, w_turned in zip(maps.weights, turned.weights):
        assert w.shape == (2, 2, 20, 20)
        assert torch.allclose(w.sum(-1), torch.ones(2, 2, 20, dtype=torch.float64), rtol=0, atol=1e-12)
        assert (w - w_turned).abs().max().item() < 1e-9


def test_local_attention_maps_name_their_keys_and_equal_the_global_ones_when_every_point_is_a_key():
    options = dict(linear_dim=4, heads=2, head_dim=4, k=4, classes=3)
    dense = qkv.models.create("vnt", **options).double().eval()
    local = qkv.models.create("vnt-local", neighbours=12, **options).double().eval()
    local.load_state_dict(dense.state_dict())  # the same parameters, names and sizes
    points = torch.randn(2, 3, 12, dtype=torch.float64)
    with torch.no_grad():
        maps = local.attention_maps(points)
        reference = dense.attention_maps(points)
    assert maps.keys.shape == (2, 12, 12) and maps.keys.equal(qkv.ops.knn(points.transpose(1, 2), 12))
    for w, full in zip(maps.weights, reference.weights):
        assert w.shape == (2, 2, 12, 12)
        scattered = torch.zeros_like(full).scatter_(3, maps.keys.unsqueeze(1).expand(-1, 2, -1, -1), w)
        assert (scattered - full).abs().max().item() < 1e-12


def test_a_model_without_attention_maps_says_so():
    model = qkv.models.create("vn-dgcnn", classes=3, k=4)
    with pytest.raises(qkv.UsageError, match="vn-dgcnn: attention_maps: this model has no attention"):
        model.attention_maps(torch.randn(1, 3, 16))


@pytest.fixture(scope="module")
def tiny_seg_run(tmp_path_factory):
    from conftest import QKV_BINARY
    run = tmp_path_factory.mktemp("cli") / "seg"
    run_cli(QKV_BINARY, "seg", "train", "--synth-classes", "Table", "--synth-train-per-class", "4",
            "--synth-val-per-class", "1", "--synth-test-per-class", "1", "--synth-points-per-shape", "128",
            "--points-per-shape", "128", "--points", "64", "--batch-size", "4", "--linear-dim", "4", "--heads", "2",
            "--head-dim", "4", "--model-options", '{"k":4}', "--epochs", "1", "--threads", "1", "--seed", "3",
            "--out", str(run))
    return run


def test_predict_parts_labels_every_point_as_seg_predict_does(tiny_seg_run, tmp_path):
    # A cloud of 3,000 points, 47 x the run's 64: votes on samplings, every
    # point labelled from its nearest sampled point.
    from conftest import QKV_BINARY
    g = torch.Generator().manual_seed(5)
    cloud = torch.rand(3000, 3, generator=g, dtype=torch.float64) * torch.tensor([1.0, 0.6, 0.8], dtype=torch.float64)
    labels, probabilities, sampled = qkv.models.predict_parts(tiny_seg_run, cloud, "Table", votes=3, seed=7)
    assert labels.shape == (3000,) and labels.dtype == torch.int64
    assert probabilities.shape[0] == 3000 and torch.allclose(probabilities.sum(1), torch.ones(3000, dtype=torch.float64))
    assert 64 < sampled <= 3 * 64

    # The same labels as `qkv seg predict` on the cloud written as a file.
    path = tmp_path / "cloud.xyz"
    path.write_text("".join("%.17g %.17g %.17g\n" % tuple(p) for p in cloud.tolist()))
    out = tmp_path / "predict"
    r = run_cli(QKV_BINARY, "seg", "predict", "--checkpoint", str(tiny_seg_run), "--input", str(path), "--class",
                "Table", "--votes", "3", "--seed", "7", "--json", "--out", str(out))
    report = json.loads(r.stdout[r.stdout.index("{"):])
    counts = {int(part): n for part, n in report["points_per_part"].items()}
    assert counts == {int(p): int((labels == p).sum()) for p in counts}

    # Rotation invariant: the same samplings (seed), the same labels, to rounding.
    turned = cloud @ random_rotation(generator=torch.Generator().manual_seed(2)).T
    labels_turned, _, _ = qkv.models.predict_parts(tiny_seg_run, turned, "Table", votes=3, seed=7)
    assert int((labels_turned == labels).sum()) >= 2985

    # Far from 0 (map coordinates) a float64 cloud keeps its detail, as a file does: the same labels.
    far = cloud + torch.tensor([5e5, 4.5e6, 100.0], dtype=torch.float64)
    labels_far, _, _ = qkv.models.predict_parts(tiny_seg_run, far, "Table", votes=3, seed=7)
    assert int((labels_far == labels).sum()) >= 2985

    with pytest.raises(qkv.UsageError, match="points"):
        qkv.models.predict_parts(tiny_seg_run, cloud[:, :2], "Table")
    with pytest.raises(qkv.UsageError, match="Airplane"):
        qkv.models.predict_parts(tiny_seg_run, cloud, "Airplane")


def write_colour_cloud(path, points, colours, intensity):
    lines = ["ply", "format ascii 1.0", "element vertex %d" % len(points)]
    lines += ["property float %s" % a for a in "xyz"] + ["property uchar %s" % c for c in ("red", "green", "blue")]
    lines += ["property float intensity", "end_header"]
    lines += ["%r %r %r %d %d %d %r" % (*p, *c, i) for p, c, i in zip(points.tolist(), colours.tolist(), intensity.tolist())]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("name", ["vnt", "vn-dgcnn"])
def test_point_features_from_files_reach_a_model_that_stays_invariant(tmp_path, name):
    g = torch.Generator().manual_seed(0)
    for cls in ("a", "b"):
        for i in range(3):
            write_colour_cloud(tmp_path / "clouds" / cls / ("%s%d.ply" % (cls, i)), torch.randn(80, 3, generator=g),
                               torch.randint(0, 256, (80, 3), generator=g), torch.rand(80, generator=g))
    data = qkv.data.ModelNet40(str(tmp_path / "clouds"), split="train", points=32, point_features="intensity,rgb")
    inputs, _ = data.batch([0, 1])
    assert inputs["features"].shape == (2, 4, 32)
    assert 0 <= float(inputs["features"][:, 1:].min()) and float(inputs["features"][:, 1:].max()) <= 1  # colour / 255
    options = dict(TINY_OPTIONS, point_features=4) if name == "vnt" else dict(k=4, classes=2, point_features=4)
    model = qkv.models.create(name, **options).double().eval()
    assert model.inputs == ["points", "features"]
    x = {k: v.double() for k, v in inputs.items()}
    logits = model(**x)
    rotation = random_rotation(torch.float64)
    rotated = model(points=rotation @ x["points"], features=x["features"])
    assert float((rotated - logits).abs().max()) <= 1e-9 * float(logits.abs().max())
    assert not torch.allclose(model(points=x["points"], features=x["features"].flip(2)), logits)
