#pragma once
// A key-value cache for autoregressive decoding: the keys W_k x_i and values
// W_v x_i of past positions, kept per layer so that each new token costs one
// projection instead of re-projecting the whole prefix. What makes it small,
// each a setting (docs/lm.md has the measured cost of each):
//   - kv heads: heads that share keys and values (multi-query attention when
//     1, grouped-query when a divisor of the query heads) are stored once;
//   - element type: float32/64, float16, bfloat16, or int8 / int4 in blocks of
//     up to 32 numbers along the head width with one float16 scale per block
//     (llama.cpp's Q8_0 / Q4_0 layout, symmetric: x ~ scale * q, q in
//     [-127, 127] or [-7, 7]);
//   - a sliding window: only the last W positions (plus `sinks` first ones,
//     StreamingLLM's attention sinks) are kept, in a ring buffer.
// It grows by doubling as positions arrive (never past max_length, and a
// growth that would pass the memory limit is refused before allocating), and
// can be saved to a file and loaded back bit for bit (kv_cache_file.h).
//
// Positions: append(l, k, v) with n new positions advances length(l) by n;
// length() is the minimum over layers, the completed prefix. With a window,
// position p lives in slot p when p < sinks, else sinks + (p - sinks) % W.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

namespace qkv::attention {

enum class CacheDtype { kFloat64, kFloat32, kFloat16, kBFloat16, kInt8, kInt4 };

// "f64", "f32", "f16", "bf16", "int8", "int4".
const char* cache_dtype_name(CacheDtype dtype);
// Those names and the usual spellings (float32, fp32, float16, fp16, half,
// bfloat16, double, q8, q4), case-insensitive; UsageError naming `option`
// otherwise.
CacheDtype parse_cache_dtype(const std::string& text, const std::string& option);
bool is_quantized(CacheDtype dtype);
// The float type a cache of this dtype hands out (keys(), attention): itself
// for the float types, float32 for int8 and int4.
at::ScalarType cache_float_type(CacheDtype dtype);
CacheDtype cache_dtype_of(at::ScalarType type);  // UsageError for non-float types

// Numbers per quantisation block for head width `width`: the largest power
// of two <= 32 that divides it (int4 needs an even width).
int64_t quant_block(int64_t width);

// Bytes one head stores per position for `width` numbers: width * element
// size, or for int8 width + 2 bytes per block, for int4 width / 2 + 2 per block.
// UsageError for an odd width in int4 or an overflow.
int64_t head_row_bytes(CacheDtype dtype, int64_t width);

// The positions a cache holds of `seq` appended: all of them, or with a
// window at most sinks + window.
int64_t held_positions(int64_t seq, int64_t window, int64_t sinks);

// Bytes of a cache: layers x batch x kv_heads x held positions x
// (head_row_bytes(dk) for keys, head_row_bytes(dv) for values). The article's
// example (seq 5000, 50 layers, 20 heads, width 1000, f16, batch 1) is 1e10
// bytes of keys and 1e10 of values; with r = 200, 2e9 each. Sizes must be
// >= 0; a byte count beyond int64 throws UsageError (never a wrapped number).
struct KVCacheSize {
  int64_t key_bytes = 0;
  int64_t value_bytes = 0;
  int64_t total_bytes = 0;
};
struct KVCacheShape {
  int64_t layers = 1, batch = 1, kv_heads = 1, dk = 1, dv = 1, seq = 0;
  CacheDtype dtype = CacheDtype::kFloat32;
  int64_t window = 0, sinks = 0;
};
KVCacheSize kv_cache_bytes(const KVCacheShape& shape);
// Float elements of bytes_per_element bytes, no window (the article's arithmetic).
KVCacheSize kv_cache_bytes(int64_t layers, int64_t heads, int64_t dk, int64_t dv, int64_t seq, int64_t batch,
                           int64_t bytes_per_element);

// Which cached positions a query position may attend: key position j for
// query position i iff (not causal or j <= i) and, with a window W > 0,
// (i - j < W or j < sinks). query_positions [Nq], key_positions [Nk] (long)
// -> bool [Nq, Nk]. Training with this mask is what a windowed cache decodes.
at::Tensor window_attend_mask(const at::Tensor& query_positions, const at::Tensor& key_positions, bool causal,
                              int64_t window, int64_t sinks);
// The same for positions 0..n-1 attending each other (training).
at::Tensor window_attend_mask(int64_t n, int64_t window, int64_t sinks, const at::Device& device);

struct KVCacheSettings {
  int64_t layers = 1, batch = 1;
  int64_t kv_heads = 1;  // heads stored (the query heads' count must be a multiple)
  int64_t dk = 1, dv = 1;
  CacheDtype dtype = CacheDtype::kFloat32;
  c10::Device device = c10::kCPU;
  int64_t window = 0;  // 0 = keep every position
  int64_t sinks = 0;   // with a window: the first positions, always kept
  // Slots allocated at construction (0 = 256, our choice: a prompt's worth);
  // more are added by doubling. Capped by the window.
  int64_t initial_length = 0;
  // Positions a layer may hold at most (0 = no bound but memory); appending
  // past it throws UsageError naming S_max.
  int64_t max_length = 0;
  // Growth that would take the whole cache past this many bytes is refused
  // (UsageError) before allocating; 0 = this machine's physical memory.
  int64_t memory_limit_bytes = 0;
};

// A float cache of exactly max_len slots that never grows, of options' dtype
// and device (default float32, CPU); UsageError for max_len < 1.
KVCacheSettings fixed_cache_settings(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk,
                                     int64_t dv, const at::TensorOptions& options = {});

class KVCache {
 public:
  // UsageError naming the bad setting.
  explicit KVCache(const KVCacheSettings& settings);
  // KVCache(fixed_cache_settings(...)).
  KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk, int64_t dv,
          at::TensorOptions options = {});

