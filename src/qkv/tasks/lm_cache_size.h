#pragma once
// `lm cache-size`: the bytes of a KV cache for a model's sizes, for a trained
// checkpoint, or for the example of "Keys, queries, values" and each way of
// shrinking it (docs/lm.md).
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/fields.h"
#include "qkv/train/run.h"

namespace qkv::tasks {

struct CacheSizeSettings {
  int64_t layers = 0, heads = 0, kv_heads = 0, dk = 0, dv = 0, head_dim = 0, seq = 0, batch_size = 1, window = 0,
          sinks = 0;
  std::string dtype = "f16";                       // f16, bf16, f32, f64, int8, int4 and their usual spellings
  bool dtype_given = false;                        // with a checkpoint: false = the model's own element type
  bool window_given = false, sinks_given = false;  // with a checkpoint: refused (the model decodes with its own)
  train::CheckpointFile checkpoint;  // layers, heads, kv heads, widths and window from this transformer-lm checkpoint
};

template <typename V>
void visit_fields(CacheSizeSettings& c, V&& visit) {
  constexpr double kAny = std::numeric_limits<double>::max();
  visit(Field{"layers", "transformer layers"}.range(1, kAny), c.layers);
  visit(Field{"heads", "attention (query) heads per layer"}.range(1, kAny), c.heads);
  visit(Field{"kv_heads", "key/value heads stored (1 = multi-query); 0 = --heads"}.range(0, kAny), c.kv_heads);
  visit(Field{"dk", "cached key width per head (r)"}.range(1, kAny), c.dk);
  visit(Field{"dv", "cached value width per head"}.range(1, kAny), c.dv);
  visit(Field{"head_dim", "both widths at once (--dk and --dv)"}.range(1, kAny), c.head_dim);
  visit(Field{"seq", "sequence length"}.range(1, kAny), c.seq);
  visit(Field{"batch_size", "sequences in the batch"}.range(1, kAny).was("batch"), c.batch_size);
  visit(Field{"window", "sliding window: positions kept; 0 = all"}.range(0, kAny), c.window);
  visit(Field{"sinks", "with a window: first positions kept besides it"}.range(0, kAny), c.sinks);
  visit(Field{"dtype", "element type: f16, bf16, f32, f64, int8 or int4 (fp16, float16... accepted)"}, c.dtype);
}

// The cache the settings describe. ConfigError naming the key: head_dim
// with dk or dv, a size the checkpoint gives also given, a missing size,
// kv_heads not dividing heads, sinks without a window, a cache of more than
// 8 EiB (too large to count).
attention::KVCacheShape cache_shape(CacheSizeSettings s);

// "Keys, queries, values"' example (50 layers, 20 heads, r = 1000, 5000
// positions, 2-byte numbers), then r = 200, 4 kv heads, int8, int4 and a
// 1024-position window, each added to the one before; labelled.
std::vector<std::pair<std::string, attention::KVCacheShape>> article_cache_shapes();

// What `lm cache-size` prints: key, value and total bytes of cache_shape(s)
// (or, with `article`, a table of article_cache_shapes() in decimal GB as
// the article counts, each row's share of the first); as JSON with `json`
// ({key_bytes, value_bytes, total_bytes}, a list of them with "setting" for
// the article). ConfigError: checkpoint with article, a bad dtype.
std::string cache_size_report(const CacheSizeSettings& s, bool article, bool json);

}  // namespace qkv::tasks
