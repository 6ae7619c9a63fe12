#include "qkv/attention/cache_decode.h"

#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "qkv/attention/simd_exp.h"
#include "qkv/runtime/cpu.h"

namespace qkv::attention::decode {
namespace {

// Rows converted per pass: 64 rows of width <= 256 stay within L1 (our choice).
constexpr int64_t kChunk = 64;

#ifdef QKV_ATTN_X86
__attribute__((target("avx2,fma,f16c"))) void half_to_float_avx2(const c10::Half* from, float* to, int64_t n) {
  int64_t e = 0;
  for (; e + 8 <= n; e += 8)
    _mm256_storeu_ps(to + e, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(from + e))));
  for (; e < n; ++e) to[e] = static_cast<float>(from[e]);
}

QKV_AVX2 void exp_shifted_avx2(float* x, int64_t n, float shift) {
  int64_t e = 0;
  const __m256 s = _mm256_set1_ps(shift);
  for (; e + 8 <= n; e += 8) _mm256_storeu_ps(x + e, simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x + e), s)));
  for (; e < n; ++e) x[e] = std::exp(x[e] - shift);
}

QKV_AVX2 inline float horizontal_sum(__m256 v) {
  const __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 y = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(y, _mm_shuffle_ps(y, y, 1)));
}

QKV_AVX2 inline __m256 int8x8_to_float(const int8_t* x) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x))));
}

// 16 bytes of int4 pairs (element 2i in byte i's low nibble, 2i + 1 in its
// high one, each stored as q + 8) as 32 int8 values q, in element order.
QKV_AVX2 inline void int4x32_to_int8(const uint8_t* x, __m128i& first, __m128i& second) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  const __m128i nibble = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  const __m128i lo = _mm_and_si128(bytes, nibble), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
  first = _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight);
  second = _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight);
}

QKV_AVX2 inline __m256 int8_lanes_to_float(__m128i v, int part) {  // values 8 part .. 8 part + 7 of v
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part == 0 ? v : _mm_srli_si128(v, 8)));
}

// int4 rows with blocks of 32: 16 bytes a block, unpacked in registers.
QKV_AVX2 void int4_scores_avx2(const float* q, const uint8_t* rows, const float* scales, int64_t count,
                               int64_t row_bytes, int64_t blocks, float scale, float* scores) {
  for (int64_t j = 0; j < count; ++j) {
    const uint8_t* k = rows + j * row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m128i v0, v1;
      int4x32_to_int8(k + 16 * b, v0, v1);
      const float* qb = q + 32 * b;
      __m256 part = _mm256_mul_ps(_mm256_loadu_ps(qb), int8_lanes_to_float(v0, 0));
      part = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 8), int8_lanes_to_float(v0, 1), part);
      part = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 16), int8_lanes_to_float(v1, 0), part);
      part = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 24), int8_lanes_to_float(v1, 1), part);
      acc = _mm256_fmadd_ps(part, _mm256_set1_ps(scales[j * blocks + b]), acc);
    }
    scores[j] = scale * horizontal_sum(acc);
  }
}

QKV_AVX2 void int4_accumulate_avx2(const float* p, const uint8_t* rows, const float* scales, int64_t count,
                                   int64_t row_bytes, int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    float* o = out + 32 * b;
    __m256 a0 = _mm256_loadu_ps(o), a1 = _mm256_loadu_ps(o + 8), a2 = _mm256_loadu_ps(o + 16),
           a3 = _mm256_loadu_ps(o + 24);
    for (int64_t j = 0; j < count; ++j) {
      __m128i v0, v1;
      int4x32_to_int8(rows + j * row_bytes + 16 * b, v0, v1);
      const __m256 w = _mm256_set1_ps(p[j] * scales[j * blocks + b]);
      a0 = _mm256_fmadd_ps(w, int8_lanes_to_float(v0, 0), a0);
      a1 = _mm256_fmadd_ps(w, int8_lanes_to_float(v0, 1), a1);
      a2 = _mm256_fmadd_ps(w, int8_lanes_to_float(v1, 0), a2);
      a3 = _mm256_fmadd_ps(w, int8_lanes_to_float(v1, 1), a3);
    }
    _mm256_storeu_ps(o, a0);
    _mm256_storeu_ps(o + 8, a1);
    _mm256_storeu_ps(o + 16, a2);
    _mm256_storeu_ps(o + 24, a3);
  }
}

// int8 rows with blocks of 8, 16 or 32, read without a float copy: each
// score is q . row summed per block and scaled once per block; each value
// row is added into `out` eight lanes at a time, `out` held in a register
// over all rows of the chunk.
QKV_AVX2 void int8_scores_avx2(const float* q, const int8_t* rows, const float* scales, int64_t count, int64_t width,
                               int64_t block, float scale, float* scores) {
  const int64_t blocks = width / block;
  for (int64_t j = 0; j < count; ++j) {
    const int8_t* k = rows + j * width;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m256 part = _mm256_setzero_ps();
      for (int64_t e = b * block; e < (b + 1) * block; e += 8)
        part = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), int8x8_to_float(k + e), part);
      acc = _mm256_fmadd_ps(part, _mm256_set1_ps(scales[j * blocks + b]), acc);
    }
    scores[j] = scale * horizontal_sum(acc);
  }
}

