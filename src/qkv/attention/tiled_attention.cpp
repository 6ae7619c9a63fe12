#include "qkv/attention/tiled_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/attention/tiled_attention_rows.h"
#include "qkv/attention/tiled_attention_tile_kernels.h"
#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/second_order.h"
#include "qkv/runtime/blas.h"
#include "qkv/runtime/parallel.h"

namespace qkv::attention {
namespace {

using blas::gemm;

// ---------------------------------------------------------------------------
// Work distribution. Each call splits into independent tasks (forward: one per
// batch*head and query block; backward: one per batch*head and key block; a
// whole batch*head each when there are at least 4 a worker), run by
// qkv::parallel_tasks (runtime/parallel.h) on ATen's OpenMP threads: tasks are
// handed out one at a time, so causal blocks of unequal cost balance. At most
// one worker per core; inside a parallel region, and for calls under ~4 MFLOP,
// the caller runs every task itself. The kernels hold OpenBLAS at one thread
// (blas::OneBlasThread) so that its tile GEMMs do not split across threads.
int64_t kernel_workers(int64_t tasks, double work_flops) {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return parallel_workers(tasks, work_flops < 4e6 ? 1 : cores);
}

struct Geometry {
  int64_t B, H, Nq, Nk, d, dv;
  int64_t offset;  // Nk - Nq: the causal diagonal is j = i + offset
  int64_t bq, bk;
};

// Number of keys of the block starting at key j0 (of n keys) that query i may
// see under the causal rule: keys j0 .. j0+result-1.
inline int64_t causal_limit(int64_t i, int64_t j0, int64_t n, int64_t offset) {
  return std::clamp<int64_t>(i + offset - j0 + 1, 0, n);
}

// The padded columns of key block [j0, j0+n) of batch b; returns how many are
// padding. pad == nullptr: none.
inline int64_t padded_columns(const bool* pad, const Geometry& g, int64_t b, int64_t j0, int64_t n,
                              std::vector<int64_t>& cols) {
  cols.clear();
  if (!pad) return 0;
  const bool* row = pad + b * g.Nk + j0;
  for (int64_t c = 0; c < n; ++c)
    if (row[c]) cols.push_back(c);
  return static_cast<int64_t>(cols.size());
}

// C[rows x w] += alpha op(A) B with op(A) = A or A^T (leading dimension lda):
// BLAS, or for float on AVX-512 (own_kernel) the tile kernel reading A in
// place, without the transposed or packed copy BLAS makes of P and dS.
template <typename T>
void accumulate(bool own_kernel, bool transpose_a, int64_t rows, int64_t w, int64_t depth, T alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (own_kernel) {
      tile_kernels::accumulate_product(rows, w, depth, alpha, A, transpose_a ? 1 : lda, transpose_a ? lda : 1, B, ldb,
                                       C, ldc);
      return;
    }
  }
  gemm(transpose_a, false, rows, w, depth, alpha, A, lda, B, ldb, T(1), C, ldc);
}

// The forward pass walks (batch*head, query block) pairs. With float on
// AVX-512 and key blocks on 16-key panel boundaries (the default tiles) the
// tile kernels compute S and O += P V from keys packed into panels: with at
// least 4 batch*heads a worker, one task is a whole batch*head (its query
// blocks in turn) and packs its keys once into the worker's scratch; with
// fewer, tasks are single query blocks for balance and every head's keys are
// packed once up front (as much memory as k).
template <typename T>
void forward_kernel(const T* q, const T* k, const T* v, const bool* pad, T* out, T* lse, const Geometry& g, T alpha,
                    bool causal) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t BH = g.B * g.H, nqb = (g.Nq + g.bq - 1) / g.bq;
  const double work = 4.0 * BH * g.Nq * g.Nk * std::max(g.d, g.dv);
  const bool task_per_head = BH >= 4 * kernel_workers(BH * nqb, work);
  const int64_t tasks = task_per_head ? BH : BH * nqb;
  const int64_t workers = kernel_workers(tasks, work);
  const bool own = std::is_same_v<T, float> && tile_kernels::available() && g.bk % 16 == 0;
  const int64_t head_panels = own ? tile_kernels::panel_floats(g.Nk, g.d) : 0;
  // Per-worker scratch, allocated once per call (never per tile): the score tile,
  // the running max / sum of each row and, per-head tasks, the head's packed
  // keys. Taken from the CPU allocator so that allocation tracking sees it.
  const int64_t per_worker = g.bq * g.bk + 2 * g.bq + (task_per_head ? head_panels : 0);
  at::Tensor scratch = at::empty({workers, per_worker}, c10::CppTypeToScalarType<T>::value);
  T* scratch_base = scratch.data_ptr<T>();
  at::Tensor k_packed;  // every head's keys, query-block tasks only
  if constexpr (std::is_same_v<T, float>) {
    if (own && !task_per_head) {
      k_packed = at::empty({BH * head_panels}, at::kFloat);
      float* base = k_packed.data_ptr<float>();
      parallel_tasks(BH, kernel_workers(BH, work), [&](int64_t, int64_t bh) {
        tile_kernels::pack_panels(k + bh * g.Nk * g.d, g.Nk, g.d, base + bh * head_panels);
      });
    }
  }
  // Query block qb of batch*head bh; k_panels: the head's packed keys (own only).
  auto query_block = [&](T* S, const float* k_panels, int64_t bh, int64_t qb) {
    thread_local std::vector<int64_t> pcols;
    T* mrow = S + g.bq * g.bk;
    T* lrow = mrow + g.bq;
    const int64_t b = bh / g.H, i0 = qb * g.bq, m = std::min(g.bq, g.Nq - i0);
    const T* Q = q + (bh * g.Nq + i0) * g.d;
    const T* K = k + bh * g.Nk * g.d;
    const T* V = v + bh * g.Nk * g.dv;
    T* O = out + (bh * g.Nq + i0) * g.dv;
    std::fill(O, O + m * g.dv, T(0));
    std::fill(mrow, mrow + m, kNegInf);
    std::fill(lrow, lrow + m, T(0));
    // Keys beyond the causal limit of the block's last row are invisible to all
    // of its rows: those tiles are skipped.
    const int64_t kend = causal ? std::clamp<int64_t>(i0 + m - 1 + g.offset + 1, 0, g.Nk) : g.Nk;
    for (int64_t j0 = 0; j0 < kend; j0 += g.bk) {
      const int64_t n = std::min(g.bk, kend - j0);
      const int64_t npad = padded_columns(pad, g, b, j0, n, pcols);
      if (npad == n) continue;
      bool scored = false;
      if constexpr (std::is_same_v<T, float>) {
        if (own) {  // key j0 starts panel j0 / 16, at float j0 * d
          tile_kernels::scaled_scores(m, n, Q, g.d, k_panels + j0 * g.d, alpha, S, g.bk);
          scored = true;
        }
      }
      if (!scored) gemm(false, true, m, n, g.d, alpha, Q, g.d, K + j0 * g.d, g.d, T(0), S, g.bk);
      for (int64_t r = 0; r < m; ++r) {
        T* srow = S + r * g.bk;
        for (int64_t c : pcols) srow[c] = kNegInf;
        const int64_t lim = causal ? causal_limit(i0 + r, j0, n, g.offset) : n;
        const T mx = lim > 0 ? rows::max(srow, lim) : kNegInf;
        const T mold = mrow[r], mnew = std::max(mold, mx);
        if (mnew == kNegInf) {  // nothing visible to this row yet
          std::fill(srow, srow + n, T(0));
          continue;
        }
        const T sum = lim > 0 ? rows::exp_sum(srow, lim, mnew) : T(0);
        std::fill(srow + lim, srow + n, T(0));
        if (mold != mnew) {
          const T corr = std::exp(mold - mnew);  // 0 when mold = -inf (then O and l are 0)
          lrow[r] *= corr;
          rows::scale(O + r * g.dv, g.dv, corr);
        }
        lrow[r] += sum;
        mrow[r] = mnew;
      }
      accumulate(own, false, m, g.dv, n, T(1), S, g.bk, V + j0 * g.dv, g.dv, O, g.dv);
    }
    T* L = lse + bh * g.Nq + i0;
    for (int64_t r = 0; r < m; ++r) {
      if (lrow[r] > T(0)) {
        rows::scale(O + r * g.dv, g.dv, T(1) / lrow[r]);
        L[r] = mrow[r] + std::log(lrow[r]);
      } else {
        std::fill(O + r * g.dv, O + (r + 1) * g.dv, T(0));
        L[r] = kNegInf;
      }
    }
  };
  parallel_tasks(tasks, workers, [&](int64_t worker, int64_t task) {
    T* S = scratch_base + worker * per_worker;
    const float* k_panels = nullptr;
    if (task_per_head) {
      if constexpr (std::is_same_v<T, float>) {
        if (own) {
          float* panels = S + g.bq * g.bk + 2 * g.bq;
          tile_kernels::pack_panels(k + task * g.Nk * g.d, g.Nk, g.d, panels);
          k_panels = panels;
        }
      }
      for (int64_t qb = nqb - 1; qb >= 0; --qb) query_block(S, k_panels, task, qb);
      return;
    }
    // Heaviest query blocks (the last ones, under causal masking) go first.
    const int64_t bh = task % BH;
    if (own) k_panels = k_packed.data_ptr<float>() + bh * head_panels;
    query_block(S, k_panels, bh, nqb - 1 - task / BH);
  });
}

