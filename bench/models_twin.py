"""The PyTorch (Python) twins of qkv's `vnt` (VNT-Net) and `vn-dgcnn` classifiers.

Why it exists: a user who wanted these models without qkv would run a Python
implementation like this one, so bench compares qkv against it side by side
(time and memory of a training step or a forward pass). Debian's python3-torch
(1.13) is the same version as the LibTorch qkv builds on, so the comparison is
of the implementations, not of torch versions.

The layers are written the way point-cloud Python code usually writes them
(the Vector Neurons reference style): channel mixing as nn.Linear(bias=False)
on x.transpose(1, -1); VN batch norm as the vector norms through a batch norm,
then x / norm * norm_bn; DGCNN's knn (pairwise distances + topk) and its
get_graph_feature (flattened index gather + cat); attention as matmul ->
softmax -> matmul with the [B, H, N, N] scores materialised (torch 1.13 has no
scaled_dot_product_attention). No custom kernels, no deliberate slowness.

They compute the same functions as qkv (same eps conventions, knn including the
point itself, attention scale 1/sqrt(head channels)), and the module names make
state_dict() keys equal to qkv's parameter and buffer names, so `--mode check`
loads weights exported by qkv (`build/bench_pointcloud --export DIR MODEL B N`,
float64, eval mode) and compares the logits.

Usage:
  /usr/bin/python3 bench/models_twin.py --model vnt|vn-dgcnn --mode train|infer|check \
      --batch B --points N --threads T --repeats R [--check-dir DIR] [--device cuda]
train/infer print one JSON line of timings and memory; check prints the largest
logit difference against DIR/io.pt after loading DIR/weights.pt.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from pointcloud_twin import peak_rss_mib  # (bench/ is the script's folder, first on sys.path)

# qkv's kVNEps: added to |d|^2 in the leaky ReLU, and squared under the square
# root of the vector norm (sqrt(|x|^2 + eps^2): finite gradient at 0).
EPS = 1e-6


# ---------------------------------------------------------------------------
# Vector-neuron building blocks. A VN feature is [B, C, 3, N] (or
# [B, C, 3, N, k] on a kNN graph): C channels of 3-D vectors per point.
# ---------------------------------------------------------------------------


def vn_linear(linear, x):
    """Channel mixing W x of a VN feature with an nn.Linear(bias=False) over channels."""
    return linear(x.transpose(1, -1)).transpose(1, -1)


def vn_norm(x):
    """Norm of every vector, [B, C, 3, ...] -> [B, C, ...], as qkv: sqrt(|x|^2 + eps^2)."""
    return torch.sqrt((x * x).sum(2) + EPS * EPS)


def vn_leaky_relu(x, d, negative_slope):
    """Where <x, d> < 0 remove x's component along d; blend with x by the slope."""
    dotprod = (x * d).sum(2, keepdim=True)
    mask = (dotprod >= 0).to(x.dtype)
    d_norm_sq = (d * d).sum(2, keepdim=True)
    return negative_slope * x + (1 - negative_slope) * (
        mask * x + (1 - mask) * (x - (dotprod / (d_norm_sq + EPS)) * d))


def knn(x, k):
    """x [B, D, N] -> [B, N, k] indices of the k nearest points, the point itself
    included (distance 0 is the largest negative distance). DGCNN's formulation."""
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise_distance = -xx - inner - xx.transpose(2, 1)
    return pairwise_distance.topk(k=k, dim=-1)[1]


def get_graph_feature(x, idx):
    """Edge features of a kNN graph: x [B, C, 3, N], idx [B, N, k] ->
    [B, 2C, 3, N, k] = cat[neighbour - centre, centre] over channels."""
    b, c, _, n = x.shape
    k = idx.size(2)
    idx = (idx + torch.arange(b, device=x.device).view(-1, 1, 1) * n).view(-1)
    x = x.reshape(b, c * 3, n).transpose(2, 1).contiguous()  # [B, N, 3C]
    feature = x.view(b * n, -1)[idx, :].view(b, n, k, c, 3)
    x = x.view(b, n, 1, c, 3).expand(-1, -1, k, -1, -1)
    return torch.cat((feature - x, x), dim=3).permute(0, 3, 4, 1, 2).contiguous()


