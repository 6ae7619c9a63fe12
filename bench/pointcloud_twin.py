"""The PyTorch (Python) twin of bench/pointcloud.cpp's kernels, in the form
point-cloud code usually writes them: the iterative FPS loop of the PointNet++
ports and DGCNN's knn (pairwise distances, then topk; at scan sizes a block
of queries at a time, as the N x N matrix would not fit). Run by bench_pointcloud
with the same sizes and threads; prints one JSON object of medians in ms.
Debian's python3-torch (1.13) is the same version as our LibTorch.
"""
import argparse
import json
import statistics
import time

import torch


def farthest_point_sample(xyz, npoint):
    """xyz [B, N, 3] -> [B, npoint] indices, starting at point 0."""
    b, n, _ = xyz.shape
    centroids = torch.zeros(b, npoint, dtype=torch.long)
    distance = torch.ones(b, n) * 1e10
    farthest = torch.zeros(b, dtype=torch.long)
    batch_indices = torch.arange(b)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch_indices, farthest, :].view(b, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)
        mask = dist < distance
        distance[mask] = dist[mask]
        farthest = torch.max(distance, -1)[1]
    return centroids


def knn(x, k):
    """x [B, D, N] -> [B, N, k] indices of the nearest (DGCNN's formulation)."""
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise_distance = -xx - inner - xx.transpose(2, 1)
    return pairwise_distance.topk(k=k, dim=-1)[1]


def knn_blocked(x, k, block=2048):
    """The same a block of queries at a time: [block, N] distances, not N x N."""
    xx = torch.sum(x ** 2, dim=1, keepdim=True)  # [B, 1, N]
    out = []
    for q0 in range(0, x.shape[2], block):
        q = x[:, :, q0:q0 + block]
        pairwise_distance = 2 * torch.matmul(q.transpose(2, 1), x) - xx - xx[:, :, q0:q0 + block].transpose(2, 1)
        out.append(pairwise_distance.topk(k=k, dim=-1)[1])
    return torch.cat(out, 1)


def median_ms(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def peak_rss_mib():
    """This process's peak resident memory: VmHWM, its own address space's (getrusage's ru_maxrss is carried
    over fork and exec, so a child started by a large parent would report the parent's peak)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", required=True, help="JSON list of {name, kind, b, n, m|k}")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    for case in json.loads(args.cases):
        b, n = case["b"], case["n"]
        if case["kind"] == "fps":
            xyz = torch.randn(b, n, 3)
            out[case["name"]] = median_ms(lambda: farthest_point_sample(xyz, case["m"]), args.repeats)
        elif case["kind"] == "knn_blocked":
            x = torch.rand(b, case.get("d", 3), n)
            out[case["name"]] = median_ms(lambda: knn_blocked(x, case["k"]), args.repeats)
        else:
            x = torch.randn(b, case.get("d", 3), n)
            out[case["name"]] = median_ms(lambda: knn(x, case["k"]), args.repeats)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