// The backward pass walks (batch*head, key block) pairs: dK and dV of the
// block are accumulated in place over all query blocks, and dQ of every query
// block gets the block's dS K. With at least 4 batch*heads a worker, one task
// is a whole batch*head (all its key blocks in turn), so dQ is written by one
// worker only, straight into dq. With fewer, one task is one (batch*head, key
// block) for balance, and dQ is accumulated in a per-worker buffer (worker 0
// writes into dq itself; each worker zeroes its buffer first) summed at the
// end. D_i = rowsum(dO_i * O_i) is recomputed per tile (m * dv operations next
// to the tile GEMMs' 10 * m * n * d) instead of in a separate pass. dq, dk, dv
// need not be initialised.
template <typename T>
void backward_kernel(const T* q, const T* k, const T* v, const T* out, const T* dout, const T* lse, const bool* pad,
                     T* dq, T* dk, T* dv, const Geometry& g, T alpha, bool causal) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t BH = g.B * g.H, nkb = (g.Nk + g.bk - 1) / g.bk, dq_size = BH * g.Nq * g.d;
  const double work = 10.0 * BH * g.Nq * g.Nk * std::max(g.d, g.dv);
  const bool task_per_head = BH >= 4 * kernel_workers(BH * nkb, work);
  const int64_t tasks = task_per_head ? BH : BH * nkb;
  const int64_t workers = kernel_workers(tasks, work);
  const auto dtype = c10::CppTypeToScalarType<T>::value;
  // float on AVX-512: the tile kernels (tiled_attention_tile_kernels.h); P and
  // dS of a tile come from one pass reading the key block's K and V packed once
  // into panels, with padded keys as a -inf column bias.
  const bool own = std::is_same_v<T, float> && tile_kernels::available();
  const int64_t panels = own ? tile_kernels::panel_floats(g.bk, g.d) + tile_kernels::panel_floats(g.bk, g.dv) +
                                   tile_kernels::panel_floats(g.bk, 1)
                             : 0;
  const int64_t per_worker = 2 * g.bq * g.bk + g.bq + panels;
  at::Tensor scratch = at::empty({workers, per_worker}, dtype);
  at::Tensor dq_extra;  // [workers-1, BH*Nq*d], per-block tasks only
  if (!task_per_head && workers > 1) dq_extra = at::empty({workers - 1, dq_size}, dtype);
  T* scratch_base = scratch.data_ptr<T>();
  T* dq_extra_base = dq_extra.defined() ? dq_extra.data_ptr<T>() : nullptr;
  auto dq_of = [&](int64_t worker) { return worker == 0 ? dq : dq_extra_base + (worker - 1) * dq_size; };
  std::vector<char> used(static_cast<size_t>(workers), 0);  // worker w ran a task (and so zeroed its dQ)
  // dK, dV of key block kb of batch*head bh, and its share of dQ into dQw.
  auto key_block = [&](T* P, int64_t bh, int64_t kb, T* dQw) {
    thread_local std::vector<int64_t> pcols;
    T* dP = P + g.bq * g.bk;
    T* Drow = dP + g.bq * g.bk;
    const int64_t b = bh / g.H, j0 = kb * g.bk, n = std::min(g.bk, g.Nk - j0);
    const T* Kj = k + (bh * g.Nk + j0) * g.d;
    const T* Vj = v + (bh * g.Nk + j0) * g.dv;
    T* dKj = dk + (bh * g.Nk + j0) * g.d;
    T* dVj = dv + (bh * g.Nk + j0) * g.dv;
    std::fill(dKj, dKj + n * g.d, T(0));
    std::fill(dVj, dVj + n * g.dv, T(0));
    const int64_t npad = padded_columns(pad, g, b, j0, n, pcols);
    if (npad == n) return;
    tile_kernels::ScoreTile tile;
    if constexpr (std::is_same_v<T, float>) {
      if (own) {
        float* k_panels = Drow + g.bq;
        float* v_panels = k_panels + tile_kernels::panel_floats(g.bk, g.d);
        float* bias = v_panels + tile_kernels::panel_floats(g.bk, g.dv);
        tile_kernels::pack_panels(Kj, n, g.d, k_panels);
        tile_kernels::pack_panels(Vj, n, g.dv, v_panels);
        std::fill(bias, bias + tile_kernels::panel_floats(n, 1), 0.0f);
        for (int64_t c : pcols) bias[c] = kNegInf;
        tile.n = n;
        tile.d = g.d;
        tile.dv = g.dv;
        tile.k_panels = k_panels;
        tile.v_panels = v_panels;
        tile.column_bias = npad > 0 ? bias : nullptr;
        tile.alpha = alpha;
        tile.causal = causal;
        tile.p = P;
        tile.ds = dP;
        tile.ld = g.bk;
      }
    }
    // The first query that sees key j0 under the causal rule.
    const int64_t qstart = causal ? std::max<int64_t>(0, j0 - g.offset) : 0;
    for (int64_t i0 = qstart; i0 < g.Nq; i0 += g.bq) {
      const int64_t m = std::min(g.bq, g.Nq - i0);
      const T* Qi = q + (bh * g.Nq + i0) * g.d;
      const T* Oi = out + (bh * g.Nq + i0) * g.dv;
      const T* dOi = dout + (bh * g.Nq + i0) * g.dv;
      const T* Li = lse + bh * g.Nq + i0;
      for (int64_t r = 0; r < m; ++r) {
        T acc = 0;
        for (int64_t c = 0; c < g.dv; ++c) acc += dOi[r * g.dv + c] * Oi[r * g.dv + c];
        Drow[r] = acc;
      }
      if constexpr (std::is_same_v<T, float>) {
        if (own) {
          tile.m = m;
          tile.q = Qi;
          tile.dout = dOi;
          tile.lse = Li;
          tile.D = Drow;
          tile.diagonal = i0 + g.offset - j0;
          tile_kernels::score_tile(tile);  // P, and dS in dP
        }
      }
      if (!own) {
        gemm(false, true, m, n, g.d, alpha, Qi, g.d, Kj, g.d, T(0), P, g.bk);
        for (int64_t r = 0; r < m; ++r) {
          T* prow = P + r * g.bk;
          for (int64_t c : pcols) prow[c] = kNegInf;
          const int64_t lim = causal ? causal_limit(i0 + r, j0, n, g.offset) : n;
          if (lim == 0 || Li[r] == kNegInf) {
            std::fill(prow, prow + n, T(0));
            continue;
          }
          rows::exp_sum(prow, lim, Li[r]);  // P = exp(S - lse)
          std::fill(prow + lim, prow + n, T(0));
        }
        // dP = dO_i V_j^T, then dS = P * (dP - D) in place
        gemm(false, true, m, n, g.dv, T(1), dOi, g.dv, Vj, g.dv, T(0), dP, g.bk);
        for (int64_t r = 0; r < m; ++r) rows::dsoftmax(dP + r * g.bk, P + r * g.bk, n, Drow[r]);
      }
      // dV_j += P^T dO_i ; dK_j += alpha dS^T Q_i ; dQ_i += alpha dS K_j
      accumulate(own, true, n, g.dv, m, T(1), P, g.bk, dOi, g.dv, dVj, g.dv);
      accumulate(own, true, n, g.d, m, alpha, dP, g.bk, Qi, g.d, dKj, g.d);
      accumulate(own, false, m, g.d, n, alpha, dP, g.bk, Kj, g.d, dQw + (bh * g.Nq + i0) * g.d, g.d);
    }
  };
  parallel_tasks(tasks, workers, [&](int64_t worker, int64_t task) {
    T* P = scratch_base + worker * per_worker;
    if (task_per_head) {
      T* dQh = dq + task * g.Nq * g.d;
      std::fill(dQh, dQh + g.Nq * g.d, T(0));
      for (int64_t kb = 0; kb < nkb; ++kb) key_block(P, task, kb, dq);
      return;
    }
    T* dQw = dq_of(worker);
    if (!used[static_cast<size_t>(worker)]) {
      used[static_cast<size_t>(worker)] = 1;
      std::fill(dQw, dQw + dq_size, T(0));
    }
    // Under causal masking the first key blocks are seen by the most queries.
    key_block(P, task % BH, task / BH, dQw);
  });
  if (task_per_head) return;
  // Sum the per-worker dQ buffers of the workers that ran (a plain loop:
  // memory-bound, O(workers * BH*Nq*d)). Worker 0's buffer is dq itself.
  if (!used[0]) std::fill(dq, dq + dq_size, T(0));
  for (int64_t w = 1; w < workers; ++w) {
    if (!used[static_cast<size_t>(w)]) continue;
    const T* src = dq_of(w);
    for (int64_t i = 0; i < dq_size; ++i) dq[i] += src[i];
  }
}

