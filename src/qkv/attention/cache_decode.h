#pragma once
// One decoding step of attention over a KV cache's stored rows (kv_cache.h):
// the queries of the heads that share one key/value head against every held
// row of it, read in the cache's own element type (float32/64, float16,
// bfloat16, or int8 / int4 blocks with float16 scales), a few rows at a time
// converted to float32 in a small buffer, so that no float copy of the cache
// is made and a quantised cache moves 2-8x fewer bytes than a float32 one.
// Compiled for AVX2+FMA (F16C for float16) by target attributes and chosen at
// run time (runtime/cpu.h); elsewhere the same loops for the baseline.
// Internal to src/qkv/attention.
#include <c10/util/Half.h>

#include <cstdint>

#include "qkv/attention/kv_cache.h"

namespace qkv::attention::decode {

// Rows of one (sequence, kv head): row j starts at data + j * row_elems
// elements (bytes for int4) and, for int8/int4, its scales at scales + j * row_scales.
struct StoredRows {
  CacheDtype dtype = CacheDtype::kFloat32;
  const void* data = nullptr;
  const c10::Half* scales = nullptr;
  int64_t width = 0, row_elems = 0, row_scales = 0, block = 1;
};

// out[g] = sum_j softmax_j(scale * q[g] . key_j) value_j for g < group,
// j < rows (>= 1). q: group x keys.width floats, out: group x values.width.
void attend(const float* q, int64_t group, const StoredRows& keys, const StoredRows& values, int64_t rows, float scale,
            float* out);

}  // namespace qkv::attention::decode
