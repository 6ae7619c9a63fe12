#pragma once
// A key-value cache for autoregressive decoding: the keys W_k x_i and values
// W_v x_i of past positions, kept per layer so that each new token costs one
// projection instead of re-projecting the whole prefix.
//
// Usage per decoding step (n new positions, all layers):
//   for each layer l: cache.append(l, k_new, v_new);   // [B,H,n,dk], [B,H,n,dv]
//                     attend the n queries over cache.keys(l), cache.values(l)
//                     with causal = true (end-aligned: query t of the block sees
//                     keys 0 .. length(l) - n + t);
// Lengths are PER LAYER: append(l, ...) advances length(l) by n, and nothing
// else moves it. length() is the number of positions every layer holds (the
// minimum over layers), i.e. the completed prefix; after a full step all layers
// agree and length() == length(l) for every l.
#include <ATen/core/Tensor.h>

#include <vector>

namespace qkv::attention {

// Bytes of a cache: keys layers*batch*heads*seq*dk elements, values
// layers*batch*heads*seq*dv, times bytes_per_element. The article's example
// (seq 5000, 50 layers, 20 heads, width 1000, 2 bytes, batch 1) is 1e10 bytes of
// keys and 1e10 of values; with width r = 200, 2e9 each. Sizes must be >= 0;
// a byte count beyond int64 throws UsageError (never a wrapped number).
struct KVCacheSize {
  int64_t key_bytes = 0;
  int64_t value_bytes = 0;
  int64_t total_bytes = 0;
};
KVCacheSize kv_cache_bytes(int64_t layers, int64_t heads, int64_t dk, int64_t dv, int64_t seq, int64_t batch,
                           int64_t bytes_per_element);

class KVCache {
 public:
  // Preallocates every layer's buffers (uninitialised). options: dtype and
  // device of the buffers (default float32, CPU). All sizes >= 1 except
  // dk, dv >= 1 too; throws qkv::UsageError naming the bad argument.
  KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk, int64_t dv,
          at::TensorOptions options = {});

  // Copies k_new [B,H,n,dk] and v_new [B,H,n,dv] (n >= 0, same n) into layer
  // `layer` at positions length(layer) .. length(layer)+n-1 and advances
  // length(layer) by n. The inputs are converted to the cache's dtype/device and
  // detached (the cache is for inference). Throws qkv::UsageError naming k_new or
  // v_new for a shape mismatch, and naming S_max when the layer would exceed it
  // (nothing is written then).
  void append(int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new);

  // Views (no copy) of the filled part: [B,H,length(layer),dk] and [..,dv].
  // They alias the cache: a later append does not change them, reset() + append does.
  at::Tensor keys(int64_t layer) const;
  at::Tensor values(int64_t layer) const;

  int64_t length(int64_t layer) const;
  int64_t length() const;  // min over layers
  void reset();            // all lengths to 0 (buffers kept, not cleared)

  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t batch() const { return batch_; }
  int64_t heads() const { return heads_; }
  int64_t max_len() const { return max_len_; }
  int64_t key_dim() const { return dk_; }
  int64_t value_dim() const { return dv_; }
  KVCacheSize size_bytes() const;  // of the preallocated buffers

 private:
  void check_layer(int64_t layer, const char* fn) const;

  int64_t batch_, heads_, max_len_, dk_, dv_;
  // Invariants: keys_.size() == values_.size() == lengths_.size() == layers;
  // keys_[l] is [batch, heads, max_len, dk], values_[l] is [batch, heads, max_len, dv],
  // both contiguous, of the constructor's dtype and device;
  // 0 <= lengths_[l] <= max_len, and positions [0, lengths_[l]) of layer l hold
  // appended data, the rest is unspecified.
  std::vector<at::Tensor> keys_;
  std::vector<at::Tensor> values_;
  std::vector<int64_t> lengths_;
};

}  // namespace qkv::attention