// Shapes as in sdpa.h; throws UsageError naming the argument.
Geometry check_inputs(const char* fn, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& pad, TileSizes tiles) {
  auto fail = [&](const std::string& what) { throw UsageError(std::string(fn) + ": " + what); };
  if (!q.defined() || !k.defined() || !v.defined()) fail("q, k and v must be defined tensors");
  if (q.dim() != 4) fail("q must be 4-D [B,H,Nq,d], got " + shape_of(q));
  if (k.dim() != 4) fail("k must be 4-D [B,H,Nk,d], got " + shape_of(k));
  if (v.dim() != 4) fail("v must be 4-D [B,H,Nk,dv], got " + shape_of(v));
  if (q.size(0) != k.size(0) || q.size(1) != k.size(1) || q.size(3) != k.size(3))
    fail("k " + shape_of(k) + " does not match q " + shape_of(q) + " in B, H or d");
  if (v.size(0) != k.size(0) || v.size(1) != k.size(1) || v.size(2) != k.size(2))
    fail("v " + shape_of(v) + " does not match k " + shape_of(k) + " in B, H or Nk");
  if (q.size(3) == 0) fail("q and k have head width d = 0");
  std::string why = tiled_unsupported_reason(q, k, v);
  if (!why.empty()) fail(why);
  if (pad.defined()) {
    if (pad.scalar_type() != at::kBool || pad.dim() != 2 || pad.size(0) != q.size(0) || pad.size(1) != k.size(2))
      fail("key_padding_mask must be bool [B,Nk] = [" + std::to_string(q.size(0)) + ", " + std::to_string(k.size(2)) +
           "], got " + shape_of(pad) + " " + std::string(c10::toString(pad.scalar_type())));
  }
  Geometry g{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3), k.size(2) - q.size(2), 0, 0};
  TileSizes def = default_tile_sizes(g.d, g.dv);
  if (tiles.block_q < 0 || tiles.block_k < 0) fail("tile sizes must be positive (0 = automatic)");
  g.bq = tiles.block_q > 0 ? tiles.block_q : def.block_q;
  g.bk = tiles.block_k > 0 ? tiles.block_k : def.block_k;
  return g;
}

