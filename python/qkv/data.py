"""qkv's readers and data sets for PyTorch (docs/python.md).

The point-cloud data sets take the settings a run's config.json records
under "data" (points, sampling, protocol, up_axis, random_scale,
random_shift, point_dropout, normals, seed, val_fraction, points_per_shape,
max_per_class, ...), with the defaults of `qkv vnt train` / `qkv seg train`,
and load exactly as those commands do: the same layouts, views, splits and
rotations. An item is (inputs, target): inputs a dict of tensors named as
the models read them ("points" [3, N], "normals" [3, N], "category" []),
so that the default collate gives model(**inputs) its batch.
"""
import json
import operator

import torch

from . import _qkv
from ._settings import path_text, settings_text

_data = _qkv.data

def read_shape(path):
    """A shape file (.off .ply .obj .stl .pcd .txt .xyz .csv) -> {"vertices" [V, 3] float32, "origin" [3] float64,
    "faces" [F, 3] int64 or None, "normals" [V, 3] or None}. The file's coordinates are vertices + origin: a shape
    far from 0 (a georeferenced scan) is kept relative to an origin near its centre, whose detail float32 would
    lose; zeros for a shape near 0. A malformed file is a qkv.DataError naming it."""
    return _data.read_shape(path_text(path))


def read_nifti(path):
    """A NIfTI-1/2 volume -> (voxels [X, Y, Z] float32 with scl_slope/inter applied, affine [4, 4] float64
    voxel -> world (sform, else qform, else spacing), geometry dict)."""
    return _data.read_nifti(path_text(path))


synthetic_shape_classes = _data.synthetic_shape_classes
synthetic_part_categories = _data.synthetic_part_categories


def synthetic_shape(cls, seed=0):
    """One procedural mesh of a synthetic class (as read_shape returns it)."""
    return _data.synthetic_shape(cls, seed)


class _Split(torch.utils.data.Dataset):
    """One split of a qkv data set; items are (inputs dict, target).

    Pickled by how it was made (the class, folder and settings), not by its
    C++ data: a DataLoader worker started by spawn or forkserver loads the
    split again from the same files (a synthetic set reuses the folder qkv
    wrote)."""

    def __init__(self, handle, info):
        self._handle = handle
        self.info = info
        self._made_by = None  # (function, arguments) that make it again

    def __reduce__(self):
        if self._made_by is None:
            raise TypeError("this qkv data set cannot be pickled: it was not made by a qkv.data class")
        return self._made_by

    def __len__(self):
        return len(self._handle)

    def _position(self, index):
        """index as a position in 0..n-1; negative ones count from the end, as for a list."""
        index, n = operator.index(index), len(self)
        if not -n <= index < n:  # named as given, not as counted from the end
            raise IndexError("index %d is outside a data set of %d" % (index, n))
        return index % n

    def __getitem__(self, index):
        inputs, target = self._handle.get([self._position(index)])
        return {k: v[0] for k, v in inputs.items()}, target[0]

    def batch(self, indices):
        """Several items at once, already batched: (inputs [B, ...], target [B, ...]); indices as ds[i] takes."""
        return self._handle.get([self._position(i) for i in indices])


def _made_again(cls, root, split, settings):
    return cls(root, split, **settings)


def _split_made_again(cls, root, name, settings):
    return cls.splits(root, **settings)[name]


def _splits(kind, what, root, settings):
    settings = dict(settings)
    if root is not None:
        settings["source"] = path_text(root)
    info = (_data.classification_splits if kind == "classification" else _data.part_segmentation_splits)(
        what, settings_text(settings, what))
    meta = {k: v for k, v in info.items() if not isinstance(v, _data.Dataset)}
    meta["settings"] = json.loads(meta["settings"])
    return {k: _Split(v, meta) for k, v in info.items() if isinstance(v, _data.Dataset)}, meta


class _PointSet(_Split):
    _kind = "classification"
    _synthetic = False  # the built-in data, written into `root` by qkv

    def __init__(self, root, split="train", **settings):
        splits, meta = self._load(root, settings)
        if split not in splits:
            raise _qkv.UsageError("%s: split '%s': expected one of %s" % (
                type(self).__name__, split, ", ".join(sorted(splits))))
        super().__init__(splits[split]._handle, meta)
        self.split = split
        self.settings = meta["settings"]
        self.layout = meta["layout"]
        self._made_by = (_made_again, (type(self), root, split, dict(settings)))

    @classmethod
    def _load(cls, root, settings):
        if cls._synthetic:
            root, settings = None, dict(settings, source="synthetic", synth_dir=path_text(root))
        return _splits(cls._kind, cls.__name__, root, settings)

    @classmethod
    def splits(cls, root, **settings):
        """Every split from one load: {"train", "val", "test", "test/<rotation>" ...}; .info holds the
        classes (or categories), the layout and the settings."""
        splits = cls._load(root, settings)[0]
        for name, split in splits.items():
            split._made_by = (_split_made_again, (cls, root, name, dict(settings)))
        return splits


