// Naive vs tiled attention on the CPU: forward and forward+backward, GFLOP/s,
// speed ratio and peak extra memory, at one thread and at all threads, with the
// machine's single-thread sgemm as the ceiling. Not a test: prints a table.
//
//   bench_attention            the table (N in {256,1024,4096}, d in {16,48,64}), then the tiled
//                              forward and backward each timed alone at N=1024, d=48 as fractions of sgemm
//   bench_attention --sweep    also: tile sizes at N=4096 (one thread) and N=1024 (all cores), and the Auto crossover
//   bench_attention --cold     leave glibc malloc as it is (see "Allocator" below)
//   bench_attention --torch    the tiled kernel against PyTorch's fused CPU attention (the Torch
//                              backend; a build against LibTorch >= 2.1), one thread and all
//   bench_attention --tile-ops the tiled kernel's work on one tile, op by op, one thread
//                              (d = 48, the default tiles): what each GEMM and row pass costs alone,
//                              then the same tile through the AVX-512 tile kernels where the CPU has them
//
// Allocator: by default the bench keeps freed memory in the process
// (mallopt M_MMAP_MAX = 0, M_TRIM_THRESHOLD = 1 GiB), so a run reuses pages that
// earlier runs touched, as a caching allocator would. With --cold every large
// tensor is a fresh mmap whose pages fault in on first touch; on the VM this was
// measured on that costs ~0.3 GB/s and dominates the naive path's N^2 buffers.
//
// Memory: a CPU allocator that wraps c10's default one and counts live bytes is
// installed with c10::SetCPUAllocator, so every tensor and the tiled kernel's
// scratch (taken from the same allocator) is counted; "peak extra" is the peak
// of live bytes during a run minus the bytes live before it (inputs excluded,
// gradients of the inputs included). OpenBLAS's internal buffers are not seen.
#include <torch/torch.h>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <malloc.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/attention/tiled_attention.h"
#include "qkv/attention/tiled_attention_rows.h"
#include "qkv/attention/tiled_attention_tile_kernels.h"
#include "qkv/runtime/blas.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "roofs.h"

namespace qa = qkv::attention;