template <typename T>
T to_alpha(const char* fn, double softmax_scale) {
  if (!(softmax_scale > 0) || !std::isfinite(softmax_scale))
    throw UsageError(std::string(fn) + ": softmax_scale must be a positive finite number, got " +
                     std::to_string(softmax_scale));
  return static_cast<T>(softmax_scale);
}

}  // namespace

TileSizes default_tile_sizes(int64_t d, int64_t dv) {
  const int64_t width = std::max<int64_t>(1, std::max(d, dv));
  // Measured with `bench_attention --sweep` (2026-12-02, Intel Xeon with
  // AVX-512, OpenBLAS 0.3.21 SkylakeX kernels held at one thread; forward /
  // forward+backward GFLOP/s). N = 1,024, 2 threads: at d = 48, 256 x 512 tiles
  // 249 / 192 against 225 / 175 for 128 x 128 and 177 / 146 for 64 x 64; at
  // d = 64, 273 / 203; at d = 16 the GEMMs are thin and 128 x 256 did best in
  // forward+backward (145 / 126; 256 x 512 147 / 123). N = 4,096, one thread:
  // the same winners. The scratch stays small: 2 * 256 * 512 floats a worker.
  TileSizes t = width <= 32 ? TileSizes{128, 256} : TileSizes{256, 512};
  if (blas::openblas_threads().value_or(1) > 1) {
    // OpenBLAS still runs on several threads (inside a parallel region, see
    // blas::OneBlasThread): keep every tile GEMM at m*n*k <= 262144 (OpenBLAS's
    // 65536 * 4), above which it splits the GEMM across its threads.
    while (t.block_q * t.block_k * width > 262144 && std::max(t.block_q, t.block_k) > 16) {
      if (t.block_k >= t.block_q)
        t.block_k /= 2;
      else
        t.block_q /= 2;
    }
  }
  return t;
}

