#include "qkv/attention/tiled_attention_tile_kernels.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "qkv/attention/simd_exp.h"
#include "qkv/runtime/cpu.h"

namespace qkv::attention::tile_kernels {

int64_t panel_floats(int64_t n, int64_t w) { return (n + 15) / 16 * 16 * w; }

void pack_panels(const float* x, int64_t n, int64_t w, float* panels) {
  const int64_t np = (n + 15) / 16;
  for (int64_t p = 0; p < np; ++p) {
    float* panel = panels + p * w * 16;
    const int64_t lanes = std::min<int64_t>(16, n - 16 * p);
    for (int64_t l = 0; l < lanes; ++l) {  // rows of x read in order
      const float* row = x + (16 * p + l) * w;
      for (int64_t c = 0; c < w; ++c) panel[c * 16 + l] = row[c];
    }
    for (int64_t c = 0; c < w; ++c) std::fill(panel + c * 16 + lanes, panel + c * 16 + 16, 0.0f);
  }
}

#ifdef QKV_ATTN_X86
namespace {

QKV_AVX512_WARNINGS_OFF

using simd::lanes_below;

// acc[r][j] = the products of rows r of x (R rows of width w, row-major)
// with the 16 keys of panel j (panels of w x 16, consecutive): a register
// block as in a GEMM micro-kernel, one key vector loaded per reduction step
// and each x entry broadcast from memory.
template <int R, int NP>
QKV_AVX512 inline void row_panel_products(const float* x, int64_t w, const float* panels, __m512 (&acc)[R][NP]) {
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < w; ++c) {
    __m512 b[NP];
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) b[j] = _mm512_loadu_ps(panels + (j * w + c) * 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * w + c]);
#pragma GCC unroll 2
      for (int j = 0; j < NP; ++j) acc[r][j] = _mm512_fmadd_ps(a, b[j], acc[r][j]);
    }
  }
}

// R query rows (r0 ..) by 16 * NP keys (c0 ..): the products with K and V
// accumulate in R * NP registers each (row_panel_products), P stays in
// registers between the two.
template <int R, int NP>
QKV_AVX512 inline void score_block(const ScoreTile& t, int64_t r0, int64_t c0) {
  const float* kp = t.k_panels + (c0 / 16) * t.d * 16;
  const float* vp = t.v_panels + (c0 / 16) * t.dv * 16;
  float* prow = t.p + r0 * t.ld + c0;
  float* dsrow = t.ds + r0 * t.ld + c0;
  __mmask16 cols[NP];
#pragma GCC unroll 2
  for (int j = 0; j < NP; ++j) cols[j] = lanes_below(t.n - c0 - 16 * j);
  if (t.causal && r0 + R - 1 + t.diagonal < c0) {  // no row of the block sees its keys
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int j = 0; j < NP; ++j) {
        _mm512_mask_storeu_ps(prow + r * t.ld + 16 * j, cols[j], zero);
        _mm512_mask_storeu_ps(dsrow + r * t.ld + 16 * j, cols[j], zero);
      }
    return;
  }
  __m512 p[R][NP];
  row_panel_products<R, NP>(t.q + r0 * t.d, t.d, kp, p);
  const __m512 alpha = _mm512_set1_ps(t.alpha);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    // A row that sees nothing has lse = -inf; shifting by +inf makes its P 0.
    const float lse = t.lse[r0 + r];
    const __m512 shift =
        _mm512_set1_ps(lse == -std::numeric_limits<float>::infinity() ? std::numeric_limits<float>::infinity() : lse);
    const int64_t visible = (t.causal ? std::min(t.n, r0 + r + t.diagonal + 1) : t.n) - c0;
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) {
      __m512 x = _mm512_fmsub_ps(p[r][j], alpha, shift);
      if (t.column_bias) x = _mm512_add_ps(x, _mm512_loadu_ps(t.column_bias + c0 + 16 * j));
      p[r][j] = _mm512_maskz_mov_ps(lanes_below(visible - 16 * j), simd::exp16(x));
      _mm512_mask_storeu_ps(prow + r * t.ld + 16 * j, cols[j], p[r][j]);
    }
  }
  __m512 dp[R][NP];
  row_panel_products<R, NP>(t.dout + r0 * t.dv, t.dv, vp, dp);
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    const __m512 D = _mm512_set1_ps(t.D[r0 + r]);
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j)
      _mm512_mask_storeu_ps(dsrow + r * t.ld + 16 * j, cols[j], _mm512_mul_ps(p[r][j], _mm512_sub_ps(dp[r][j], D)));
  }
}

