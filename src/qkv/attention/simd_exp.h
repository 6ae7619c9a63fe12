#pragma once
// exp on float vectors for the attention kernels (row kernels, backward score
// tiles), compiled for AVX2+FMA and AVX-512 F by target attributes while the
// library is built for the baseline x86-64; callers choose at run time
// (runtime/cpu.h). Internal to src/qkv/attention.
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QKV_ATTN_X86 1

#define QKV_AVX2 __attribute__((target("avx2,fma")))
#define QKV_AVX512 __attribute__((target("avx512f")))
// GCC 12's avx512fintrin.h builds _mm512_undefined_ps from a self-initialised
// variable, which -Wuninitialized reports at every use (GCC bug 105593): code
// using AVX-512 intrinsics sits between these two.
#define QKV_AVX512_WARNINGS_OFF                                                        \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define QKV_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")

namespace qkv::attention::simd {

// exp on 8 floats: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact
// product), exp(r) by its degree-7 Taylor polynomial (truncation error
// r^8/8! < 6e-9 relative, below float rounding), 2^n built in the exponent
// bits. Inputs below -87 give 0 (exp(-87) ~ 1.6e-38 is at the edge of the
// normal range), including -inf; inputs are clamped at 88 above.
QKV_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

QKV_AVX512_WARNINGS_OFF

// exp8 on 16 floats, the same reduction and polynomial; 2^n by scalef, which
// also gives 0 far below the range (the clamp at -87 keeps it exact to exp8).
QKV_AVX512 inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), _mm512_scalef_ps(p, n));
}

// Lanes l < count of a 16-lane vector (none for count <= 0, all for >= 16):
// tails and masked columns through masked loads and stores, which read and
// write nothing in the other lanes.
QKV_AVX512 inline __mmask16 lanes_below(int64_t count) {
  return count <= 0 ? __mmask16(0) : count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

QKV_AVX512_WARNINGS_ON

}  // namespace qkv::attention::simd

#endif