class ModelNet40(_PointSet):
    """ModelNet40 in any of its layouts (ModelNet40 OFF tree, modelnet40_normal_resampled,
    modelnet40_ply_hdf5_2048). split: train | val (cut from train by val_fraction) | test (under the
    protocol's test rotation) | test/<rotation>. Targets are class ids; .classes names them."""

    def __init__(self, root, split="train", **settings):
        super().__init__(root, split, **settings)
        self.classes = self.info["classes"]


class SyntheticShapes(ModelNet40):
    """qkv's built-in synthetic shapes (what `qkv vnt train --data synthetic` trains on), written as an
    OFF tree into `root` unless qkv already wrote them there with the same settings (a folder qkv did
    not write is refused). Settings as ModelNet40's plus synth_train_per_class, synth_test_per_class,
    synth_classes."""
    _synthetic = True


class ShapeNetPart(_PointSet):
    """ShapeNet-part (shapenetcore_partanno_segmentation_benchmark_v0_normal or hdf5_data): items are
    ({"points" [3, N], "category" []}, part labels [N]). .categories lists the 16 categories with their
    part ranges."""
    _kind = "segmentation"

    def __init__(self, root, split="train", **settings):
        super().__init__(root, split, **settings)
        self.categories = self.info["categories"]


class SyntheticParts(ShapeNetPart):
    """qkv's built-in part-segmentation shapes (`qkv seg train --data synthetic`), written into `root`
    as ShapeNetPart's text layout unless qkv already wrote them there with the same settings."""
    _synthetic = True


def _cohort_made_again(manifest, methylation, rows, fit_rows, cpgs, normalisation, max_missing, reorient):
    return Cohort(manifest, methylation, rows=rows, fit_rows=fit_rows, cpgs=cpgs, normalisation=normalisation,
                  max_missing=max_missing, reorient=reorient)


class Cohort(_Split):
    """An MHCA cohort: a manifest (subject, label, SPECT file) and a methylation table, matched by
    subject. Items are ({"spect" [1, X, Y, Z], "methylation" [F]}, label).

    The normalisation (global min-max of the volumes) and the missing-value means are fitted on
    `fit_rows`: pass your training rows there, or the other rows leak into them (default: all rows).
    cpgs: the CpG ids to use, in model input order (default all columns).
    reorient: turn every volume to RAS+ (axes permuted and flipped; no resampling), as `--reorient`."""

    def __init__(self, manifest, methylation, *, rows=None, fit_rows=None, cpgs=None, normalisation="global",
                 max_missing=1.0, reorient=False):
        self._files = (path_text(manifest), path_text(methylation), max_missing, reorient)
        self._select(_data.Cohort(*self._files), rows, fit_rows, cpgs, normalisation)

    def _select(self, cohort, rows, fit_rows, cpgs, normalisation):
        self._cohort = cohort
        everyone = range(len(cohort))
        self.rows = list(everyone if rows is None else rows)
        self.fit_rows = list(everyone if fit_rows is None else fit_rows)
        self.cpgs = list(cpgs) if cpgs else cohort.cpg_ids
        self.normalisation = normalisation
        # First: the library checks the rows and names one outside the cohort.
        self._handle = cohort.dataset(self.rows, self.fit_rows, self.cpgs, normalisation)
        self.subject_ids = [cohort.subject_ids[i] for i in self.rows]
        self.labels = [cohort.labels[i] for i in self.rows]
        self.info = {}
        manifest, methylation, max_missing, reorient = self._files
        self._made_by = (_cohort_made_again, (manifest, methylation, self.rows, self.fit_rows, self.cpgs,
                                              normalisation, max_missing, reorient))

    def subset(self, rows, fit_rows=None):
        """The same cohort restricted to `rows` (indices into the whole cohort), fitted on `fit_rows`
        (default: this one's)."""
        other = Cohort.__new__(Cohort)
        other._files = self._files
        other._select(self._cohort, rows, self.fit_rows if fit_rows is None else fit_rows, self.cpgs,
                      self.normalisation)
        return other

    @property
    def volume_shape(self):
        return self._cohort.volume_shape


__all__ = ["read_shape", "read_nifti", "synthetic_shape", "synthetic_shape_classes", "synthetic_part_categories",
           "ModelNet40", "SyntheticShapes", "ShapeNetPart", "SyntheticParts", "Cohort"]