QKV_AVX2 void int8_accumulate_avx2(const float* p, const int8_t* rows, const float* scales, int64_t count,
                                   int64_t width, int64_t block, float* out) {
  const int64_t blocks = width / block;
  for (int64_t e = 0; e < width; e += 8) {
    const int64_t b = e / block;
    __m256 acc = _mm256_loadu_ps(out + e);
    for (int64_t j = 0; j < count; ++j)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(p[j] * scales[j * blocks + b]), int8x8_to_float(rows + j * width + e), acc);
    _mm256_storeu_ps(out + e, acc);
  }
}
#endif

// Rows [first, first + count) as floats, count x width, into `to`; float32
// rows are read in place (the returned pointer) and not copied. (int8, and
// int4 in blocks of 32, skip this on AVX2: the *_avx2 functions above.)
// The block scales of rows [first, first + count) as floats, into `to`.
template <bool kAvx2>
[[gnu::always_inline]] inline const float* load_scales(const StoredRows& r, int64_t first, int64_t count, float* to) {
  const c10::Half* s = r.scales + first * r.row_scales;
#ifdef QKV_ATTN_X86
  if constexpr (kAvx2) {
    half_to_float_avx2(s, to, count * r.row_scales);
    return to;
  }
#endif
  for (int64_t i = 0; i < count * r.row_scales; ++i) to[i] = static_cast<float>(s[i]);
  return to;
}

template <bool kAvx2>
[[gnu::always_inline]] inline const float* load_rows(const StoredRows& r, int64_t first, int64_t count, float* to,
                                                     float* scales) {
  const int64_t w = r.width;
  switch (r.dtype) {
    case CacheDtype::kFloat32: return static_cast<const float*>(r.data) + first * r.row_elems;
    case CacheDtype::kFloat64: {
      const double* x = static_cast<const double*>(r.data) + first * r.row_elems;
      for (int64_t i = 0; i < count * w; ++i) to[i] = static_cast<float>(x[i]);
      return to;
    }
    case CacheDtype::kFloat16: {
      const c10::Half* x = static_cast<const c10::Half*>(r.data) + first * r.row_elems;
#ifdef QKV_ATTN_X86
      if constexpr (kAvx2) {
        half_to_float_avx2(x, to, count * w);
        return to;
      }
#endif
      for (int64_t i = 0; i < count * w; ++i) to[i] = static_cast<float>(x[i]);
      return to;
    }
    case CacheDtype::kBFloat16: {
      const uint16_t* x =
          reinterpret_cast<const uint16_t*>(static_cast<const c10::BFloat16*>(r.data) + first * r.row_elems);
      for (int64_t i = 0; i < count * w; ++i) {
        const uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
        std::memcpy(to + i, &bits, 4);
      }
      return to;
    }
    case CacheDtype::kInt8: {
      const int8_t* x = static_cast<const int8_t*>(r.data) + first * r.row_elems;
      const float* s = load_scales<kAvx2>(r, first, count, scales);
      for (int64_t j = 0; j < count; ++j)
        for (int64_t b = 0; b < r.row_scales; ++b) {
          const float scale = s[j * r.row_scales + b];
          for (int64_t e = b * r.block; e < (b + 1) * r.block; ++e)
            to[j * w + e] = scale * static_cast<float>(x[j * w + e]);
        }
      return to;
    }
    case CacheDtype::kInt4: {
      const uint8_t* x = static_cast<const uint8_t*>(r.data) + first * r.row_elems;
      const float* s = load_scales<kAvx2>(r, first, count, scales);
      const int64_t half = r.block / 2;
      for (int64_t j = 0; j < count; ++j)
        for (int64_t b = 0; b < r.row_scales; ++b) {
          const float scale = s[j * r.row_scales + b];
          const uint8_t* bytes = x + j * r.row_elems + b * half;
          float* o = to + j * w + b * r.block;
          for (int64_t i = 0; i < half; ++i) {
            o[2 * i] = scale * static_cast<float>((bytes[i] & 15) - 8);
            o[2 * i + 1] = scale * static_cast<float>((bytes[i] >> 4) - 8);
          }
        }
      return to;
    }
  }
  return to;
}

// Eight independent partial sums, so that the loop vectorises without
// reassociating a single sum (which the compiler may not do unasked).
[[gnu::always_inline]] inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[e + l] * b[e + l];
  float tail = 0;
  for (; e < n; ++e) tail += a[e] * b[e];
  return tail + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

