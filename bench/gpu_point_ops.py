"""qkv's kNN and farthest point sampling on a GPU against torch-cluster's, the
ops behind PyTorch Geometric's knn and fps, on the same GPU in one process.
Prints one JSON object per case (medians in ms, after a warm-up, each call
ended by a device synchronisation) and how far the two agree.

torch-cluster's ops are loaded from their shared libraries (--torch-cluster
DIR holding _version_cuda.so, _knn_cuda.so, _fps_cuda.so, as
scripts/build-torch-cluster makes them), not through its Python package, whose
loader looks for file names of the Python that built them (3.11 here, 3.12 on
the GPU machine). Without them only qkv's times print.

  PYTHONPATH=build-pip/python python bench/gpu_point_ops.py [--torch-cluster DIR] [--repeats 10]

--device cpu runs the same comparison on the CPU (torch-cluster's libraries
hold its CPU ops too): a check of this script where no GPU is, not a timing.
"""
import argparse
import glob
import json
import os
import statistics
import time

import torch

import qkv


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(call, repeats, device):
    call()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        synchronize(device)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def load_torch_cluster(folder):
    """True when torch-cluster's knn and fps ops are registered from folder."""
    if not folder:
        return False
    for name in ("_version", "_knn", "_fps"):
        found = glob.glob(os.path.join(folder, name + "_cuda*.so"))
        if not found:
            print(json.dumps({"torch_cluster": "absent", "missing": name + "_cuda", "folder": folder}))
            return False
        torch.ops.load_library(found[0])
    return True


def as_one_cloud(points):
    """[B, N, 3] -> torch-cluster's form: the points [B*N, 3] and where each
    cloud starts, ptr [B + 1]."""
    b, n, _ = points.shape
    return points.reshape(b * n, 3).contiguous(), torch.arange(0, b * n + 1, n, device=points.device)


def cluster_knn(flat, ptr, k):
    """torch-cluster's kNN of every point among the points of its own cloud:
    [2, B*N*k], row the query and col the neighbour, both global indices. On
    the CPU with as many workers as qkv has threads."""
    return torch.ops.torch_cluster.knn(flat, flat, ptr, ptr, k, False, torch.get_num_threads())


def bench_knn(b, n, k, repeats, with_cluster, device):
    x = torch.randn(b, n, 3, device=device)
    row = {"case": "knn", "b": b, "n": n, "k": k, "device": str(device),
           "qkv_ms": median_ms(lambda: qkv.ops.knn(x, k), repeats, device)}
    if with_cluster:
        flat, ptr = as_one_cloud(x)
        row["torch_cluster_ms"] = median_ms(lambda: cluster_knn(flat, ptr, k), repeats, device)
        # Random points have no ties: the same k neighbours, in any order.
        edges = cluster_knn(flat, ptr, k)
        theirs = (edges[1] % n).view(b, n, k).sort(-1).values
        ours = qkv.ops.knn(x, k).sort(-1).values
        row["same_neighbours"] = float((theirs == ours).all(-1).float().mean())
    print(json.dumps(row), flush=True)


def bench_fps(b, n, m, repeats, with_cluster, device):
    p = torch.randn(b, n, 3, device=device)
    row = {"case": "fps", "b": b, "n": n, "m": m, "device": str(device),
           "qkv_ms": median_ms(lambda: qkv.ops.farthest_point_sample(p, m), repeats, device)}
    if with_cluster:
        flat, ptr = as_one_cloud(p)
        # torch-cluster picks ceil(n * ratio) points a cloud: m here (a count
        # that differs is reported, not compared).
        ratio = torch.tensor([m / n], dtype=torch.float64, device=device)
        def cluster_fps():
            return torch.ops.torch_cluster.fps(flat, ptr, ratio, False)
        row["torch_cluster_ms"] = median_ms(cluster_fps, repeats, device)
        theirs = cluster_fps()
        if theirs.numel() == b * m:
            # Both start at each cloud's first point; a last-bit difference
            # in a distance can change a pick and every pick after it.
            same = (theirs.view(b, m) % n) == qkv.ops.farthest_point_sample(p, m)
            row["same_picks"] = float(same.float().mean())
        else:
            row["torch_cluster_picks"] = int(theirs.numel())
    print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-cluster", default="", help="folder of torch-cluster's _*_cuda.so libraries")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu point ops: no GPU visible; nothing measured")
        return
    with_cluster = load_torch_cluster(args.torch_cluster)
    torch.manual_seed(0)
    for b, n in ((16, 1024), (1, 8192)):
        bench_knn(b, n, 20, args.repeats, with_cluster, device)
    bench_fps(16, 10000, 1024, args.repeats, with_cluster, device)
    print("gpu point ops: done")


if __name__ == "__main__":
    main()
