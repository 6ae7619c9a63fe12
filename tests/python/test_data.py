"""qkv.data: the readers and data sets from Python, loading as the CLI does,
refusing bad files with the file named, and keeping a user's files."""
import os
import subprocess

import pytest
import torch

import qkv

SMALL = dict(synth_classes=["box", "sphere", "cone"], synth_train_per_class=4, synth_test_per_class=2, points=64,
             points_per_shape=128)


def test_read_shape_off_ply_and_text(tmp_path):
    off = tmp_path / "tri.off"
    off.write_text("OFF\n4 2 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n")
    mesh = qkv.data.read_shape(off)
    assert mesh["vertices"].shape == (4, 3) and mesh["faces"].tolist() == [[0, 1, 2], [0, 1, 3]]
    xyz = tmp_path / "cloud.xyz"
    xyz.write_text("0 0 0\n1 2 3\n4 5 6\n")
    cloud = qkv.data.read_shape(xyz)
    assert cloud["faces"] is None and torch.equal(cloud["vertices"][1], torch.tensor([1.0, 2.0, 3.0]))


def test_a_georeferenced_scan_keeps_its_detail_relative_to_its_origin(tmp_path):
    # UTM metres: float32 steps 0.5 at 4.5e6, so the millimetres live in
    # vertices relative to an origin kept in float64.
    xyz = tmp_path / "utm.xyz"
    xyz.write_text("500000.125 4500000.001 101.5\n500000.375 4500000.002 101.25\n")
    cloud = qkv.data.read_shape(xyz)
    absolute = cloud["vertices"].double() + cloud["origin"]
    expected = torch.tensor([[500000.125, 4500000.001, 101.5], [500000.375, 4500000.002, 101.25]], dtype=torch.float64)
    assert torch.allclose(absolute, expected, rtol=0, atol=1e-4)  # float32 alone would be 0.5 off
    assert cloud["origin"].tolist() == [499712.0, 4500480.0, 0.0]
    near = tmp_path / "near.xyz"
    near.write_text("1 2 3\n4 5 6\n")
    assert qkv.data.read_shape(near)["origin"].tolist() == [0.0, 0.0, 0.0]


def test_read_shape_of_other_tools_formats(tmp_path):
    obj = tmp_path / "quad.obj"
    obj.write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3//1 -1//1\n")
    assert qkv.data.read_shape(obj)["faces"].tolist() == [[0, 1, 2], [0, 2, 3]]
    stl = tmp_path / "tri.stl"
    stl.write_text("solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n"
                   "endloop\nendfacet\nendsolid t\n")
    assert qkv.data.read_shape(stl)["vertices"].shape == (3, 3)
    pcd = tmp_path / "cloud.pcd"
    pcd.write_text("FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nPOINTS 2\nDATA ascii\n1 2 3\nnan nan nan\n")
    assert qkv.data.read_shape(pcd)["vertices"].tolist() == [[1.0, 2.0, 3.0]]


def test_read_shape_errors_name_the_file(tmp_path):
    bad = tmp_path / "broken.off"
    bad.write_text("OFF\n3 1 0\n0 0 0\n1 0 0\n")
    with pytest.raises(qkv.DataError, match="broken.off"):
        qkv.data.read_shape(bad)
    with pytest.raises(qkv.UsageError, match="shape.glb"):
        qkv.data.read_shape(tmp_path / "shape.glb")
    with pytest.raises(ValueError, match="missing.off"):
        qkv.data.read_shape(tmp_path / "missing.off")