template <bool kAvx2>
[[gnu::always_inline]] inline void attend_body(const float* q, int64_t group, const StoredRows& keys,
                                               const StoredRows& values, int64_t rows, float scale, float* out) {
  const int64_t dk = keys.width, dv = values.width;
  std::vector<float> buffer(static_cast<size_t>(kChunk * std::max(dk, dv)));
  std::vector<float> scales(static_cast<size_t>(kChunk * std::max(keys.row_scales, values.row_scales)));
  std::vector<float> p(static_cast<size_t>(group * rows));
#ifdef QKV_ATTN_X86
  const bool fused = kAvx2 && keys.dtype == CacheDtype::kInt8 && keys.block % 8 == 0 && values.block % 8 == 0;
  const bool fused4 = kAvx2 && keys.dtype == CacheDtype::kInt4 && keys.block == 32 && values.block == 32;
#else
  const bool fused = false, fused4 = false;
#endif
  for (int64_t first = 0; first < rows; first += kChunk) {
    const int64_t count = std::min(kChunk, rows - first);
#ifdef QKV_ATTN_X86
    if constexpr (kAvx2) {
      if (fused) {
        const float* s = load_scales<kAvx2>(keys, first, count, scales.data());
        for (int64_t g = 0; g < group; ++g)
          int8_scores_avx2(q + g * dk, static_cast<const int8_t*>(keys.data) + first * keys.row_elems, s, count, dk,
                           keys.block, scale, p.data() + g * rows + first);
        continue;
      }
      if (fused4) {
        const float* s = load_scales<kAvx2>(keys, first, count, scales.data());
        for (int64_t g = 0; g < group; ++g)
          int4_scores_avx2(q + g * dk, static_cast<const uint8_t*>(keys.data) + first * keys.row_elems, s, count,
                           keys.row_elems, keys.row_scales, scale, p.data() + g * rows + first);
        continue;
      }
    }
#endif
    const float* k = load_rows<kAvx2>(keys, first, count, buffer.data(), scales.data());
    for (int64_t g = 0; g < group; ++g)
      for (int64_t j = 0; j < count; ++j)
        p[static_cast<size_t>(g * rows + first + j)] = scale * dot(q + g * dk, k + j * dk, dk);
  }
  for (int64_t g = 0; g < group; ++g) {
    float* s = p.data() + g * rows;
    const float top = *std::max_element(s, s + rows);
#ifdef QKV_ATTN_X86
    if constexpr (kAvx2) {
      exp_shifted_avx2(s, rows, top);
    } else
#endif
    {
      for (int64_t j = 0; j < rows; ++j) s[j] = std::exp(s[j] - top);
    }
    float sum = 0;
    for (int64_t j = 0; j < rows; ++j) sum += s[j];
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < rows; ++j) s[j] *= inv;
    std::fill(out + g * dv, out + (g + 1) * dv, 0.0f);
  }
  for (int64_t first = 0; first < rows; first += kChunk) {
    const int64_t count = std::min(kChunk, rows - first);
#ifdef QKV_ATTN_X86
    if constexpr (kAvx2) {
      if (fused) {
        const float* s = load_scales<kAvx2>(values, first, count, scales.data());
        for (int64_t g = 0; g < group; ++g)
          int8_accumulate_avx2(p.data() + g * rows + first,
                               static_cast<const int8_t*>(values.data) + first * values.row_elems, s, count, dv,
                               values.block, out + g * dv);
        continue;
      }
      if (fused4) {
        const float* s = load_scales<kAvx2>(values, first, count, scales.data());
        for (int64_t g = 0; g < group; ++g)
          int4_accumulate_avx2(p.data() + g * rows + first,
                               static_cast<const uint8_t*>(values.data) + first * values.row_elems, s, count,
                               values.row_elems, values.row_scales, out + g * dv);
        continue;
      }
    }
#endif
    const float* v = load_rows<kAvx2>(values, first, count, buffer.data(), scales.data());
    for (int64_t g = 0; g < group; ++g) {
      float* o = out + g * dv;
      const float* s = p.data() + g * rows + first;
      for (int64_t j = 0; j < count; ++j) {
        const float w = s[j];
        const float* row = v + j * dv;
        for (int64_t e = 0; e < dv; ++e) o[e] += w * row[e];
      }
    }
  }
}

#ifdef QKV_ATTN_X86
QKV_AVX2 void attend_avx2(const float* q, int64_t group, const StoredRows& keys, const StoredRows& values, int64_t rows,
                          float scale, float* out) {
  attend_body<true>(q, group, keys, values, rows, scale, out);
}
#endif

void attend_baseline(const float* q, int64_t group, const StoredRows& keys, const StoredRows& values, int64_t rows,
                     float scale, float* out) {
  attend_body<false>(q, group, keys, values, rows, scale, out);
}

}  // namespace

void attend(const float* q, int64_t group, const StoredRows& keys, const StoredRows& values, int64_t rows, float scale,
            float* out) {
#ifdef QKV_ATTN_X86
  static const bool f16c = __builtin_cpu_supports("f16c");
  if (cpu_has_avx2_fma() && f16c) return attend_avx2(q, group, keys, values, rows, scale, out);
#endif
  attend_baseline(q, group, keys, values, rows, scale, out);
}

}  // namespace qkv::attention::decode