// The rows left after the full blocks, one of R .. 1.
template <int NP, int R>
QKV_AVX512 inline void score_rows_tail(int64_t rest, const ScoreTile& t, int64_t r0, int64_t c0) {
  if constexpr (R > 0) {
    if (rest == R)
      score_block<R, NP>(t, r0, c0);
    else
      score_rows_tail<NP, R - 1>(rest, t, r0, c0);
  }
}

// 6 x 32 blocks: 24 accumulators (P and dP) and two key vectors fit the 32
// vector registers.
template <int NP>
QKV_AVX512 void column_block(const ScoreTile& t, int64_t c0) {
  constexpr int R = 6;
  int64_t r0 = 0;
  for (; r0 + R <= t.m; r0 += R) score_block<R, NP>(t, r0, c0);
  score_rows_tail<NP, R - 1>(t.m - r0, t, r0, c0);
}

// S = alpha Q K^T for R rows by 16 * NP keys.
template <int R, int NP>
QKV_AVX512 inline void scores_block(int64_t n, const float* q, int64_t d, const float* k_panels, float alpha, float* s,
                                    int64_t ld, int64_t r0, int64_t c0) {
  __m512 acc[R][NP];
  row_panel_products<R, NP>(q + r0 * d, d, k_panels + (c0 / 16) * d * 16, acc);
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j)
      _mm512_mask_storeu_ps(s + (r0 + r) * ld + c0 + 16 * j, lanes_below(n - c0 - 16 * j),
                            _mm512_mul_ps(acc[r][j], scale));
}

// The rows left after the full blocks, one of R .. 1.
template <int NP, int R>
QKV_AVX512 inline void scores_rows_tail(int64_t rest, int64_t n, const float* q, int64_t d, const float* k_panels,
                                        float alpha, float* s, int64_t ld, int64_t r0, int64_t c0) {
  if constexpr (R > 0) {
    if (rest == R)
      scores_block<R, NP>(n, q, d, k_panels, alpha, s, ld, r0, c0);
    else
      scores_rows_tail<NP, R - 1>(rest, n, q, d, k_panels, alpha, s, ld, r0, c0);
  }
}

// Without the second product of score_tile, blocks of 12 rows by 32 keys
// (24 accumulators): half the key loads per multiply-add of 6-row blocks.
template <int NP>
QKV_AVX512 void scores_columns(int64_t m, int64_t n, const float* q, int64_t d, const float* k_panels, float alpha,
                               float* s, int64_t ld, int64_t c0) {
  constexpr int R = 12;
  int64_t r0 = 0;
  for (; r0 + R <= m; r0 += R) scores_block<R, NP>(n, q, d, k_panels, alpha, s, ld, r0, c0);
  scores_rows_tail<NP, R - 1>(m - r0, n, q, d, k_panels, alpha, s, ld, r0, c0);
}

QKV_AVX512 void scaled_scores_avx512(int64_t m, int64_t n, const float* q, int64_t d, const float* k_panels,
                                     float alpha, float* s, int64_t ld) {
  for (int64_t c0 = 0; c0 < n; c0 += 32) {
    if (n - c0 > 16)
      scores_columns<2>(m, n, q, d, k_panels, alpha, s, ld, c0);
    else
      scores_columns<1>(m, n, q, d, k_panels, alpha, s, ld, c0);
  }
}

QKV_AVX512 void score_tile_avx512(const ScoreTile& t) {
  // Column blocks outer: their key and value panels (2 * 32 * d floats) stay
  // in L1 while every query row passes.
  for (int64_t c0 = 0; c0 < t.n; c0 += 32) {
    if (t.n - c0 > 16)
      column_block<2>(t, c0);
    else
      column_block<1>(t, c0);
  }
}