def global_pool(x, pooling):
    """x [B, F, N] -> [B, F] (max or mean) or [B, 2F] (max+mean)."""
    if pooling == "max":
        return x.max(dim=-1)[0]
    if pooling == "mean":
        return x.mean(dim=-1)
    return torch.cat((x.max(dim=-1)[0], x.mean(dim=-1)), dim=1)


class VNBatchNorm(nn.BatchNorm1d):
    """Batch norm of the vector norms, directions kept.

    A subclass of BatchNorm1d rather than a wrapper holding one (the reference's
    self.bn), so that weight, bias and the running statistics sit directly
    under the module's name (`...batchnorm.running_mean`), as in qkv. The norm
    is [B, C, N] or [B, C, N, k]; F.batch_norm takes both, only BatchNorm1d's
    input check would refuse the 4-D one.
    """

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2-D input, got {input.dim()}-D")

    def forward(self, x):
        norm = vn_norm(x)
        norm_bn = super().forward(norm)
        return x / norm.unsqueeze(2) * norm_bn.unsqueeze(2)


class VNLeakyReLU(nn.Module):
    def __init__(self, channels, share=False, negative_slope=0.2):
        super().__init__()
        self.map_to_dir = nn.Linear(channels, 1 if share else channels, bias=False)
        self.negative_slope = negative_slope

    def forward(self, x):
        return vn_leaky_relu(x, vn_linear(self.map_to_dir, x), self.negative_slope)


class VNLinearLeakyReLU(nn.Module):
    """p = BN(W x), d = U x (from the input, not from p), leaky-ReLU(p; d)."""

    def __init__(self, in_channels, out_channels, share=False, negative_slope=0.2):
        super().__init__()
        self.map_to_feat = nn.Linear(in_channels, out_channels, bias=False)
        self.batchnorm = VNBatchNorm(out_channels)
        self.map_to_dir = nn.Linear(in_channels, 1 if share else out_channels, bias=False)
        self.negative_slope = negative_slope

    def forward(self, x):
        p = self.batchnorm(vn_linear(self.map_to_feat, x))
        return vn_leaky_relu(p, vn_linear(self.map_to_dir, x), self.negative_slope)


class VNStdFeature(nn.Module):
    """The invariant layer: a predicted per-point frame (3 vectors) and every
    channel's coordinates in it, [B, C, 3, N] -> [B, C, 3, N] invariant."""

    def __init__(self, in_channels, negative_slope=0.2):
        super().__init__()
        self.vn1 = VNLinearLeakyReLU(in_channels, in_channels // 2, negative_slope=negative_slope)
        self.vn2 = VNLinearLeakyReLU(in_channels // 2, in_channels // 4, negative_slope=negative_slope)
        self.vn_lin = nn.Linear(in_channels // 4, 3, bias=False)

    def forward(self, x):
        z0 = vn_linear(self.vn_lin, self.vn2(self.vn1(x)))  # [B, 3 frame vectors, 3 xyz, N]
        z0 = z0.transpose(1, 2)  # [B, xyz, frame, N]
        return torch.einsum("bijm,bjkm->bikm", x, z0), z0


class VNEdgeConv(nn.Module):
    """Edge features on a kNN graph, VNLinearLeakyReLU, mean over the neighbours."""

    def __init__(self, in_channels, out_channels, negative_slope=0.2):
        super().__init__()
        self.conv = VNLinearLeakyReLU(2 * in_channels, out_channels, negative_slope=negative_slope)

    def forward(self, x, idx):
        return self.conv(get_graph_feature(x, idx)).mean(dim=-1)


class VNMultiHeadAttention(nn.Module):
    """Per-head VN projections (stacked), VNAttention with the points as tokens
    and scale 1/sqrt(head_dim), concat, W_o back to the block width."""

    def __init__(self, channels, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.w_q = nn.Linear(channels, heads * head_dim, bias=False)
        self.w_k = nn.Linear(channels, heads * head_dim, bias=False)
        self.w_v = nn.Linear(channels, heads * head_dim, bias=False)
        self.w_o = nn.Linear(heads * head_dim, channels, bias=False)
        # d_k is the channel count of a head, not channels * 3 (VNT-Net).
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, x):
        b, _, _, n = x.shape

        def split(t):  # [B, H*d, 3, N] -> [B, H, N, 3d]: each head's tokens are the points
            return t.reshape(b, self.heads, self.head_dim * 3, n).transpose(2, 3)

        q = split(vn_linear(self.w_q, x)) * self.scale  # scaled before the product, as nn.MultiheadAttention
        k = split(vn_linear(self.w_k, x))
        v = split(vn_linear(self.w_v, x))
        attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)), dim=-1)  # [B, H, N, N]
        out = torch.matmul(attn, v)  # [B, H, N, 3d]
        out = out.transpose(2, 3).reshape(b, self.heads * self.head_dim, 3, n)
        return vn_linear(self.w_o, out)


