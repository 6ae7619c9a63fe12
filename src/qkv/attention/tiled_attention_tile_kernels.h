#pragma once
// Float32 AVX-512 kernels for the tiled attention's tiles (tiled_attention.cpp),
// in place of BLAS calls at shapes where BLAS packs its operands for little
// work (one dimension is the head width, ~48):
// - scaled_scores: the forward's S = alpha Q K^T;
// - score_tile: for m queries and n keys,
//     P  = exp(alpha Q K^T + bias - lse)        (0 where masked)
//     dS = P * (dO V^T - D)
//   block by block in registers, so neither S nor dP is written and read
//   back;
// - accumulate_product: C += alpha A B for a narrow B, A read in place with
//   any strides (O += P V; P^T, dS^T and dS without a transposed copy).
// Only on CPUs with AVX-512 F (available()); elsewhere the kernel composes
// BLAS GEMMs and the row kernels (tiled_attention_rows.h), which these equal to
// float rounding.
#include <cstdint>

namespace qkv::attention::tile_kernels {

// Whether the functions below run here (x86-64 with AVX-512 F).
bool available();

// Keys (or values) in the layout the tile reads: n rows of width w
// (row-major, ld w) as ceil(n / 16) panels of w x 16, entry [p][c][l] =
// X[16 p + l][c], lanes past n zero.
int64_t panel_floats(int64_t n, int64_t w);
void pack_panels(const float* x, int64_t n, int64_t w, float* panels);

struct ScoreTile {
  int64_t m = 0, n = 0;      // queries, keys
  const float* q = nullptr;  // m x d, row-major
  int64_t d = 0;
  const float* k_panels = nullptr;  // the n keys, pack_panels
  const float* dout = nullptr;      // m x dv, row-major
  int64_t dv = 0;
  const float* v_panels = nullptr;  // the n values, pack_panels
  const float* lse = nullptr;       // m: each row's log-sum-exp from the forward; -inf: the row sees nothing
  const float* D = nullptr;         // m: rowsum(dO * O)
  // 16 * ceil(n / 16) entries, 0 or -inf (a padded key); nullptr: none.
  const float* column_bias = nullptr;
  float alpha = 1;
  bool causal = false;
  int64_t diagonal = 0;  // causal: row r sees keys c <= r + diagonal
  float* p = nullptr;    // m x n outputs, row stride ld >= n
  float* ds = nullptr;
  int64_t ld = 0;
};

// Writes t.p and t.ds (columns [0, n) of each row; nothing past them).
// Requires available().
void score_tile(const ScoreTile& t);

// S = alpha Q K^T (m x n, row stride ld >= n; nothing past column n written)
// for Q m x d row-major and the n keys packed by pack_panels: the forward's
// score tile. Requires available().
void scaled_scores(int64_t m, int64_t n, const float* q, int64_t d, const float* k_panels, float alpha, float* s,
                   int64_t ld);

// C[i][c] += alpha * sum_k A(i, k) B[k][c] for i < rows, c < w, k < depth,
// where A(i, k) = a[i * a_row_stride + k * a_col_stride] and B, C are
// row-major (ldb, ldc). Requires available().
void accumulate_product(int64_t rows, int64_t w, int64_t depth, float alpha, const float* a, int64_t a_row_stride,
                        int64_t a_col_stride, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace qkv::attention::tile_kernels
