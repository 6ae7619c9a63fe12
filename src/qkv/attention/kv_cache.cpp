#include "qkv/attention/kv_cache.h"

#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"

namespace qkv::attention {
namespace {

void require_positive(const char* fn, const char* name, int64_t value) {
  if (value < 1) throw UsageError(std::string(fn) + ": " + name + " must be >= 1, got " + std::to_string(value));
}

}  // namespace

KVCacheSize kv_cache_bytes(int64_t layers, int64_t heads, int64_t dk, int64_t dv, int64_t seq, int64_t batch,
                           int64_t bytes_per_element) {
  const char* fn = "kv_cache_bytes";
  for (auto [name, value] : {std::pair<const char*, int64_t>{"layers", layers}, {"heads", heads}, {"dk", dk},
                             {"dv", dv}, {"seq", seq}, {"batch", batch}, {"bytes_per_element", bytes_per_element}})
    if (value < 0) throw UsageError(std::string(fn) + ": " + name + " must be >= 0, got " + std::to_string(value));
  // Sizes come from users (lm cache-size, --max-new): a product that wraps
  // would print a small or negative size, or pre-size a cache from garbage.
  int64_t slots = 1;
  bool overflow = false;
  for (const int64_t v : {layers, batch, heads, seq, bytes_per_element}) overflow |= __builtin_mul_overflow(slots, v, &slots);
  KVCacheSize s;
  overflow |= __builtin_mul_overflow(slots, dk, &s.key_bytes);
  overflow |= __builtin_mul_overflow(slots, dv, &s.value_bytes);
  overflow |= __builtin_add_overflow(s.key_bytes, s.value_bytes, &s.total_bytes);
  if (overflow) {
    std::ostringstream m;
    m << fn << ": layers " << layers << " x batch " << batch << " x heads " << heads << " x seq " << seq << " x (dk "
      << dk << " + dv " << dv << ") x " << bytes_per_element << " bytes is more than "
      << std::numeric_limits<int64_t>::max() << " bytes";
    throw UsageError(m.str());
  }
  return s;
}

KVCache::KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk, int64_t dv,
                 at::TensorOptions options)
    : batch_(batch), heads_(heads), max_len_(max_len), dk_(dk), dv_(dv) {
  const char* fn = "KVCache";
  require_positive(fn, "layers", layers);
  require_positive(fn, "batch", batch);
  require_positive(fn, "heads", heads);
  require_positive(fn, "S_max (max_len)", max_len);
  require_positive(fn, "dk", dk);
  require_positive(fn, "dv", dv);
  if (!options.has_dtype()) options = options.dtype(at::kFloat);
  for (int64_t l = 0; l < layers; ++l) {
    keys_.push_back(at::empty({batch, heads, max_len, dk}, options));
    values_.push_back(at::empty({batch, heads, max_len, dv}, options));
  }
  lengths_.assign(static_cast<size_t>(layers), 0);
}

void KVCache::check_layer(int64_t layer, const char* fn) const {
  if (layer < 0 || layer >= layers())
    throw UsageError(std::string("KVCache::") + fn + ": layer " + std::to_string(layer) + " is out of range [0, " +
                     std::to_string(layers()) + ")");
}

void KVCache::append(int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new) {
  check_layer(layer, "append");
  auto expect = [&](const char* name, const at::Tensor& t, int64_t width, const char* wname) {
    if (!t.defined() || t.dim() != 4 || t.size(0) != batch_ || t.size(1) != heads_ || t.size(3) != width)
      throw UsageError(std::string("KVCache::append: ") + name + " must be [B,H,n," + wname + "] = [" +
                       std::to_string(batch_) + ", " + std::to_string(heads_) + ", n, " + std::to_string(width) +
                       "], got " + (t.defined() ? shape_of(t) : std::string("undefined")));
  };
  expect("k_new", k_new, dk_, "dk");
  expect("v_new", v_new, dv_, "dv");
  const int64_t n = k_new.size(2);
  if (v_new.size(2) != n)
    throw UsageError("KVCache::append: k_new has " + std::to_string(n) + " positions but v_new has " +
                     std::to_string(v_new.size(2)));
  int64_t& len = lengths_[static_cast<size_t>(layer)];
  if (len + n > max_len_)
    throw UsageError("KVCache::append: layer " + std::to_string(layer) + " holds " + std::to_string(len) +
                     " positions; appending " + std::to_string(n) + " would exceed S_max = " + std::to_string(max_len_));
  if (n == 0) return;
  at::NoGradGuard no_grad;
  keys_[static_cast<size_t>(layer)].narrow(2, len, n).copy_(k_new.detach());
  values_[static_cast<size_t>(layer)].narrow(2, len, n).copy_(v_new.detach());
  len += n;
}

at::Tensor KVCache::keys(int64_t layer) const {
  check_layer(layer, "keys");
  return keys_[static_cast<size_t>(layer)].narrow(2, 0, lengths_[static_cast<size_t>(layer)]);
}

at::Tensor KVCache::values(int64_t layer) const {
  check_layer(layer, "values");
  return values_[static_cast<size_t>(layer)].narrow(2, 0, lengths_[static_cast<size_t>(layer)]);
}

int64_t KVCache::length(int64_t layer) const {
  check_layer(layer, "length");
  return lengths_[static_cast<size_t>(layer)];
}

int64_t KVCache::length() const { return *std::min_element(lengths_.begin(), lengths_.end()); }

void KVCache::reset() { std::fill(lengths_.begin(), lengths_.end(), 0); }

KVCacheSize KVCache::size_bytes() const {
  return kv_cache_bytes(layers(), heads_, dk_, dv_, max_len_, batch_,
                        static_cast<int64_t>(keys_.front().element_size()));
}

}  // namespace qkv::attention