namespace {

// Live and peak bytes of CPU tensor storage. Each block carries a 64-byte header
// with its size, so the raw deleter can account for it too.
std::atomic<int64_t> g_live{0}, g_peak{0};

// c10::Allocator's allocate became non-const in LibTorch 2.3, which added
// copy_data (the copy of a storage's bytes).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define QKV_ALLOCATE_CONST
#else
#define QKV_ALLOCATE_CONST const
#endif

class TrackingAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kHeader = 64;  // keeps c10's 64-byte alignment
  c10::DataPtr allocate(size_t n) QKV_ALLOCATE_CONST override {
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    std::memcpy(base, &n, sizeof n);
    const int64_t live = g_live.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
    void* data = base + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif

 private:
  static void release(void* data) {
    if (!data) return;
    char* base = static_cast<char*>(data) - kHeader;
    size_t n;
    std::memcpy(&n, base, sizeof n);
    g_live.fetch_sub(static_cast<int64_t>(n));
    c10::free_cpu(base);
  }
};
TrackingAllocator g_tracking;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Measure {
  double seconds = 0;    // best of the repetitions
  double extra_mib = 0;  // peak extra bytes of the first timed run
};

// Runs fn once to warm up, then `reps` more times (at least, until min_seconds
// total), returning the best time and the peak extra memory of a run.
Measure measure(const std::function<void()>& fn, int reps = 3, double min_seconds = 0.3) {
  fn();
  Measure m;
  m.seconds = 1e30;
  double total = 0;
  for (int r = 0; r < reps || (total < min_seconds && r < 50); ++r) {
    const int64_t before = g_live.load();
    g_peak.store(before);
    const double t0 = now();
    fn();
    const double t = now() - t0;
    total += t;
    m.seconds = std::min(m.seconds, t);
    m.extra_mib = std::max(m.extra_mib, static_cast<double>(g_peak.load() - before) / (1024.0 * 1024.0));
  }
  return m;
}

struct Inputs {
  at::Tensor q, k, v, g;
};

Inputs make_inputs(int64_t BH, int64_t N, int64_t d, bool grad) {
  Inputs in;
  in.q = at::randn({1, BH, N, d}).requires_grad_(grad);
  in.k = at::randn({1, BH, N, d}).requires_grad_(grad);
  in.v = at::randn({1, BH, N, d}).requires_grad_(grad);
  in.g = at::randn({1, BH, N, d});
  return in;
}

void run_once(Inputs& in, qa::AttentionBackend backend, bool backward, bool causal = false, qa::TileSizes tiles = {}) {
  qa::SdpaOptions o;
  o.backend = backend;
  o.causal = causal;
  at::Tensor out;
  if (backend == qa::AttentionBackend::Tiled && (tiles.block_q || tiles.block_k))
    out = qa::tiled_attention(in.q, in.k, in.v, 1.0 / std::sqrt(static_cast<double>(in.q.size(3))), causal, {}, tiles);
  else
    out = qa::scaled_dot_product_attention(in.q, in.k, in.v, o).output;
  if (backward) {
    for (auto* t : {&in.q, &in.k, &in.v}) t->mutable_grad() = at::Tensor();
    out.backward(in.g);
  }
}

// B*H so that one forward is about 2 GFLOP (at least 1).
int64_t pick_bh(int64_t N, int64_t d) {
  const double per_head = 4.0 * N * N * d;
  return std::max<int64_t>(1, static_cast<int64_t>(2e9 / per_head + 0.5));
}

// sgemm 2048^3 on the current threads, best of >= 5 runs and >= 1 s (roofs.h).
double sgemm_gflops() { return qkv::bench::sgemm_gflops(5, 1.0); }

// The kernels hold OpenBLAS at one thread while they run, so every tile size
// here runs on single-threaded GEMMs (default_tile_sizes).
void sweep_tiles(int threads, int64_t N) {
  qkv::set_threads(threads);
  std::printf("\nTile sweep: N=%lld, forward and forward+backward GFLOP/s, %d thread(s)\n", (long long)N, threads);
  std::printf("%4s %6s %6s %10s %10s\n", "d", "bq", "bk", "fwd", "fwd+bwd");
  for (int64_t d : {16, 48, 64}) {
    const int64_t BH = pick_bh(N, d);
    Inputs in = make_inputs(BH, N, d, true);
    const double fl = 4.0 * BH * N * N * d;
    for (auto [bq, bk] : std::vector<std::pair<int64_t, int64_t>>{
             {64, 64}, {128, 128}, {128, 256}, {256, 256}, {128, 512}, {256, 512}, {256, 1024}}) {
      Measure f, fb;
      {
        at::NoGradGuard ng;
        f = measure([&] { run_once(in, qa::AttentionBackend::Tiled, false, false, {bq, bk}); }, 2, 0.1);
      }
      fb = measure([&] { run_once(in, qa::AttentionBackend::Tiled, true, false, {bq, bk}); }, 2, 0.1);
      std::printf("%4lld %6lld %6lld %10.1f %10.1f\n", (long long)d, (long long)bq, (long long)bk, fl / f.seconds / 1e9,
                  2.5 * fl / fb.seconds / 1e9);
      std::fflush(stdout);
    }
  }
}

void crossover(int threads) {
  qkv::set_threads(threads);
  std::printf("\nAuto crossover: forward (no grad) and forward+backward time ratio naive/tiled, d=64, %d thread(s)\n",
              threads);
  std::printf("%6s %6s %12s %12s\n", "N", "BH", "fwd", "fwd+bwd");
  for (int64_t N : {64, 128, 256, 384, 512, 768, 1024}) {
    const int64_t d = 64, BH = std::max<int64_t>(2, pick_bh(N, d) / 4);
    Inputs in = make_inputs(BH, N, d, true);
    Measure fn, ft;
    {
      at::NoGradGuard ng;
      fn = measure([&] { run_once(in, qa::AttentionBackend::Naive, false); }, 3, 0.1);
      ft = measure([&] { run_once(in, qa::AttentionBackend::Tiled, false); }, 3, 0.1);
    }
    Measure bn = measure([&] { run_once(in, qa::AttentionBackend::Naive, true); }, 3, 0.1);
    Measure bt = measure([&] { run_once(in, qa::AttentionBackend::Tiled, true); }, 3, 0.1);
    std::printf("%6lld %6lld %12.2f %12.2f\n", (long long)N, (long long)BH, fn.seconds / ft.seconds,
                bn.seconds / bt.seconds);
    std::fflush(stdout);
  }
}

// The tiled kernel against PyTorch's own fused CPU attention, the Torch
// backend (why Auto keeps the tiled kernel on the CPU: docs/attention.md).
int against_torch() {
  if (!qa::torch_attention_available()) {
    std::fprintf(stderr, "bench_attention --torch: this build's LibTorch has no fused attention (2.1 or later has)\n");
    return 1;
  }
  std::printf(
      "Tiled vs torch (at::scaled_dot_product_attention on the CPU): time ratio torch/tiled, > 1 = tiled\n"
      "faster; d = 64, float32, forward (no grad) and forward+backward, causal and not\n");
  std::printf("%8s %6s %6s %7s %10s %10s\n", "threads", "N", "BH", "causal", "fwd", "fwd+bwd");
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (const int threads : {1, all}) {
    qkv::set_threads(threads);
    for (const int64_t N : {256, 1024, 4096})
      for (const bool causal : {false, true}) {
        const int64_t d = 64, BH = pick_bh(N, d);
        Inputs in = make_inputs(BH, N, d, true);
        Measure ft, fp;
        {
          at::NoGradGuard ng;
          ft = measure([&] { run_once(in, qa::AttentionBackend::Tiled, false, causal); }, 3, 0.1);
          fp = measure([&] { run_once(in, qa::AttentionBackend::Torch, false, causal); }, 3, 0.1);
        }
        const Measure bt = measure([&] { run_once(in, qa::AttentionBackend::Tiled, true, causal); }, 3, 0.1);
        const Measure bp = measure([&] { run_once(in, qa::AttentionBackend::Torch, true, causal); }, 3, 0.1);
        std::printf("%8d %6lld %6lld %7s %10.2f %10.2f\n", threads, (long long)N, (long long)BH, causal ? "yes" : "no",
                    fp.seconds / ft.seconds, bp.seconds / bt.seconds);
        std::fflush(stdout);
      }
  }
  return 0;
}

// The kernel's calls on one tile (the same qkv::blas::gemm and row kernels,
// the same shapes and strides), each timed alone on one thread with its
// operands in cache: the rate the tile work reaches without the kernel's
// loads of Q, K, V, O and dO from memory and its bookkeeping. The forward does
// two GEMMs a tile, the backward five (S recomputed, dV, dP, dK, dQ), so the
// backward executes 2.5x the forward's FLOPs where the table counts 1.5x.
void tile_ops() {
  qkv::set_threads(1);
  const int64_t d = 48;
  const qa::TileSizes t = qa::default_tile_sizes(d, d);
  const int64_t m = t.block_q, n = t.block_k;
  auto buf = [](int64_t size) { return at::randn({size}); };
  at::Tensor Q = buf(m * d), K = buf(n * d), V = buf(n * d), dO = buf(m * d), O = buf(m * d), P = buf(m * n),
             dP = buf(m * n), dQ = buf(m * d), dK = buf(n * d), dV = buf(n * d);
  float *q = Q.data_ptr<float>(), *k = K.data_ptr<float>(), *v = V.data_ptr<float>(), *dout = dO.data_ptr<float>(),
        *out = O.data_ptr<float>(), *p = P.data_ptr<float>(), *dp = dP.data_ptr<float>(), *dq = dQ.data_ptr<float>(),
        *dk = dK.data_ptr<float>(), *dv = dV.data_ptr<float>();
  const float alpha = 0.25f;
  const double gemm_flops = 2.0 * m * n * d;
  std::printf("\nOne tile's work, op by op: d = %lld, tiles %lld x %lld, one thread, operands in cache, best of 200\n",
              (long long)d, (long long)m, (long long)n);
  double forward_us = 0, backward_us = 0;
  auto op = [&](const char* name, bool forward, bool backward, double flops,
                const std::function<void()>& fn) -> double {
    for (int r = 0; r < 3; ++r) fn();
    double best = 1e9;
    for (int r = 0; r < 200; ++r) {
      const double t0 = now();
      fn();
      best = std::min(best, now() - t0);
    }
    if (forward) forward_us += best * 1e6;
    if (backward) backward_us += best * 1e6;
    if (flops > 0)
      std::printf("  %-40s %8.1f us  %6.1f GFLOP/s\n", name, best * 1e6, flops / best / 1e9);
    else
      std::printf("  %-40s %8.1f us\n", name, best * 1e6);
    return best * 1e6;
  };
  op("S = alpha Q K^T (forward and backward)", true, true, gemm_flops,
     [&] { qkv::blas::gemm(false, true, m, n, d, alpha, q, d, k, d, 0.0f, p, n); });
  const double max_us = op("row max (forward)", true, false, 0, [&] {
    for (int64_t r = 0; r < m; ++r) qa::rows::max(p + r * n, n);
  });
  const double exp_us = op("P = exp(S - m), row sums", true, true, 0, [&] {
    for (int64_t r = 0; r < m; ++r) qa::rows::exp_sum(p + r * n, n, 2.0f);
  });
  op("O += P V (forward)", true, false, gemm_flops,
     [&] { qkv::blas::gemm(false, false, m, d, n, 1.0f, p, n, v, d, 1.0f, out, d); });
  op("dV += P^T dO", false, true, gemm_flops,
     [&] { qkv::blas::gemm(true, false, n, d, m, 1.0f, p, n, dout, d, 1.0f, dv, d); });
  op("dP = dO V^T", false, true, gemm_flops,
     [&] { qkv::blas::gemm(false, true, m, n, d, 1.0f, dout, d, v, d, 0.0f, dp, n); });
  op("dS = P (dP - D)", false, true, 0, [&] {
    for (int64_t r = 0; r < m; ++r) qa::rows::dsoftmax(dp + r * n, p + r * n, n, 0.5f);
  });
  op("dK += alpha dS^T Q", false, true, gemm_flops,
     [&] { qkv::blas::gemm(true, false, n, d, m, alpha, dp, n, q, d, 1.0f, dk, d); });
  op("dQ += alpha dS K", false, true, gemm_flops,
     [&] { qkv::blas::gemm(false, false, m, d, n, alpha, dp, n, k, d, 1.0f, dq, d); });
  std::printf(
      "  forward: %.1f us a tile = %.1f GFLOP/s; backward: %.1f us = %.1f GFLOP/s executed (5 GEMMs), "
      "%.1f GFLOP/s as the table counts it (1.5x the forward's FLOPs)\n",
      forward_us, 2 * gemm_flops / forward_us / 1e3, backward_us, 5 * gemm_flops / backward_us / 1e3,
      3 * gemm_flops / backward_us / 1e3);
  if (!qa::tile_kernels::available()) return;
  // The float path on AVX-512 CPUs: the forward's S and O += P V; in the
  // backward K and V packed once a key block (shared by the key block's query
  // blocks), P and dS in one pass, the three products reading P and dS in
  // place.
  namespace tk = qa::tile_kernels;
  std::printf("The same tile with the AVX-512 tile kernels (this CPU's float path):\n");
  std::vector<float> kp(tk::panel_floats(n, d)), vp(tk::panel_floats(n, d)), lse(m, 2.0f), D(m, 0.5f);
  const double pack_us = op("pack K and V into panels (once a key block)", false, false, 0, [&] {
    tk::pack_panels(k, n, d, kp.data());
    tk::pack_panels(v, n, d, vp.data());
  });
  tk::ScoreTile tile;
  tile.m = m;
  tile.n = n;
  tile.q = q;
  tile.d = d;
  tile.k_panels = kp.data();
  tile.dout = dout;
  tile.dv = d;
  tile.v_panels = vp.data();
  tile.lse = lse.data();
  tile.D = D.data();
  tile.alpha = alpha;
  tile.p = p;
  tile.ds = dp;
  tile.ld = n;
  double own_forward_us = op("S = alpha Q K^T (own; forward)", false, false, gemm_flops,
                             [&] { tk::scaled_scores(m, n, q, d, kp.data(), alpha, p, n); });
  own_forward_us += op("O += P V (own; forward)", false, false, gemm_flops,
                       [&] { tk::accumulate_product(m, d, n, 1.0f, p, n, 1, v, d, out, d); });
  own_forward_us += max_us + exp_us;     // the row kernels as above
  double own_us = pack_us * m / 1024.0;  // N = 1,024: one key block serves 1024 / m query blocks
  own_us += op("P and dS in one pass (2 GEMMs, exp, dS)", false, false, 2 * gemm_flops, [&] { tk::score_tile(tile); });
  own_us += op("dV += P^T dO (own)", false, false, gemm_flops,
               [&] { tk::accumulate_product(n, d, m, 1.0f, p, 1, n, dout, d, dv, d); });
  own_us += op("dK += alpha dS^T Q (own)", false, false, gemm_flops,
               [&] { tk::accumulate_product(n, d, m, alpha, dp, 1, n, q, d, dk, d); });
  own_us += op("dQ += alpha dS K (own)", false, false, gemm_flops,
               [&] { tk::accumulate_product(m, d, n, alpha, dp, n, 1, k, d, dq, d); });
  std::printf("  forward: %.1f us a tile (keys packed once a head, not counted) = %.1f GFLOP/s\n", own_forward_us,
              2 * gemm_flops / own_forward_us / 1e3);
  std::printf(
      "  backward: %.1f us a tile (packing shared by %lld query blocks of N = 1,024) = %.1f GFLOP/s executed, "
      "%.1f GFLOP/s as the table counts it\n",
      own_us, (long long)(1024 / m), 5 * gemm_flops / own_us / 1e3, 3 * gemm_flops / own_us / 1e3);
}

// The tiled kernel's forward and backward each timed alone (tiled_attention_forward
// / _backward, no autograd) at VNT-Net's head width on all cores, against
// sgemm: `cores` times the one-thread ceiling (the table's reference) and
// sgemm run on all cores. The backward's FLOPs two ways: as the table counts
// them (1.5x the forward's: the convention of the brief) and as executed (5
// GEMMs a tile, 2.5x: S is recomputed; FlashAttention's count).
void sgemm_fractions(double one_thread_sgemm, int cores) {
  qkv::set_threads(cores);
  const double all_sgemm = sgemm_gflops();
  const int64_t N = 1024, d = 48, BH = pick_bh(N, d);
  Inputs in = make_inputs(BH, N, d, false);
  const double alpha = 1.0 / std::sqrt(static_cast<double>(d)), fl = 4.0 * BH * N * N * d;
  const qa::TiledForward f = qa::tiled_attention_forward(in.q, in.k, in.v, alpha, false);
  const Measure fw = measure([&] { qa::tiled_attention_forward(in.q, in.k, in.v, alpha, false); }, 10, 1.0);
  const Measure bw = measure(
      [&] { qa::tiled_attention_backward(in.q, in.k, in.v, f.output, f.logsumexp, in.g, alpha, false); }, 10, 1.0);
  const double ceiling = cores * one_thread_sgemm;
  std::printf(
      "\nFraction of sgemm: tiled forward and backward each alone, N = %lld, d = %lld, BH = %lld, %d threads, "
      "best of >= 10\n",
      (long long)N, (long long)d, (long long)BH, cores);
  std::printf("  sgemm: %d x %.1f (one thread, the table's ceiling) = %.1f GFLOP/s; on %d threads %.1f GFLOP/s\n",
              cores, one_thread_sgemm, ceiling, cores, all_sgemm);
  auto line = [&](const char* what, double flops, double seconds) {
    const double rate = flops / seconds / 1e9;
    std::printf("  %-44s %8.2f ms %8.1f GFLOP/s %6.1f %% of %d x one thread %6.1f %% of sgemm on %d threads\n", what,
                seconds * 1e3, rate, 100 * rate / ceiling, cores, 100 * rate / all_sgemm, cores);
  };
  line("forward (4 BH N^2 d)", fl, fw.seconds);
  line("backward, counted as 1.5x forward (the table)", 1.5 * fl, bw.seconds);
  line("backward, executed: 2.5x forward (5 GEMMs)", 2.5 * fl, bw.seconds);
}

}  // namespace

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  bool sweep = false, cold = false, against = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sweep")
      sweep = true;
    else if (a == "--cold")
      cold = true;
    else if (a == "--tile-ops") {
      tile_ops();
      return 0;
    } else if (a == "--torch") {
      against = true;
    } else {
      std::fprintf(stderr, "usage: bench_attention [--sweep] [--cold] [--tile-ops | --torch]\n");
      return 2;
    }
  }
  if (!cold) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  c10::SetCPUAllocator(&g_tracking, /*priority=*/100);
  torch::manual_seed(0);
  if (against) return against_torch();
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double t_start = now();

  qkv::set_threads(1);
  const double sgemm = sgemm_gflops();
  auto blas = qkv::blas_info();
  std::printf(
      "bench_attention: naive (matmul, softmax, matmul) vs tiled (FlashAttention-style, tiles %lldx%lld at d=64)\n",
      (long long)qa::default_tile_sizes(64, 64).block_q, (long long)qa::default_tile_sizes(64, 64).block_k);
  std::printf("BLAS: %s (%s); cores: %d\n", qkv::blas_summary().c_str(), blas.value("config", "").c_str(), all);
  std::printf("Allocator: %s\n",
              cold ? "cold (glibc default: large blocks are fresh mmaps, faulted in on first touch)"
                   : "warm (freed memory kept and reused: mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=1GiB)");
  std::printf("Ceiling: single-thread sgemm (at::mm_out 2048^3 float32, best of >= 5) = %.1f GFLOP/s\n", sgemm);
  std::printf(
      "Inputs: float32 q,k,v [1,BH,N,d] (dv = d), not causal, no masks, default scale. BH is chosen so one\n"
      "forward is ~2 GFLOP (each timed run takes well under 1-2 s); time = best of >= 3 runs after a warm-up.\n"
      "FLOPs: forward = 4*BH*N^2*d; forward+backward counted as 2.5 x forward (convention of the brief).\n"
      "Memory: peak extra MiB of live CPU tensor storage during a run (tracking c10 CPU allocator; inputs\n"
      "excluded, their gradients included). ratio = tiled GFLOP/s / naive GFLOP/s.\n\n");
  std::printf("%3s %5s %3s %4s | %8s %8s %6s %9s %9s | %8s %8s %6s %9s %9s\n", "thr", "N", "d", "BH", "fwd nv",
              "fwd tl", "ratio", "MiB nv", "MiB tl", "f+b nv", "f+b tl", "ratio", "MiB nv", "MiB tl");
  {
    // One untimed run of the largest naive case first, so that in warm mode the
    // heap already holds the biggest buffers before anything is timed.
    Inputs in = make_inputs(pick_bh(4096, 16), 4096, 16, true);
    run_once(in, qa::AttentionBackend::Naive, true);
  }
  std::vector<int> thread_counts{1};
  if (all > 1) thread_counts.push_back(all);
  for (int threads : thread_counts) {
    qkv::set_threads(threads);
    for (int64_t N : {256, 1024, 4096})
      for (int64_t d : {16, 48, 64}) {
        const int64_t BH = pick_bh(N, d);
        Inputs in = make_inputs(BH, N, d, true);
        const double fl = 4.0 * BH * N * N * d;
        Measure fn, ft;
        {
          at::NoGradGuard ng;
          fn = measure([&] { run_once(in, qa::AttentionBackend::Naive, false); });
          ft = measure([&] { run_once(in, qa::AttentionBackend::Tiled, false); });
        }
        Measure bn = measure([&] { run_once(in, qa::AttentionBackend::Naive, true); });
        Measure bt = measure([&] { run_once(in, qa::AttentionBackend::Tiled, true); });
        std::printf("%3d %5lld %3lld %4lld | %8.1f %8.1f %6.2f %9.1f %9.1f | %8.1f %8.1f %6.2f %9.1f %9.1f\n", threads,
                    (long long)N, (long long)d, (long long)BH, fl / fn.seconds / 1e9, fl / ft.seconds / 1e9,
                    fn.seconds / ft.seconds, fn.extra_mib, ft.extra_mib, 2.5 * fl / bn.seconds / 1e9,
                    2.5 * fl / bt.seconds / 1e9, bn.seconds / bt.seconds, bn.extra_mib, bt.extra_mib);
        std::fflush(stdout);
      }
  }
  sgemm_fractions(sgemm, all);
  if (sweep) {
    sweep_tiles(1, 4096);
    if (all > 1) sweep_tiles(all, 1024);
    crossover(1);
    if (all > 1) crossover(all);
  }
  std::printf("\ntotal bench time %.0f s\n", now() - t_start);
  return 0;
}