std::string tiled_unsupported_reason(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const auto* t : {&q, &k, &v}) {
    const char* name = t == &q ? "q" : t == &k ? "k" : "v";
    if (!t->device().is_cpu())
      return std::string(name) + " is on " + t->device().str() + "; the tiled kernel is CPU-only";
    if (t->scalar_type() != at::kFloat && t->scalar_type() != at::kDouble)
      return std::string(name) + " has dtype " + c10::toString(t->scalar_type()) +
             "; the tiled kernel supports float32 and float64";
    if (t->scalar_type() != q.scalar_type()) return "q, k and v must have the same dtype";
  }
  return {};
}

TiledForward tiled_attention_forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                     double softmax_scale, bool causal, const at::Tensor& key_padding_mask,
                                     TileSizes tiles) {
  const char* fn = "tiled_attention_forward";
  // The kernels use every core themselves (blas.h); held before the tile sizes are chosen.
  blas::OneBlasThread one_blas_thread;
  Geometry g = check_inputs(fn, q_in, k_in, v_in, key_padding_mask, tiles);
  at::NoGradGuard no_grad;
  at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  at::Tensor pad = key_padding_mask.defined() ? key_padding_mask.contiguous() : at::Tensor();
  TiledForward r;
  r.output = at::empty({g.B, g.H, g.Nq, g.dv}, q.options());
  r.logsumexp = at::empty({g.B, g.H, g.Nq}, q.options());
  if (g.Nq == 0 || g.B * g.H == 0) return r;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "tiled_attention_forward", [&] {
    forward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                             pad.defined() ? pad.data_ptr<bool>() : nullptr, r.output.data_ptr<scalar_t>(),
                             r.logsumexp.data_ptr<scalar_t>(), g, to_alpha<scalar_t>(fn, softmax_scale), causal);
  });
  return r;
}

