"""qkv from Python against the same work in C++ and against the PyTorch
formulations a user would otherwise run, same threads, one run:

  kernels  qkv.ops.farthest_point_sample and qkv.ops.knn on bench_pointcloud's
           cases, and edge features forward + backward (VN-DGCNN's first
           layer), timed here; the C++ times of the same cases from
           `build/bench_pointcloud THREADS REPEATS kernels`; the PyTorch
           formulations of bench/pointcloud_twin.py timed here; and
           qkv.ops.attention (tiled) against matmul-softmax-matmul,
           forward + backward.
  models   a training step (forward, backward, Adam) of VNT-Net and
           VN-DGCNN at batch 16, 1,024 points, registry defaults: qkv.models
           from Python (glibc's malloc as `import qkv` sets it, keeping freed
           memory; as glibc has it, QKV_KEEP_FREED_MEMORY=0; and jemalloc
           preloaded), the C++ model (`bench_pointcloud --child`, jemalloc
           linked), and the pure-PyTorch twin of bench/models_twin.py (glibc
           and jemalloc). Each in a process of its own, with its peak
           resident memory. And the same Python step under
           torch.autocast("cpu", bfloat16), which qkv runs in float32
           (docs/python.md): its ratio to the plain step.

Run from the source tree after `make python bench`:
  PYTHONPATH=build/python /usr/bin/python3 bench/python_bindings.py [--threads 2] [--repeats 5] [--skip-models]
Prints two tables; ratios > 1 mean qkv from Python is faster.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("QKV_BUILD", os.path.join(ROOT, "build"))
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
sys.path.insert(0, HERE)
from pointcloud_twin import median_ms, peak_rss_mib  # noqa: E402  (one timing and memory rule for the benches)
KERNEL_CASES = [  # bench_pointcloud's names
    ("fps 10000->1024, B=16", "fps", 16, 10000, 1024, 3),
    ("knn k=20, N=1024, B=16", "knn", 16, 1024, 20, 3),
    ("knn k=20, N=8192, B=4", "knn", 4, 8192, 20, 3),
    ("knn k=20, N=1024, D=192, B=16", "knn", 16, 1024, 20, 192),
]


def cpp_kernel_times(threads, repeats):
    """bench_pointcloud's kernel table: name -> (qkv ms, pytorch ms)."""
    out = subprocess.run([os.path.join(BUILD, "bench_pointcloud"), str(threads), str(repeats), "kernels"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"(.+?)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+x", line)
        if m:
            rows[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
    return rows


def bench_kernels(threads, repeats):
    import torch
    import qkv
    import pointcloud_twin as twin

    torch.set_num_threads(threads)
    qkv.set_threads(threads)
    torch.manual_seed(0)
    cpp = cpp_kernel_times(threads, repeats)
    rows = []
    for name, kind, b, n, m_or_k, d in KERNEL_CASES:
        if kind == "fps":
            xyz = torch.randn(b, n, 3)
            ours = median_ms(lambda: qkv.ops.farthest_point_sample(xyz, m_or_k), repeats)
            theirs = median_ms(lambda: twin.farthest_point_sample(xyz, m_or_k), repeats)
        else:
            x = torch.randn(b, d, n)
            points = x.transpose(1, 2)
            ours = median_ms(lambda: qkv.ops.knn(points, m_or_k), repeats)
            theirs = median_ms(lambda: twin.knn(x, m_or_k), repeats)
        rows.append((name, ours, cpp.get(name, (float("nan"),))[0], theirs))
    x = torch.randn(16, 21, 3, 1024).requires_grad_()
    idx = qkv.ops.knn(x.detach().reshape(16, 63, 1024).transpose(1, 2), 20)

    def edge(fn):
        fn(x, idx, False).sum().backward()
        x.grad = None

    rows.append(("edge features fwd+bwd C=21", median_ms(lambda: edge(qkv.ops.edge_features), repeats),
                 cpp.get("edge features fwd+bwd C=21", (float("nan"),))[0],
                 median_ms(lambda: edge(qkv.ops.edge_features_composed), repeats)))
    q, k, v = (torch.randn(4, 8, 2048, 64).requires_grad_() for _ in range(3))

    def attention(tiled):
        if tiled:
            out = qkv.ops.attention(q, k, v, causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) * 64 ** -0.5
            s = s.masked_fill(torch.ones(2048, 2048, dtype=torch.bool).triu(1), float("-inf"))
            out = torch.softmax(s, -1) @ v
        out.sum().backward()
        q.grad = k.grad = v.grad = None

    rows.append(("attention causal fwd+bwd B4 H8 N2048 d64", median_ms(lambda: attention(True), repeats),
                 float("nan"), median_ms(lambda: attention(False), repeats)))
    print("kernels: median of %d runs, %d threads; 'C++' = the same case in bench_pointcloud; "
          "'pytorch' = bench/pointcloud_twin.py's formulation (edge features: qkv's composed version; "
          "attention: matmul, masked softmax, matmul)" % (repeats, threads))
    print("%-42s %10s %10s %9s %11s %8s" % ("kernel", "python ms", "C++ ms", "py / C++", "pytorch ms", "speed"))
    for name, ours, cpp_ms, theirs in rows:
        print("%-42s %10.2f %10.2f %9.2f %11.2f %7.1fx" % (name, ours, cpp_ms, ours / cpp_ms, theirs, theirs / ours))


def model_child(name, threads, repeats, autocast=False):
    """One JSON line: qkv's model from Python, a training step, as bench_pointcloud --child prints it."""
    import contextlib
    import torch
    import qkv
    torch.set_num_threads(threads)
    qkv.set_threads(threads)
    torch.manual_seed(0)
    model = qkv.models.create(name)
    points = torch.randn(16, 3, 1024)
    target = torch.randint(0, 40, (16,))
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)

    def step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            loss = torch.nn.functional.cross_entropy(model(points=points), target)
        loss.backward()
        optimizer.step()

    ms = median_ms(step, repeats)
    print(json.dumps({"model": name, "autocast": autocast, "median_ms": ms, "peak_rss_mib": peak_rss_mib()}))


def run_json(command, env=None):
    r = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    if r.returncode != 0:
        sys.exit("python_bindings: %s failed:\n%s" % (" ".join(command), r.stderr[-2000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def bench_models(threads, repeats):
    preload = dict(os.environ, LD_PRELOAD=JEMALLOC, MALLOC_CONF="dirty_decay_ms:-1,muzzy_decay_ms:-1")
    me = [sys.executable, os.path.abspath(__file__), "--child-model"]
    print("\nmodels: training step, batch 16, 1,024 points, median of %d runs after one warm-up, %d threads; "
          "'+je' = jemalloc preloaded (MALLOC_CONF as qkv's executables)" % (repeats, threads))
    glibc = dict(os.environ, QKV_KEEP_FREED_MEMORY="0")
    print("%-9s %10s %10s %10s %10s %9s %9s %10s %10s %10s %10s %12s" % (
        "model", "python ms", "py glibc", "py+je ms", "C++ ms", "py / C++", "glibc/C++", "torch ms", "torch+je",
        "vs torch", "vs t+je", "autocast/py"))
    peaks = []
    for name in ("vnt", "vn-dgcnn"):
        args = [name, "--threads", str(threads), "--repeats", str(repeats)]
        kept = run_json(me + args)
        py = kept["median_ms"]
        plain = run_json(me + args, glibc)
        py_autocast = run_json(me + args + ["--autocast"])["median_ms"]
        with_je = run_json(me + args, preload)
        py_je = with_je["median_ms"]
        cpp_run = run_json([os.path.join(BUILD, "bench_pointcloud"), "--child", name, "train", "16", "1024",
                            str(threads), str(repeats)])
        cpp = cpp_run["median_ms"]
        peaks.append((name, kept["peak_rss_mib"], plain["peak_rss_mib"], with_je["peak_rss_mib"],
                      cpp_run["peak_rss_mib"]))
        twin = [sys.executable, os.path.join(HERE, "models_twin.py"), "--model", name, "--mode", "train",
                "--batch", "16", "--points", "1024", "--threads", str(threads), "--repeats", str(repeats)]
        torch_ms = run_json(twin)["median_ms"]
        torch_je = run_json(twin, preload)["median_ms"]
        print("%-9s %10.0f %10.0f %10.0f %10.0f %9.2f %9.2f %10.0f %10.0f %9.1fx %9.1fx %11.2fx" % (
            name, py, plain["median_ms"], py_je, cpp, py / cpp, plain["median_ms"] / cpp, torch_ms, torch_je,
            torch_ms / py, torch_je / py, py_autocast / py))
    print("\npeak resident memory, MiB: python (freed memory kept) / python (glibc as it is) / python + jemalloc / C++")
    for name, kept_mib, plain_mib, je_mib, cpp_mib in peaks:
        print("%-9s %10.0f %10.0f %10.0f %10.0f" % (name, kept_mib, plain_mib, je_mib, cpp_mib))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--skip-kernels", action="store_true")
    parser.add_argument("--child-model", metavar="NAME")
    parser.add_argument("--autocast", action="store_true", help="with --child-model: the step under bfloat16 autocast")
    args = parser.parse_args()
    if args.threads < 1 or args.repeats < 1:
        sys.exit("python_bindings: --threads and --repeats must be >= 1")
    if args.child_model:
        return model_child(args.child_model, args.threads, args.repeats, args.autocast)
    if not args.skip_kernels:
        bench_kernels(args.threads, args.repeats)
    if not args.skip_models:
        bench_models(args.threads, args.repeats)


if __name__ == "__main__":
    main()
