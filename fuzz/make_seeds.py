#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/:
small valid files of each format, covering each reader's variants (OFF with
fused counts and comments, ascii and binary PLY with normals, colours and
an extra element, NIfTI-1/-2 in several datatypes, plain and gzipped, both
cohort tables and a CpG list). The checkpoint and weights targets write
their own seeds (QKV_FUZZ_SEED_DIR, see scripts/fuzz-all).
Run from the repository root: python3 fuzz/make_seeds.py
"""
import gzip
import os
import shutil
import struct

ROOT = "fuzz/corpus"


def put(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


# OFF
put("off", "tetra.off", "OFF\n4 4 6\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3\n")
put("off", "fused.off", "OFF4 2 0\n# comment\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n3 0 2 3 255 0 0\n")

# PLY
verts = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
faces = [(0, 1, 2), (0, 1, 3), (1, 2, 3, 0)]
ascii_ply = ("ply\nformat ascii 1.0\ncomment seed\nelement vertex 4\nproperty float x\nproperty float y\n"
             "property float z\nproperty float nx\nproperty float ny\nproperty float nz\nproperty uchar red\n"
             "property uchar green\nproperty uchar blue\nelement face 3\nproperty list uchar int vertex_indices\n"
             "end_header\n")
for v in verts:
    ascii_ply += "%g %g %g 0 0 1 255 128 0\n" % v
for f in faces:
    ascii_ply += "%d %s\n" % (len(f), " ".join(map(str, f)))
put("ply", "ascii.ply", ascii_ply)
header = ("ply\nformat binary_little_endian 1.0\nelement vertex 4\nproperty float x\nproperty float y\n"
          "property float z\nelement face 3\nproperty list uchar uint vertex_indices\nelement edge 1\n"
          "property int vertex1\nproperty int vertex2\nend_header\n").encode()
body = b"".join(struct.pack("<3f", *v) for v in verts)
body += b"".join(struct.pack("<B%dI" % len(f), len(f), *f) for f in faces)
body += struct.pack("<2i", 0, 1)
put("ply", "binary.ply", header + body)

# ModelNet text points
put("modelnet_txt", "points6.txt", "".join("%g,%g,%g,0,0,1\n" % v for v in verts))
put("modelnet_txt", "points3.txt", "# xyz\n" + "".join("%g %g %g\n" % v for v in verts))

# ShapeNet-part text points
put("shapenet_txt", "chair.txt", "".join("%g %g %g 0 1 0 %d\n" % (v + (12 + i % 4,)) for i, v in enumerate(verts)))
put("shapenet_txt", "list.txt", "Airplane\t02691156\nBag\t02773838\n")


# NIfTI
def nifti1(dims, datatype, bitpix, fmt, values, gz=False):
    h = bytearray(352)
    struct.pack_into("<i", h, 0, 348)
    struct.pack_into("<8h", h, 40, 3, *dims, 1, 1, 1, 1)
    struct.pack_into("<hh", h, 70, datatype, bitpix)
    struct.pack_into("<8f", h, 76, 1, 2, 2, 2, 1, 1, 1, 1)
    struct.pack_into("<f", h, 108, 352)
    struct.pack_into("<ff", h, 112, 1.5, 0.25)  # scl_slope, scl_inter
    struct.pack_into("<hh", h, 252, 1, 1)  # qform_code, sform_code
    struct.pack_into("<12f", h, 280, -2, 0, 0, 90, 0, 2, 0, -126, 0, 0, 2, -72)
    h[344:348] = b"n+1\0"
    data = bytes(h) + struct.pack("<%d%s" % (len(values), fmt), *values)
    return gzip.compress(data, mtime=0) if gz else data


def nifti2(dims, values):
    h = bytearray(544)
    struct.pack_into("<i", h, 0, 540)
    h[4:12] = b"n+2\0\r\n\x1a\n"
    struct.pack_into("<hh", h, 12, 16, 32)  # float32
    struct.pack_into("<8q", h, 16, 3, *dims, 1, 1, 1, 1)
    struct.pack_into("<8d", h, 104, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into("<q", h, 168, 544)
    struct.pack_into("<dd", h, 176, 1, 0)
    return bytes(h) + struct.pack("<%df" % len(values), *values)


n = 2 * 3 * 2
put("nifti", "uint8.nii", nifti1((2, 3, 2), 2, 8, "B", list(range(n))))
put("nifti", "int16.nii.gz", nifti1((2, 3, 2), 4, 16, "h", [i - 5 for i in range(n)], gz=True))
put("nifti", "float32.nii", nifti1((2, 3, 2), 16, 32, "f", [i / 7 for i in range(n)]))
put("nifti", "float64.nii.gz", nifti1((2, 3, 2), 64, 64, "d", [i / 3 for i in range(n)], gz=True))
put("nifti", "nifti2.nii", nifti2((2, 3, 2), [float(i) for i in range(n)]))

# Cohort tables: the first byte picks the reader (0 manifest, 1 methylation, 2 CpG list).
put("cohort", "manifest.csv", b"\0" + b"subject_id,label,spect,age\ns1,0,a.nii.gz,61\n\"s,2\",pd,\"b c.nii\",\n")
put("cohort", "manifest.tsv", b"\0" + b"\xef\xbb\xbfsubject_id\tlabel\tspect\ns1\tcontrol\ta.nii\n")
put("cohort", "methylation.csv", b"\1" + b"subject_id,cg00000029,cg00000108\ns1,0.5,NA\ns2,1,0.25\n")
put("cohort", "methylation.tsv", b"\1" + b"subject_id\tcg1\tcg2\r\ns1\t0.1\t\r\ns2\tnan\t0.9\r\n")
put("cohort", "cpgs.txt", b"\2" + b"# selected\ncg00000029\ncg00000108\n")

# OBJ (quads, texture/normal corners, negative indices, a bare cloud), STL
# (binary and ASCII), PCD (ASCII with a NaN point and normals, binary).
put("obj", "cube.obj", "# cube\no Cube\nv 1 1 -1\nv 1 -1 -1\nv 1 1 1\nv 1 -1 1\nv -1 1 -1\nv -1 -1 -1\n"
    "v -1 1 1\nv -1 -1 1\nvt 0.5 0.5\nvn 0 1 0\nf 1/1/1 5/1/1 7/1/1 3/1/1\nf 4//1 3//1 7//1 8//1\nf -1 -2 -3\n")
put("obj", "cloud.obj", "v 0 0 0 1 0 0\nv 1 2 3 0 1 0\n")
put("stl", "two.stl", b"binary".ljust(80, b" ") + struct.pack("<I", 2) +
    b"".join(struct.pack("<12fH", 0, 0, 1, 0, 0, t, 1, 0, t, 0, 1, t, 0) for t in range(2)))
put("stl", "ascii.stl", "solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n"
    "endloop\nendfacet\nendsolid x\n")
put("pcd", "ascii.pcd", "VERSION 0.7\nFIELDS x y z normal_x normal_y normal_z\nSIZE 4 4 4 4 4 4\nTYPE F F F F F F\n"
    "COUNT 1 1 1 1 1 1\nWIDTH 2\nHEIGHT 1\nPOINTS 2\nDATA ascii\n1 2 3 0 0 1\nnan nan nan nan nan nan\n")
put("pcd", "binary.pcd", b"VERSION .7\nFIELDS x y z rgb\nSIZE 4 4 8 4\nTYPE F F F U\nCOUNT 1 1 1 1\nWIDTH 2\n"
    b"HEIGHT 1\nPOINTS 2\nDATA binary\n" + b"".join(struct.pack("<ffdI", 1.5 + i, -2, 0.25 * i, 0xff0000) for i in range(2)))
put("pcd", "features.pcd", "FIELDS x y z rgb intensity label\nSIZE 4 4 4 4 4 2\nTYPE F F F F F U\nCOUNT 1 1 1 1 1 1\n"
    "POINTS 2\nDATA ascii\n0 0 0 1.3e-38 0.5 3\n1 1 1 4.2e+06 7 9\n")

# Weights: the torch.save fixtures of the tests (the target adds its own export).
for name in ("one_entry.pt", "two_entries.pt", "nan_entry.pt", "state_dict_one_entry.pt", "state_dict_nested.pt"):
    os.makedirs(os.path.join(ROOT, "weights"), exist_ok=True)
    shutil.copy(os.path.join("tests/train/fixtures", name), os.path.join(ROOT, "weights", name))