class VNFeedForward(nn.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        self.lin1 = nn.Linear(channels, hidden, bias=False)
        self.relu = VNLeakyReLU(hidden, share=False, negative_slope=0.0)
        self.lin2 = nn.Linear(hidden, channels, bias=False)

    def forward(self, x):
        return vn_linear(self.lin2, self.relu(vn_linear(self.lin1, x)))


class VNTBlock(nn.Module):
    """x + MHA(x), then + FFN (the paper's block: no layer norm)."""

    def __init__(self, channels, heads, head_dim, ffn_hidden):
        super().__init__()
        self.attn = VNMultiHeadAttention(channels, heads, head_dim)
        self.ffn = VNFeedForward(channels, ffn_hidden)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.ffn(x)


class ClassificationHead(nn.Module):
    """(Linear, BatchNorm1d, LeakyReLU, Dropout) per hidden layer, then Linear."""

    def __init__(self, in_features, hidden, classes, dropout, negative_slope=0.2):
        super().__init__()
        layers, width = [], in_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.BatchNorm1d(h), nn.LeakyReLU(negative_slope), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


# ---------------------------------------------------------------------------
# The two models, with qkv's default options.
# ---------------------------------------------------------------------------


class VNTNet(nn.Module):
    """VNT-Net classifier, the paper's settings: C = 16, 24 heads of 16
    channels, 3 blocks, FFN hidden 4C, k = 20, max+mean pooling, 512-256 head."""

    def __init__(self, classes=40, linear_dim=16, heads=24, head_dim=16, blocks=3, ffn_hidden=None, k=20,
                 pooling="max+mean", head_hidden=(512, 256), dropout=0.5, negative_slope=0.2):
        super().__init__()
        self.k, self.pooling = k, pooling
        self.edge_conv = VNEdgeConv(1, linear_dim, negative_slope)
        self.blocks = nn.ModuleList(
            VNTBlock(linear_dim, heads, head_dim, ffn_hidden or 4 * linear_dim) for _ in range(blocks))
        # The block outputs and their mean over the cloud (a global reference for the frame).
        vn_channels = 2 * blocks * linear_dim
        self.invariant = VNStdFeature(vn_channels, negative_slope)
        width = 3 * vn_channels * (2 if pooling == "max+mean" else 1)
        self.head = ClassificationHead(width, list(head_hidden), classes, dropout, negative_slope)

    def forward(self, points):  # [B, 3, N] -> [B, classes]
        idx = knn(points, self.k)
        x = self.edge_conv(points.unsqueeze(1), idx)  # [B, C, 3, N]
        outputs = []
        for block in self.blocks:
            x = block(x)
            outputs.append(x)
        x = torch.cat(outputs, dim=1)
        x = torch.cat((x, x.mean(dim=-1, keepdim=True).expand_as(x)), dim=1)
        x = self.invariant(x)[0].flatten(1, 2)  # [B, 3 * 2 * blocks * C, N]
        return self.head(global_pool(x, self.pooling))


class VNDGCNN(nn.Module):
    """VN-DGCNN (Vector Neurons' classifier): four VN edge convolutions on
    dynamic kNN graphs (21, 21, 42, 85 channels), mean over neighbours, a
    shared-direction VN layer to 341 channels, the invariant layer on
    [x, mean x], max+mean pooling and a 512-256 head."""

    def __init__(self, classes=40, k=20, dropout=0.5):
        super().__init__()
        self.k = k
        c1, c2, c3, c4, c5 = 64 // 3, 64 // 3, 128 // 3, 256 // 3, 1024 // 3
        ins, outs = (1, c1, c2, c3), (c1, c2, c3, c4)
        self.convs = nn.ModuleList(VNLinearLeakyReLU(2 * i, o) for i, o in zip(ins, outs))
        self.conv5 = VNLinearLeakyReLU(c1 + c2 + c3 + c4, c5, share=True)
        self.invariant = VNStdFeature(2 * c5)
        self.head = ClassificationHead(2 * 3 * 2 * c5, [512, 256], classes, dropout)

    def forward(self, points):  # [B, 3, N] -> [B, classes]
        x = points.unsqueeze(1)
        b, n = x.size(0), x.size(3)
        levels = []
        for conv in self.convs:
            # Dynamic graph: neighbours by distance between the current VN features.
            idx = knn(x.reshape(b, -1, n), self.k)
            x = conv(get_graph_feature(x, idx)).mean(dim=-1)
            levels.append(x)
        x = self.conv5(torch.cat(levels, dim=1))  # [B, 341, 3, N]
        x = torch.cat((x, x.mean(dim=-1, keepdim=True).expand_as(x)), dim=1)
        x = self.invariant(x)[0].flatten(1, 2)  # [B, 682 * 3, N]
        return self.head(global_pool(x, "max+mean"))


MODELS = {"vnt": VNTNet, "vn-dgcnn": VNDGCNN}


# ---------------------------------------------------------------------------
# Benchmark and check.
# ---------------------------------------------------------------------------


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def load_qkv_weights(model, path):
    """Load a name -> tensor dict written by qkv into the twin. Every key must
    match; num_batches_tracked alone may be missing on either side (it does not
    affect the function)."""
    weights = torch.load(path)
    result = model.load_state_dict(weights, strict=False)
    other = [name for name in list(result.missing_keys) + list(result.unexpected_keys)
             if not name.endswith("num_batches_tracked")]
    if other:
        raise SystemExit(f"{path}: names do not match the twin: missing {result.missing_keys}, "
                         f"unexpected {result.unexpected_keys}")


def run_check(args, model):
    # float64 first, so weights the file holds in float64 are not rounded.
    model.double()
    load_qkv_weights(model, os.path.join(args.check_dir, "weights.pt"))
    io = torch.load(os.path.join(args.check_dir, "io.pt"))
    points, expected = io["points"].double(), io["logits"].double()
    model.eval()
    with torch.no_grad():
        logits = model(points)
    print(json.dumps({"model": args.model, "batch": points.size(0), "points": points.size(2),
                      "max_abs_diff": (logits - expected).abs().max().item(),
                      "max_abs_logit": expected.abs().max().item()}))


def run_bench(args, model):
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    device = torch.device(args.device)
    model.to(device)
    points = torch.randn(args.batch, 3, args.points, device=device)
    targets = torch.randint(0, 40, (args.batch,), device=device)

    def wait():  # a GPU runs asynchronously: a step ends when its kernels have
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    if args.mode == "train":
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)

        def step():
            optimizer.zero_grad()
            loss = F.cross_entropy(model(points), targets)
            loss.backward()
            optimizer.step()
    else:
        model.eval()

        def step():
            with torch.no_grad():
                model(points)

    rss_before = rss_mib()
    step()  # warm-up
    wait()
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        step()
        wait()
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({
        "torch": torch.__version__, "device": str(device), "model": args.model, "mode": args.mode, "params": params,
        "batch": args.batch, "points": args.points, "threads": torch.get_num_threads(),
        "median_ms": statistics.median(times), "times_ms": times,
        "rss_before_mib": rss_before,
        "peak_rss_mib": peak_rss_mib(),
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--points", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check-dir", default=None)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.model not in MODELS:
        sys.exit(f"unknown model '{args.model}' (expected vnt or vn-dgcnn)")
    if args.mode not in ("train", "infer", "check"):
        sys.exit(f"unknown mode '{args.mode}' (expected train, infer or check)")
    if args.mode == "check" and not args.check_dir:
        sys.exit("--mode check needs --check-dir DIR (with weights.pt and io.pt)")
    if args.repeats < 1 and args.mode != "check":
        sys.exit("--repeats must be >= 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = MODELS[args.model]()
    if args.mode == "check":
        run_check(args, model)
    else:
        run_bench(args, model)


if __name__ == "__main__":
    main()
