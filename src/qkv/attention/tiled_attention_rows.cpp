#include "qkv/attention/tiled_attention_rows.h"

#include <cmath>
#include <limits>
#include <vector>

#include "qkv/attention/simd_exp.h"
#include "qkv/runtime/cpu.h"

namespace qkv::attention::rows {
namespace {

template <typename T>
T row_max_generic(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

template <typename T>
T exp_sum_generic(T* x, int64_t n, T shift) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    s += x[i];
  }
  return s;
}

template <typename T>
void dsoftmax_generic(T* dp, const T* p, int64_t n, T D) {
  for (int64_t i = 0; i < n; ++i) dp[i] = p[i] * (dp[i] - D);
}

template <typename T>
void scale_generic(T* x, int64_t n, T a) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

#ifdef QKV_ATTN_X86
using simd::exp16;
using simd::exp8;
using simd::lanes_below;

QKV_AVX2 float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

QKV_AVX2 float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

QKV_AVX2 float row_max_avx2(const float* x, int64_t n) {
  __m256 m0 = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), m1 = m0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
  float m = hmax8(_mm256_max_ps(m0, m1));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

QKV_AVX2 float exp_sum_avx2(float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s));
    _mm256_storeu_ps(x + i, e0);
    _mm256_storeu_ps(x + i + 8, e1);
    a0 = _mm256_add_ps(a0, e0);
    a1 = _mm256_add_ps(a1, e1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    a0 = _mm256_add_ps(a0, e);
  }
  float sum = hsum8(_mm256_add_ps(a0, a1));
  if (i < n) {  // the tail through one padded vector
    alignas(32) float buf[8];
    const int64_t rest = n - i;
    for (int64_t t = 0; t < 8; ++t) buf[t] = t < rest ? x[i + t] : -std::numeric_limits<float>::infinity();
    _mm256_store_ps(buf, exp8(_mm256_sub_ps(_mm256_load_ps(buf), s)));
    for (int64_t t = 0; t < rest; ++t) {
      x[i + t] = buf[t];
      sum += buf[t];
    }
  }
  return sum;
}

QKV_AVX2 void dsoftmax_avx2(float* dp, const float* p, int64_t n, float D) {
  const __m256 d = _mm256_set1_ps(D);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dp + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), _mm256_sub_ps(_mm256_loadu_ps(dp + i), d)));
  for (; i < n; ++i) dp[i] = p[i] * (dp[i] - D);
}

QKV_AVX2 void scale_avx2(float* x, int64_t n, float a) {
  const __m256 s = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
  for (; i < n; ++i) x[i] *= a;
}

QKV_AVX512_WARNINGS_OFF

QKV_AVX512 float row_max_avx512(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = neg_inf, m1 = neg_inf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
  if (i < n) m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(neg_inf, lanes_below(n - i), x + i));
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

QKV_AVX512 float exp_sum_avx512(float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    const __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), s));
    _mm512_storeu_ps(x + i, e0);
    _mm512_storeu_ps(x + i + 16, e1);
    a0 = _mm512_add_ps(a0, e0);
    a1 = _mm512_add_ps(a1, e1);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(x + i, e);
    a0 = _mm512_add_ps(a0, e);
  }
  if (i < n) {
    const __mmask16 k = lanes_below(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), s)));
    _mm512_mask_storeu_ps(x + i, k, e);
    a1 = _mm512_add_ps(a1, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

QKV_AVX512 void dsoftmax_avx512(float* dp, const float* p, int64_t n, float D) {
  const __m512 d = _mm512_set1_ps(D);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dp + i, _mm512_mul_ps(_mm512_loadu_ps(p + i), _mm512_sub_ps(_mm512_loadu_ps(dp + i), d)));
  if (i < n) {
    const __mmask16 k = lanes_below(n - i);
    _mm512_mask_storeu_ps(
        dp + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + i), d)));
  }
}

QKV_AVX512 void scale_avx512(float* x, int64_t n, float a) {
  const __m512 s = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), s));
  if (i < n) {
    const __mmask16 k = lanes_below(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), s));
  }
}

QKV_AVX512_WARNINGS_ON

#endif

}  // namespace

std::vector<FloatRowKernels> float_row_kernels_here() {
  std::vector<FloatRowKernels> here{
      {"portable", row_max_generic<float>, exp_sum_generic<float>, dsoftmax_generic<float>, scale_generic<float>}};
#ifdef QKV_ATTN_X86
  if (cpu_has_avx2_fma()) here.push_back({"avx2", row_max_avx2, exp_sum_avx2, dsoftmax_avx2, scale_avx2});
  if (cpu_has_avx512f()) here.push_back({"avx512", row_max_avx512, exp_sum_avx512, dsoftmax_avx512, scale_avx512});
#endif
  return here;
}

namespace {

// The widest version this CPU runs, chosen once.
const FloatRowKernels& widest() {
  static const FloatRowKernels best = float_row_kernels_here().back();
  return best;
}

}  // namespace

float max(const float* x, int64_t n) { return widest().max(x, n); }
float exp_sum(float* x, int64_t n, float shift) { return widest().exp_sum(x, n, shift); }
void dsoftmax(float* dp, const float* p, int64_t n, float D) { widest().dsoftmax(dp, p, n, D); }
void scale(float* x, int64_t n, float a) { widest().scale(x, n, a); }

double max(const double* x, int64_t n) { return row_max_generic(x, n); }
double exp_sum(double* x, int64_t n, double shift) { return exp_sum_generic(x, n, shift); }
void dsoftmax(double* dp, const double* p, int64_t n, double D) { dsoftmax_generic(dp, p, n, D); }
void scale(double* x, int64_t n, double a) { scale_generic(x, n, a); }

}  // namespace qkv::attention::rows