// R rows of C by W vectors (the last one masked to `last`): R * W
// accumulators over the depth, one B row loaded per step, each A entry
// broadcast from memory, C read and written once.
template <int R, int W>
QKV_AVX512 inline void product_block(int64_t depth, float alpha, const float* a, int64_t rs, int64_t cs, const float* b,
                                     int64_t ldb, __mmask16 last, float* c, int64_t ldc) {
  __m512 acc[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < W; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < depth; ++k) {
    const float* brow = b + k * ldb;
    __m512 bv[W];
#pragma GCC unroll 4
    for (int j = 0; j < W; ++j) bv[j] = _mm512_maskz_loadu_ps(j == W - 1 ? last : __mmask16(0xFFFF), brow + 16 * j);
    const float* acol = a + k * cs;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(acol[r * rs]);
#pragma GCC unroll 4
      for (int j = 0; j < W; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < W; ++j) {
      const __mmask16 mask = j == W - 1 ? last : __mmask16(0xFFFF);
      float* crow = c + r * ldc + 16 * j;
      _mm512_mask_storeu_ps(crow, mask, _mm512_fmadd_ps(acc[r][j], scale, _mm512_maskz_loadu_ps(mask, crow)));
    }
}

// The rows left after the full blocks, one of R .. 1.
template <int W, int R>
QKV_AVX512 inline void product_rows_tail(int64_t rest, int64_t depth, float alpha, const float* a, int64_t rs,
                                         int64_t cs, const float* b, int64_t ldb, __mmask16 last, float* c,
                                         int64_t ldc) {
  if constexpr (R > 0) {
    if (rest == R)
      product_block<R, W>(depth, alpha, a, rs, cs, b, ldb, last, c, ldc);
    else
      product_rows_tail<W, R - 1>(rest, depth, alpha, a, rs, cs, b, ldb, last, c, ldc);
  }
}

// Blocks of R rows: at most 24 accumulators (8 rows by 3 vectors, 6 by 4)
// leave registers for B's row and the broadcast.
template <int W>
QKV_AVX512 void product_columns(int64_t rows, int64_t depth, float alpha, const float* a, int64_t rs, int64_t cs,
                                const float* b, int64_t ldb, __mmask16 last, float* c, int64_t ldc) {
  constexpr int R = W == 4 ? 6 : 8;
  int64_t i = 0;
  for (; i + R <= rows; i += R) product_block<R, W>(depth, alpha, a + i * rs, rs, cs, b, ldb, last, c + i * ldc, ldc);
  product_rows_tail<W, R - 1>(rows - i, depth, alpha, a + i * rs, rs, cs, b, ldb, last, c + i * ldc, ldc);
}

QKV_AVX512 void accumulate_product_avx512(int64_t rows, int64_t w, int64_t depth, float alpha, const float* a,
                                          int64_t rs, int64_t cs, const float* b, int64_t ldb, float* c, int64_t ldc) {
  for (int64_t c0 = 0; c0 < w; c0 += 64) {  // up to 4 vectors of columns at a time
    const int64_t width = std::min<int64_t>(64, w - c0), vectors = (width + 15) / 16;
    const __mmask16 last = lanes_below(width - 16 * (vectors - 1));
    switch (vectors) {
      case 1: product_columns<1>(rows, depth, alpha, a, rs, cs, b + c0, ldb, last, c + c0, ldc); break;
      case 2: product_columns<2>(rows, depth, alpha, a, rs, cs, b + c0, ldb, last, c + c0, ldc); break;
      case 3: product_columns<3>(rows, depth, alpha, a, rs, cs, b + c0, ldb, last, c + c0, ldc); break;
      default: product_columns<4>(rows, depth, alpha, a, rs, cs, b + c0, ldb, last, c + c0, ldc); break;
    }
  }
}

QKV_AVX512_WARNINGS_ON

}  // namespace
#endif

bool available() {
#ifdef QKV_ATTN_X86
  return cpu_has_avx512f();
#else
  return false;
#endif
}

namespace {
void require_avx512(const char* fn) {
  if (!available())
    throw std::logic_error(std::string("tile_kernels::") + fn + ": this CPU has no AVX-512 F (check available())");
}
}  // namespace

void score_tile(const ScoreTile& t) {
  require_avx512("score_tile");
  if (t.m <= 0 || t.n <= 0) return;
#ifdef QKV_ATTN_X86
  score_tile_avx512(t);
#endif
}

void scaled_scores(int64_t m, int64_t n, const float* q, int64_t d, const float* k_panels, float alpha, float* s,
                   int64_t ld) {
  require_avx512("scaled_scores");
  if (m <= 0 || n <= 0) return;
#ifdef QKV_ATTN_X86
  scaled_scores_avx512(m, n, q, d, k_panels, alpha, s, ld);
#endif
}

void accumulate_product(int64_t rows, int64_t w, int64_t depth, float alpha, const float* a, int64_t a_row_stride,
                        int64_t a_col_stride, const float* b, int64_t ldb, float* c, int64_t ldc) {
  require_avx512("accumulate_product");
  if (rows <= 0 || w <= 0 || depth <= 0) return;
#ifdef QKV_ATTN_X86
  accumulate_product_avx512(rows, w, depth, alpha, a, a_row_stride, a_col_stride, b, ldb, c, ldc);
#endif
}

}  // namespace qkv::attention::tile_kernels