def test_synthetic_shapes_as_the_cli_loads_them(tmp_path):
    root = tmp_path / "shapes"
    train = qkv.data.SyntheticShapes(root, "train", **SMALL)
    assert train.classes == ["box", "cone", "sphere"]  # the folders, sorted
    assert len(train) + len(qkv.data.SyntheticShapes(root, "val", **SMALL)) == 12
    inputs, target = train[0]
    assert inputs["points"].shape == (3, 64) and inputs["points"].dtype == torch.float32
    assert target.dtype == torch.int64 and 0 <= int(target) < 3
    # Eval views are deterministic; training views draw anew (augmentation).
    test = qkv.data.SyntheticShapes(root, "test", **SMALL)
    assert len(test) == 6 and torch.equal(test[3][0]["points"], test[3][0]["points"])
    # Python's indexing: from the end, numpy and tensor integers; past either end an IndexError naming the index.
    assert torch.equal(test[-1][0]["points"], test[5][0]["points"])
    assert torch.equal(test[torch.tensor(2)][0]["points"], test[2][0]["points"])
    for outside in (6, -7):
        with pytest.raises(IndexError, match="^index %d is outside a data set of 6$" % outside):
            test[outside]
        with pytest.raises(IndexError, match="^index %d is outside a data set of 6$" % outside):
            test.batch([0, outside])
    # batch() takes the indices ds[i] takes.
    assert torch.equal(test.batch([-1, 2])[0]["points"], test.batch([5, 2])[0]["points"])
    # The default collate gives a model its batch.
    loader = torch.utils.data.DataLoader(test, batch_size=4)
    batch_inputs, batch_target = next(iter(loader))
    assert batch_inputs["points"].shape == (4, 3, 64) and batch_target.shape == (4,)
    # The same folder read as a ModelNet40 OFF tree; the up axis by name
    # (the synthetic shapes stand on y, as the estimate finds), the layout named.
    tree = qkv.data.ModelNet40(root, "test", points=64, points_per_shape=128, up_axis="auto", layout="modelnet")
    assert tree.layout == "ModelNet40" and tree.settings["up_axis"] == 1
    splits = qkv.data.SyntheticShapes.splits(root, **SMALL)
    assert {"train", "val", "test", "test/so3"} <= set(splits)


def test_data_settings_are_checked(tmp_path):
    with pytest.raises(qkv.UsageError, match="unknown setting 'pionts'"):
        qkv.data.SyntheticShapes(tmp_path / "s", pionts=64)
    # The part sets say "category" where the CLI says "class": the twin is named.
    for key, twin in (("max_per_class", "max_per_category"), ("synth_classes", "synth_categories")):
        with pytest.raises(qkv.UsageError, match="unknown setting '%s' \\(this set says '%s'; known:" % (key, twin)):
            qkv.data.SyntheticParts(tmp_path / "p", **{key: 2})
    with pytest.raises(qkv.UsageError, match="protocol"):
        qkv.data.SyntheticShapes(tmp_path / "s", protocol="z/x", **SMALL)
    with pytest.raises(qkv.UsageError, match="split 'dev'"):
        qkv.data.SyntheticShapes(tmp_path / "s", "dev", **SMALL)
    with pytest.raises(qkv.UsageError):
        qkv.data.SyntheticShapes(tmp_path / "s", **dict(SMALL, points="many"))
    with pytest.raises(ValueError, match="nowhere"):
        qkv.data.ModelNet40(tmp_path / "nowhere")
    with pytest.raises(qkv.UsageError, match="up_axis 'w'"):
        qkv.data.SyntheticShapes(tmp_path / "s", **dict(SMALL, up_axis="w"))