  // Stores k_new [B,H,n,dk] and v_new [B,H,n,dv] (n >= 0, H = kv_heads) at
  // positions length(layer) .. +n-1 (converted, quantised, detached: the cache
  // is for inference) and advances length(layer) by n. UsageError naming k_new
  // or v_new for a shape mismatch, S_max past max_length, the memory limit
  // when growth would pass it, and non-finite or (int8/int4) out-of-range
  // numbers; nothing is written then.
  void append(int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new);

  // Appends k_new, v_new (as append) and returns the attention of the same n
  // positions' queries q [B,Hq,n,dk] (Hq a multiple of kv_heads; query head j
  // reads kv head j / (Hq / kv_heads)) over every position each may see
  // (window_attend_mask with `causal`), using keys and values exactly as the
  // cache stores them (rounded / quantised, the new ones too): [B,Hq,n,dv] in
  // q's dtype. softmax_scale multiplies q.k. One position at a time (decoding)
  // reads the stored rows directly, int8/int4 blocks included, without a float
  // copy of the cache; several at once (a prompt) dequantise what they read.
  at::Tensor append_and_attend(int64_t layer, const at::Tensor& q, const at::Tensor& k_new, const at::Tensor& v_new,
                               double softmax_scale, bool causal = true);

  // The held positions of `layer` as the cache stores them, in slot order,
  // converted to cache_float_type: [B,H,held,dk] / [..,dv]. Without a window,
  // slot order is position order and, for the float types, these are views
  // (no copy) that a later append leaves alone and reset() + append changes.
  at::Tensor keys(int64_t layer) const;
  at::Tensor values(int64_t layer) const;
  // The absolute position of each held slot of `layer`, [held] long (CPU).
  at::Tensor positions(int64_t layer) const;

  int64_t length(int64_t layer) const;  // positions appended to layer
  int64_t length() const;               // min over layers
  int64_t held(int64_t layer) const;    // positions it holds: <= capacity
  void reset();                         // all lengths to 0 (buffers kept)
  // A cache of its own holding the same positions (its buffers copied): one
  // prefix decoded into several continuations (beam search, sampling twice).
  KVCache clone() const;

  const KVCacheSettings& settings() const { return settings_; }
  int64_t layers() const { return settings_.layers; }
  int64_t batch() const { return settings_.batch; }
  int64_t heads() const { return settings_.kv_heads; }  // kv heads stored
  int64_t key_dim() const { return settings_.dk; }
  int64_t value_dim() const { return settings_.dv; }
  CacheDtype dtype() const { return settings_.dtype; }
  int64_t capacity() const { return capacity_; }  // slots allocated per layer
  int64_t max_len() const { return capacity_; }
  KVCacheSize size_bytes() const;  // of the allocated slots

  // The storage of one layer, for the cache file: data and (int8/int4) scales
  // of keys and values, each [B,H,capacity,...], contiguous. Restoring writes
  // the first `held` slots and sets the layer's length.
  struct Storage {
    at::Tensor keys, key_scales, values, value_scales;  // scales undefined for float types
  };
  const Storage& storage(int64_t layer) const;
  void restore(int64_t layer, int64_t length, const Storage& held_slots);

 private:
  void check_layer(int64_t layer, const char* fn) const;
  void check_new(const at::Tensor& k_new, const at::Tensor& v_new, const char* fn) const;
  void reserve(int64_t slots);  // grows every layer to at least `slots` (bounded)
  // The checks of append (layer, shapes, S_max) and the rows as stored; no state changes.
  Storage rows_to_append(int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new, const char* fn) const;
  void write(int64_t layer, const Storage& rows);  // rows_to_append's rows at the layer's next positions
  int64_t slot_of(int64_t position) const;
  Storage quantise(const at::Tensor& k_new, const at::Tensor& v_new) const;
  at::Tensor dequantise(const at::Tensor& data, const at::Tensor& scales, int64_t width) const;
  at::Tensor attend_one(int64_t layer, const at::Tensor& q, double softmax_scale) const;

  KVCacheSettings settings_;
  int64_t capacity_ = 0;
  // Invariants: storage_.size() == lengths_.size() == layers; every tensor of
  // storage_[l] is [batch, kv_heads, capacity_, ...] contiguous on the device;
  // slots [0, held(l)) hold appended data, the rest is unspecified.
  std::vector<Storage> storage_;
  std::vector<int64_t> lengths_;
};

}  // namespace qkv::attention
