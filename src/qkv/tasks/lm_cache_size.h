#pragma once
// `lm cache-size`: the bytes of a KV cache for a model's sizes, for a trained
// checkpoint, or for the example of "Keys, queries, values" and each way of
// shrinking it (docs/lm.md).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qkv/attention/kv_cache.h"

namespace qkv::tasks {

struct CacheSizeSettings {
  int64_t layers = 0, heads = 0, kv_heads = 0, dk = 0, dv = 0, head_dim = 0, seq = 0, batch_size = 1, window = 0,
          sinks = 0;
  std::string dtype = "f16";  // f16, bf16, f32, f64, int8, int4 and their usual spellings
  bool dtype_given = false;   // with a checkpoint: false = the model's own element type
  std::string checkpoint;     // layers, heads, kv heads, widths and window from this transformer-lm checkpoint
};

// The cache the settings describe. ConfigError naming the key: head_dim
// with dk or dv, a size the checkpoint gives also given, a missing size,
// kv_heads not dividing heads, sinks without a window, a cache of more than
// 8 EiB (too large to count).
attention::KVCacheShape cache_shape(CacheSizeSettings s);

// "Keys, queries, values"' example (50 layers, 20 heads, r = 1000, 5000
// positions, 2-byte numbers), then r = 200, 4 kv heads, int8, int4 and a
// 1024-position window, each added to the one before; labelled.
std::vector<std::pair<std::string, attention::KVCacheShape>> article_cache_shapes();

}  // namespace qkv::tasks