def test_a_users_folder_is_not_written_into(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(qkv.UsageError):
        qkv.data.SyntheticShapes(mine, **SMALL)
    assert os.listdir(mine) == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"


def test_synthetic_parts_items_have_per_point_labels(tmp_path):
    parts = qkv.data.SyntheticParts(tmp_path / "parts", "train", points=64, synth_train_per_category=2,
                                    synth_val_per_category=1, synth_test_per_category=1)
    inputs, target = parts[0]
    assert inputs["points"].shape == (3, 64) and target.shape == (64,) and inputs["category"].dim() == 0
    assert len(parts.categories) == 16


@pytest.fixture(scope="module")
def cohort_dir(tmp_path_factory):
    from conftest import QKV_BINARY
    if not qkv.optional_libraries()["NIfTI"]:
        pytest.skip("this qkv was built without NIfTI: no cohort's volumes can be written")
    out = tmp_path_factory.mktemp("cohort") / "c"
    subprocess.run([QKV_BINARY, "mhca", "synth", "--subjects", "12", "--cpg", "60", "--shape", "12,14,12",
                    "--threads", "1", "--out", str(out)], check=True, capture_output=True, timeout=300)
    return out


def test_read_nifti_and_the_cohort(cohort_dir):
    voxels, affine, geometry = qkv.data.read_nifti(cohort_dir / "spect" / "sub-0001.nii.gz")
    assert voxels.shape == (12, 14, 12) and voxels.dtype == torch.float32 and affine.shape == (4, 4)
    assert geometry["spacing"][0] > 0
    cohort = qkv.data.Cohort(cohort_dir / "manifest.csv", cohort_dir / "methylation.csv", fit_rows=range(8))
    assert len(cohort) == 12 and cohort.volume_shape == [12, 14, 12]
    inputs, label = cohort[0]
    assert inputs["spect"].shape == (1, 12, 14, 12) and inputs["methylation"].shape == (60,)
    assert int(label) == cohort.labels[0]
    test = cohort.subset(range(8, 12))
    assert len(test) == 4 and test.subject_ids == cohort.subject_ids[8:]
    # The normalisation is fitted on the training rows only: the test rows may fall outside [0, 1].
    train_max = max(float(cohort[i][0]["spect"].max()) for i in range(8))
    assert train_max == pytest.approx(1.0, abs=1e-6)


def test_bad_nifti_and_cohort_files(tmp_path, cohort_dir):
    bad = tmp_path / "bad.nii"
    bad.write_bytes(b"\0" * 100)
    with pytest.raises(qkv.DataError, match="bad.nii"):
        qkv.data.read_nifti(bad)
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("subject_id,label,spect\ns1,maybe,x.nii\n")
    with pytest.raises(ValueError, match="manifest.csv"):
        qkv.data.Cohort(manifest, cohort_dir / "methylation.csv")


def test_data_sets_pickle_by_how_they_were_made_so_spawned_workers_load_them(tmp_path, cohort_dir):
    # A spawn or forkserver DataLoader failed with "cannot pickle 'qkv._qkv.data.Dataset'".
    import pickle
    root = tmp_path / "shapes"
    test = qkv.data.SyntheticShapes(root, "test", **SMALL)
    again = pickle.loads(pickle.dumps(test))
    assert type(again) is qkv.data.SyntheticShapes and len(again) == len(test)
    assert torch.equal(again[2][0]["points"], test[2][0]["points"])  # eval views are seeded per shape
    rotated = qkv.data.SyntheticShapes.splits(root, **SMALL)["test/so3"]
    assert torch.equal(pickle.loads(pickle.dumps(rotated))[1][0]["points"], rotated[1][0]["points"])
    cohort = qkv.data.Cohort(cohort_dir / "manifest.csv", cohort_dir / "methylation.csv", fit_rows=range(8))
    part = cohort.subset([1, 3, 5])
    part_again = pickle.loads(pickle.dumps(part))
    assert part_again.subject_ids == part.subject_ids and part_again.fit_rows == list(range(8))
    assert torch.equal(part_again[1][0]["methylation"], part[1][0]["methylation"])
    # Workers started by spawn load the same items.
    loader = torch.utils.data.DataLoader(test, batch_size=3, num_workers=1, multiprocessing_context="spawn")
    spawned = [b[0]["points"] for b in loader]
    in_process = [b[0]["points"] for b in torch.utils.data.DataLoader(test, batch_size=3)]
    assert len(spawned) == len(in_process) and all(torch.equal(a, b) for a, b in zip(spawned, in_process))


def test_the_loaders_lines_go_to_logging_not_to_stderr(tmp_path, caplog, capfd):
    # What qkv says while loading (the synthetic shapes written, the layout
    # found) is an INFO record of the logger "qkv", which an application's
    # logging setup shows or silences; nothing reaches the C-level stderr.
    import logging
    with caplog.at_level(logging.INFO, logger="qkv"):
        qkv.data.SyntheticShapes(tmp_path / "s", "train", **SMALL)
    lines = [r.getMessage() for r in caplog.records if r.name == "qkv"]
    assert any(line.startswith("synthetic shapes: ") for line in lines), lines
    assert any("layout" in line and "train /" in line for line in lines), lines
    assert "synthetic shapes" not in capfd.readouterr().err
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="qkv"):
        qkv.data.SyntheticShapes(tmp_path / "s", "test", **SMALL)
    assert not [r for r in caplog.records if r.name == "qkv"]


def test_the_optional_libraries_are_listed_and_a_missing_one_is_refused_by_name(tmp_path):
    libraries = qkv.optional_libraries()
    assert set(libraries) == {"HDF5", "NIfTI", "XGBoost", "Gloo", "NCCL"}
    assert all(isinstance(built, bool) for built in libraries.values())
    volume = tmp_path / "volume.nii"
    volume.write_bytes(b"not a NIfTI header" * 30)
    refusal = "" if libraries["NIfTI"] else ": this qkv was built without NIfTI, .*libnifti2-dev"
    with pytest.raises(qkv.DataError, match="volume.nii" + refusal):
        qkv.data.read_nifti(volume)