TiledGradients tiled_attention_backward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                        const at::Tensor& output, const at::Tensor& logsumexp,
                                        const at::Tensor& grad_output, double softmax_scale, bool causal,
                                        const at::Tensor& key_padding_mask, TileSizes tiles) {
  const char* fn = "tiled_attention_backward";
  // The kernels use every core themselves (blas.h); held before the tile sizes are chosen.
  blas::OneBlasThread one_blas_thread;
  Geometry g = check_inputs(fn, q_in, k_in, v_in, key_padding_mask, tiles);
  const std::vector<int64_t> out_shape{g.B, g.H, g.Nq, g.dv};
  if (!output.defined() || output.sizes() != out_shape)
    throw UsageError(std::string(fn) + ": output must be [B,H,Nq,dv], got " + shape_of(output));
  if (!grad_output.defined() || grad_output.sizes() != out_shape)
    throw UsageError(std::string(fn) + ": grad_output must be [B,H,Nq,dv], got " + shape_of(grad_output));
  if (!logsumexp.defined() || logsumexp.sizes() != std::vector<int64_t>{g.B, g.H, g.Nq})
    throw UsageError(std::string(fn) + ": logsumexp must be [B,H,Nq], got " + shape_of(logsumexp));
  at::NoGradGuard no_grad;
  const auto dtype = q_in.scalar_type();
  at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  at::Tensor dout = grad_output.to(dtype).contiguous();
  at::Tensor out = output.to(dtype).contiguous();
  at::Tensor lse = logsumexp.to(dtype).contiguous();
  at::Tensor pad = key_padding_mask.defined() ? key_padding_mask.contiguous() : at::Tensor();
  TiledGradients r;
  if (g.Nq == 0 || g.Nk == 0 || g.B * g.H == 0) {
    r.dq = at::zeros_like(q);
    r.dk = at::zeros_like(k);
    r.dv = at::zeros_like(v);
    return r;
  }
  r.dq = at::empty_like(q);  // the kernel initialises all three
  r.dk = at::empty_like(k);
  r.dv = at::empty_like(v);
  AT_DISPATCH_FLOATING_TYPES(dtype, "tiled_attention_backward", [&] {
    backward_kernel<scalar_t>(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                              out.data_ptr<scalar_t>(), dout.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>(),
                              pad.defined() ? pad.data_ptr<bool>() : nullptr, r.dq.data_ptr<scalar_t>(),
                              r.dk.data_ptr<scalar_t>(), r.dv.data_ptr<scalar_t>(), g,
                              to_alpha<scalar_t>(fn, softmax_scale), causal);
  });
  return r;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct TiledAttentionFunction : public torch::autograd::Function<TiledAttentionFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const c10::optional<at::Tensor>& padding, double softmax_scale, bool causal,
                               int64_t block_q, int64_t block_k) {
    // (an optional because an undefined tensor cannot be a Function input)
    const at::Tensor key_padding_mask = padding ? *padding : at::Tensor();
    TiledForward r = tiled_attention_forward(q, k, v, softmax_scale, causal, key_padding_mask, {block_q, block_k});
    ctx->save_for_backward({q, k, v, r.output, r.logsumexp, key_padding_mask});
    ctx->saved_data["softmax_scale"] = softmax_scale;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["block_q"] = block_q;
    ctx->saved_data["block_k"] = block_k;
    return {r.output};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    if (gradient_graph_requested()) {
      // The naive formula (sdpa.h), with the same scale, causality and padding.
      SdpaOptions o;
      o.scale = ctx->saved_data["softmax_scale"].toDouble();
      o.causal = ctx->saved_data["causal"].toBool();
      o.key_padding_mask = saved[5];
      o.backend = AttentionBackend::Naive;
      auto g = composed_vjp(
          [&](const auto& in) { return variable_list{scaled_dot_product_attention(in[0], in[1], in[2], o).output}; },
          {saved[0], saved[1], saved[2]}, grad_outputs);
      g.resize(8);
      return g;
    }
    at::Tensor grad = grad_outputs[0];
    if (!grad.defined()) grad = at::zeros_like(saved[3]);
    TiledGradients g =
        tiled_attention_backward(saved[0], saved[1], saved[2], saved[3], saved[4], grad,
                                 ctx->saved_data["softmax_scale"].toDouble(), ctx->saved_data["causal"].toBool(),
                                 saved[5], {ctx->saved_data["block_q"].toInt(), ctx->saved_data["block_k"].toInt()});
    return {g.dq, g.dk, g.dv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor tiled_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double softmax_scale,
                           bool causal, const at::Tensor& key_padding_mask, TileSizes tiles) {
  // Validate before autograd records anything, so errors name the public function.
  check_inputs("tiled_attention", q, k, v, key_padding_mask, tiles);
  to_alpha<double>("tiled_attention", softmax_scale);
  c10::optional<at::Tensor> padding;
  if (key_padding_mask.defined()) padding = key_padding_mask;
  return TiledAttentionFunction::apply(q, k, v, padding, softmax_scale, causal, tiles.block_q, tiles.block_k)[0];
}

}  // namespace qkv::attention
