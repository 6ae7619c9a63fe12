#include "qkv/attention/kv_cache.h"

#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "qkv/attention/cache_decode.h"
#include "qkv/attention/sdpa.h"
#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/runtime/runtime.h"

namespace qkv::attention {
namespace {

void require_positive(const char* fn, const char* name, int64_t value) {
  if (value < 1) throw UsageError(std::string(fn) + ": " + name + " must be >= 1, got " + std::to_string(value));
}

int64_t checked_product(std::initializer_list<int64_t> factors, bool& overflow) {
  int64_t p = 1;
  for (const int64_t f : factors) overflow |= __builtin_mul_overflow(p, f, &p);
  return p;
}

// Slots allocated when the settings name none: a short prompt's worth, so that
// a small model's cache starts at kilobytes and doubles from there (our choice).
constexpr int64_t kDefaultInitialSlots = 256;

// Largest |x| an int8 block can hold: 127 times float16's largest scale.
constexpr double kInt8Range = 127.0 * 65504.0;

}  // namespace

const char* cache_dtype_name(CacheDtype d) {
  switch (d) {
    case CacheDtype::kFloat64: return "f64";
    case CacheDtype::kFloat32: return "f32";
    case CacheDtype::kFloat16: return "f16";
    case CacheDtype::kBFloat16: return "bf16";
    case CacheDtype::kInt8: return "int8";
    case CacheDtype::kInt4: return "int4";
  }
  return "?";
}

CacheDtype parse_cache_dtype(const std::string& text, const std::string& option) {
  std::string t;
  for (const char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "f64" || t == "float64" || t == "fp64" || t == "double") return CacheDtype::kFloat64;
  if (t == "f32" || t == "float32" || t == "fp32" || t == "float") return CacheDtype::kFloat32;
  if (t == "f16" || t == "float16" || t == "fp16" || t == "half") return CacheDtype::kFloat16;
  if (t == "bf16" || t == "bfloat16") return CacheDtype::kBFloat16;
  if (t == "int8" || t == "i8" || t == "q8" || t == "q8_0") return CacheDtype::kInt8;
  if (t == "int4" || t == "i4" || t == "q4" || t == "q4_0") return CacheDtype::kInt4;
  throw UsageError(option + " '" + text + "': expected f32, f16, bf16, f64, int8 or int4");
}

bool is_quantized(CacheDtype d) { return d == CacheDtype::kInt8 || d == CacheDtype::kInt4; }

at::ScalarType cache_float_type(CacheDtype d) {
  switch (d) {
    case CacheDtype::kFloat64: return at::kDouble;
    case CacheDtype::kFloat16: return at::kHalf;
    case CacheDtype::kBFloat16: return at::kBFloat16;
    default: return at::kFloat;
  }
}

CacheDtype cache_dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kDouble: return CacheDtype::kFloat64;
    case at::kFloat: return CacheDtype::kFloat32;
    case at::kHalf: return CacheDtype::kFloat16;
    case at::kBFloat16: return CacheDtype::kBFloat16;
    default: throw UsageError(std::string("KVCache: a float cache needs a float dtype, got ") + c10::toString(t));
  }
}

int64_t quant_block(int64_t width) {
  int64_t b = 32;
  while (b > 1 && width % b != 0) b /= 2;
  return b;
}

int64_t head_row_bytes(CacheDtype d, int64_t width) {
  if (width < 0) throw UsageError("head width must be >= 0, got " + std::to_string(width));
  int64_t bytes = 0;
  bool overflow = false;
  switch (d) {
    case CacheDtype::kFloat64: overflow = __builtin_mul_overflow(width, int64_t{8}, &bytes); break;
    case CacheDtype::kFloat32: overflow = __builtin_mul_overflow(width, int64_t{4}, &bytes); break;
    case CacheDtype::kFloat16:
    case CacheDtype::kBFloat16: overflow = __builtin_mul_overflow(width, int64_t{2}, &bytes); break;
    case CacheDtype::kInt8: bytes = width + (width / quant_block(width)) * 2; break;
    case CacheDtype::kInt4:
      if (width % 2 != 0)
        throw UsageError("an int4 cache packs two numbers a byte: the head width must be even, got " +
                         std::to_string(width));
      bytes = width / 2 + (width / quant_block(width)) * 2;
      break;
  }
  if (overflow) throw UsageError("head width " + std::to_string(width) + " overflows a byte count");
  return bytes;
}

int64_t held_positions(int64_t seq, int64_t window, int64_t sinks) {
  if (window <= 0) return seq;
  int64_t ring = 0;
  if (__builtin_add_overflow(window, sinks, &ring)) return seq;
  return std::min(seq, ring);
}

KVCacheSize kv_cache_bytes(const KVCacheShape& s) {
  const char* fn = "kv_cache_bytes";
  for (auto [name, value] : {std::pair<const char*, int64_t>{"layers", s.layers},
                             {"kv_heads", s.kv_heads},
                             {"dk", s.dk},
                             {"dv", s.dv},
                             {"seq", s.seq},
                             {"batch", s.batch},
                             {"window", s.window},
                             {"sinks", s.sinks}})
    if (value < 0) throw UsageError(std::string(fn) + ": " + name + " must be >= 0, got " + std::to_string(value));
  // Sizes come from users (lm cache-size, --max-new): a product that wraps
  // would print a small or negative size, or pre-size a cache from garbage.
  bool overflow = false;
  const int64_t rows =
      checked_product({s.layers, s.batch, s.kv_heads, held_positions(s.seq, s.window, s.sinks)}, overflow);
  KVCacheSize out;
  overflow |= __builtin_mul_overflow(rows, head_row_bytes(s.dtype, s.dk), &out.key_bytes);
  overflow |= __builtin_mul_overflow(rows, head_row_bytes(s.dtype, s.dv), &out.value_bytes);
  overflow |= __builtin_add_overflow(out.key_bytes, out.value_bytes, &out.total_bytes);
  if (overflow) {
    std::ostringstream m;
    m << fn << ": layers " << s.layers << " x batch " << s.batch << " x kv heads " << s.kv_heads << " x seq " << s.seq
      << " x (dk " << s.dk << " + dv " << s.dv << ") in " << cache_dtype_name(s.dtype) << " is more than "
      << std::numeric_limits<int64_t>::max() << " bytes";
    throw UsageError(m.str());
  }
  return out;
}

KVCacheSize kv_cache_bytes(int64_t layers, int64_t heads, int64_t dk, int64_t dv, int64_t seq, int64_t batch,
                           int64_t bytes_per_element) {
  const char* fn = "kv_cache_bytes";
  for (auto [name, value] : {std::pair<const char*, int64_t>{"layers", layers},
                             {"heads", heads},
                             {"dk", dk},
                             {"dv", dv},
                             {"seq", seq},
                             {"batch", batch},
                             {"bytes_per_element", bytes_per_element}})
    if (value < 0) throw UsageError(std::string(fn) + ": " + name + " must be >= 0, got " + std::to_string(value));
  bool overflow = false;
  const int64_t slots = checked_product({layers, batch, heads, seq, bytes_per_element}, overflow);
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

at::Tensor window_attend_mask(const at::Tensor& query_positions, const at::Tensor& key_positions, bool causal,
                              int64_t window, int64_t sinks) {
  const auto qp = query_positions.unsqueeze(1), kp = key_positions.unsqueeze(0);
  auto mask = at::ones({qp.size(0), kp.size(1)}, query_positions.options().dtype(at::kBool));
  if (causal) mask = mask.logical_and(kp <= qp);
  if (window > 0) mask = mask.logical_and((qp - kp < window).logical_or(kp < sinks));
  return mask;
}

at::Tensor window_attend_mask(int64_t n, int64_t window, int64_t sinks, const at::Device& device) {
  const auto p = at::arange(n, at::TensorOptions().dtype(at::kLong).device(device));
  return window_attend_mask(p, p, true, window, sinks);
}

// ---------------------------------------------------------------------------- KVCache

namespace {
// Slots [src_slot, +count) of every tensor of src into [dst_slot, +count) of dst.
void copy_rows(KVCache::Storage& dst, int64_t dst_slot, const KVCache::Storage& src, int64_t src_slot, int64_t count) {
  dst.keys.narrow(2, dst_slot, count).copy_(src.keys.narrow(2, src_slot, count));
  dst.values.narrow(2, dst_slot, count).copy_(src.values.narrow(2, src_slot, count));
  if (src.key_scales.defined()) {
    dst.key_scales.narrow(2, dst_slot, count).copy_(src.key_scales.narrow(2, src_slot, count));
    dst.value_scales.narrow(2, dst_slot, count).copy_(src.value_scales.narrow(2, src_slot, count));
  }
}

// The address of row `row` of stored rows r.
const void* advance(const decode::StoredRows& r, int64_t row) {
  const int64_t elements = row * r.row_elems;
  switch (r.dtype) {
    case CacheDtype::kFloat64: return static_cast<const double*>(r.data) + elements;
    case CacheDtype::kFloat32: return static_cast<const float*>(r.data) + elements;
    case CacheDtype::kFloat16:
    case CacheDtype::kBFloat16: return static_cast<const uint16_t*>(r.data) + elements;
    default: return static_cast<const uint8_t*>(r.data) + elements;  // int8 and int4: bytes
  }
}
}  // namespace

KVCache::KVCache(const KVCacheSettings& s) : settings_(s) {
  const char* fn = "KVCache";
  require_positive(fn, "layers", s.layers);
  require_positive(fn, "batch", s.batch);
  require_positive(fn, "kv_heads", s.kv_heads);
  require_positive(fn, "dk", s.dk);
  require_positive(fn, "dv", s.dv);
  if (s.window < 0)
    throw UsageError("KVCache: window must be >= 0 (0 = every position), got " + std::to_string(s.window));
  if (s.sinks < 0) throw UsageError("KVCache: sinks must be >= 0, got " + std::to_string(s.sinks));
  if (s.sinks > 0 && s.window == 0) throw UsageError("KVCache: sinks need a window");
  if (s.initial_length < 0 || s.max_length < 0 || s.memory_limit_bytes < 0)
    throw UsageError("KVCache: initial_length, max_length and memory_limit_bytes must be >= 0");
  head_row_bytes(s.dtype, s.dk);  // int4's even widths
  head_row_bytes(s.dtype, s.dv);
  storage_.resize(static_cast<size_t>(s.layers));
  lengths_.assign(static_cast<size_t>(s.layers), 0);
  reserve(s.initial_length > 0 ? s.initial_length : kDefaultInitialSlots);
}

KVCacheSettings fixed_cache_settings(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk,
                                     int64_t dv, const at::TensorOptions& options) {
  require_positive("KVCache", "S_max (max_len)", max_len);
  KVCacheSettings s;
  s.layers = layers;
  s.batch = batch;
  s.kv_heads = heads;
  s.dk = dk;
  s.dv = dv;
  s.dtype = cache_dtype_of(options.has_dtype() ? c10::typeMetaToScalarType(options.dtype()) : at::kFloat);
  s.device = options.device();
  s.initial_length = max_len;
  s.max_length = max_len;
  return s;
}

KVCache::KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t max_len, int64_t dk, int64_t dv,
                 at::TensorOptions options)
    : KVCache(fixed_cache_settings(layers, batch, heads, max_len, dk, dv, options)) {}

void KVCache::check_layer(int64_t layer, const char* fn) const {
  if (layer < 0 || layer >= layers())
    throw UsageError(std::string("KVCache::") + fn + ": layer " + std::to_string(layer) + " is out of range [0, " +
                     std::to_string(layers()) + ")");
}

int64_t KVCache::slot_of(int64_t p) const {
  const auto& s = settings_;
  if (s.window == 0 || p < s.sinks) return p;
  return s.sinks + (p - s.sinks) % s.window;
}

int64_t KVCache::held(int64_t layer) const {
  check_layer(layer, "held");
  return held_positions(lengths_[static_cast<size_t>(layer)], settings_.window, settings_.sinks);
}

void KVCache::reserve(int64_t slots) {
  const auto& s = settings_;
  int64_t bound = std::numeric_limits<int64_t>::max();
  if (s.window > 0) bound = held_positions(bound, s.window, s.sinks);
  if (s.max_length > 0) bound = std::min(bound, s.max_length);
  slots = std::min(slots, bound);
  if (slots <= capacity_) return;
  // Doubling keeps the copies amortised O(1) a position; the bound and the
  // memory limit cap it, and a doubling that would not fit falls back to
  // exactly what is needed.
  const int64_t doubled = capacity_ > bound / 2 ? bound : std::max(slots, 2 * capacity_);
  const int64_t limit = s.memory_limit_bytes > 0 ? s.memory_limit_bytes : physical_memory_bytes();
  auto bytes_for = [&](int64_t n) {
    KVCacheShape shape{s.layers, s.batch, s.kv_heads, s.dk, s.dv, n, s.dtype};
    try {
      return kv_cache_bytes(shape).total_bytes;
    } catch (const UsageError&) {
      return std::numeric_limits<int64_t>::max();
    }
  };
  int64_t target = std::min(doubled, bound);
  if (bytes_for(target) > limit) target = slots;
  if (bytes_for(target) > limit) {
    const int64_t needed = bytes_for(slots);
    throw UsageError(
        "KV cache: holding " + std::to_string(slots) + " positions needs " +
        (needed == std::numeric_limits<int64_t>::max() ? std::string("more than 2^63") : std::to_string(needed)) +
        " bytes, more than the " + std::to_string(limit) + " bytes of " +
        (s.memory_limit_bytes > 0 ? "the memory limit" : "this machine's memory"));
  }
  const auto opts = at::TensorOptions().device(s.device);
  const int64_t B = s.batch, H = s.kv_heads;
  for (size_t l = 0; l < storage_.size(); ++l) {
    Storage fresh;
    auto alloc = [&](int64_t width, at::Tensor& data, at::Tensor& scales) {
      switch (s.dtype) {
        case CacheDtype::kInt8:
          data = at::empty({B, H, target, width}, opts.dtype(at::kChar));
          scales = at::empty({B, H, target, width / quant_block(width)}, opts.dtype(at::kHalf));
          break;
        case CacheDtype::kInt4:
          data = at::empty({B, H, target, width / 2}, opts.dtype(at::kByte));
          scales = at::empty({B, H, target, width / quant_block(width)}, opts.dtype(at::kHalf));
          break;
        default: data = at::empty({B, H, target, width}, opts.dtype(cache_float_type(s.dtype)));
      }
    };
    alloc(s.dk, fresh.keys, fresh.key_scales);
    alloc(s.dv, fresh.values, fresh.value_scales);
    const int64_t keep = capacity_ > 0 ? held_positions(lengths_[l], s.window, s.sinks) : 0;
    if (keep > 0) copy_rows(fresh, 0, storage_[l], 0, keep);
    storage_[l] = std::move(fresh);
  }
  capacity_ = target;
}

void KVCache::check_new(const at::Tensor& k_new, const at::Tensor& v_new, const char* fn) const {
  auto expect = [&](const char* name, const at::Tensor& t, int64_t width, const char* wname) {
    if (!t.defined() || t.dim() != 4 || t.size(0) != batch() || t.size(1) != heads() || t.size(3) != width)
      throw UsageError(std::string("KVCache::") + fn + ": " + name + " must be [B,H,n," + wname + "] = [" +
                       std::to_string(batch()) + ", " + std::to_string(heads()) + ", n, " + std::to_string(width) +
                       "], got " + (t.defined() ? shape_of(t) : std::string("undefined")));
  };
  expect("k_new", k_new, key_dim(), "dk");
  expect("v_new", v_new, value_dim(), "dv");
  if (v_new.size(2) != k_new.size(2))
    throw UsageError(std::string("KVCache::") + fn + ": k_new has " + std::to_string(k_new.size(2)) +
                     " positions but v_new has " + std::to_string(v_new.size(2)));
}

KVCache::Storage KVCache::quantise(const at::Tensor& k_new, const at::Tensor& v_new) const {
  at::NoGradGuard no_grad;
  const auto device = settings_.device;
  Storage out;
  auto one = [&](const at::Tensor& x, const char* name, at::Tensor& data, at::Tensor& scales) {
    if (!is_quantized(settings_.dtype)) {
      data = x.detach().to(device, cache_float_type(settings_.dtype)).contiguous();
      return;
    }
    const bool int8 = settings_.dtype == CacheDtype::kInt8;
    const double qmax = int8 ? 127.0 : 7.0;
    const int64_t width = x.size(3), block = quant_block(width);
    auto blocks = x.detach().to(device, at::kFloat).reshape({x.size(0), x.size(1), x.size(2), width / block, block});
    const auto amax = blocks.abs().amax(-1);
    // A NaN or infinity would poison a whole block's scale, and a block whose
    // largest number passes float16's range times qmax has no scale at all.
    if (amax.numel() > 0 && !(amax.max().item<double>() <= kInt8Range * qmax / 127.0))
      throw UsageError(std::string("KVCache::append: ") + name + " holds a non-finite number or one beyond +-" +
                       std::to_string(kInt8Range * qmax / 127.0) + ", which an " + cache_dtype_name(settings_.dtype) +
                       " cache cannot store");
    // The float16 scale is rounded up, never down, so that |x| / scale stays
    // within qmax and every number is within half a step (no clamping).
    const auto exact = amax / qmax;
    scales = exact.to(at::kHalf);
    scales = at::where(scales.to(at::kFloat) < exact, (scales.view(at::kShort) + 1).view(at::kHalf), scales);
    const auto s = scales.to(at::kFloat).unsqueeze(-1);
    auto q = at::where(s > 0, blocks / s, at::zeros_like(blocks)).round().clamp(-qmax, qmax);
    q = q.reshape({x.size(0), x.size(1), x.size(2), width});
    if (int8) {
      data = q.to(at::kChar).contiguous();
    } else {
      // Two numbers a byte, q + 8 in 1..15: element 2i in the low nibble.
      const auto u = (q + 8).to(at::kByte).reshape({x.size(0), x.size(1), x.size(2), width / 2, 2});
      data = (u.select(-1, 0) + u.select(-1, 1) * 16).contiguous();
    }
    scales = scales.contiguous();
  };
  one(k_new, "k_new", out.keys, out.key_scales);
  one(v_new, "v_new", out.values, out.value_scales);
  return out;
}

at::Tensor KVCache::dequantise(const at::Tensor& data, const at::Tensor& scales, int64_t width) const {
  if (!is_quantized(settings_.dtype)) return data;
  at::Tensor q;
  if (settings_.dtype == CacheDtype::kInt8) {
    q = data.to(at::kFloat);
  } else {
    const auto p = data.to(at::kShort);
    const auto lo = p.bitwise_and(15), hi = at::div(p - lo, 16, "trunc");
    q = at::stack({lo, hi}, -1).reshape({data.size(0), data.size(1), data.size(2), width}).to(at::kFloat) - 8;
  }
  const int64_t block = quant_block(width);
  return (q.reshape({q.size(0), q.size(1), q.size(2), width / block, block}) * scales.to(at::kFloat).unsqueeze(-1))
      .reshape({q.size(0), q.size(1), q.size(2), width});
}

KVCache::Storage KVCache::rows_to_append(int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new,
                                         const char* fn) const {
  check_layer(layer, fn);
  check_new(k_new, v_new, fn);
  const int64_t n = k_new.size(2), len = lengths_[static_cast<size_t>(layer)];
  if (settings_.max_length > 0 && len + n > settings_.max_length)
    throw UsageError(std::string("KVCache::") + fn + ": layer " + std::to_string(layer) + " holds " +
                     std::to_string(len) + " positions; appending " + std::to_string(n) +
                     " would exceed S_max = " + std::to_string(settings_.max_length));
  return quantise(k_new, v_new);
}

void KVCache::write(int64_t layer, const Storage& rows) {
  const int64_t n = rows.keys.size(2);
  if (n == 0) return;
  const int64_t len = lengths_[static_cast<size_t>(layer)];
  reserve(len + n);
  at::NoGradGuard no_grad;
  Storage& st = storage_[static_cast<size_t>(layer)];
  // Positions that a later one of the same block overwrites in the ring are
  // skipped; the rest go in runs of consecutive slots.
  const int64_t W = settings_.window, S = settings_.sinks;
  int64_t i = 0;
  while (i < n) {
    const int64_t p = len + i;
    if (W > 0 && p >= S && p < len + n - W) {
      i = std::max(i + 1, n - W);
      continue;
    }
    const int64_t slot = slot_of(p);
    int64_t run = 1;
    while (i + run < n && slot_of(p + run) == slot + run) ++run;
    copy_rows(st, slot, rows, i, run);
    i += run;
  }
  lengths_[static_cast<size_t>(layer)] = len + n;
}

void KVCache::append(int64_t layer, const at::Tensor& k_new, const at::Tensor& v_new) {
  write(layer, rows_to_append(layer, k_new, v_new, "append"));  // throws before anything is written
}

at::Tensor KVCache::keys(int64_t layer) const {
  const int64_t m = held(layer);
  const Storage& st = storage_[static_cast<size_t>(layer)];
  return dequantise(st.keys.narrow(2, 0, m), st.key_scales.defined() ? st.key_scales.narrow(2, 0, m) : at::Tensor(),
                    key_dim());
}

at::Tensor KVCache::values(int64_t layer) const {
  const int64_t m = held(layer);
  const Storage& st = storage_[static_cast<size_t>(layer)];
  return dequantise(st.values.narrow(2, 0, m),
                    st.value_scales.defined() ? st.value_scales.narrow(2, 0, m) : at::Tensor(), value_dim());
}

at::Tensor KVCache::positions(int64_t layer) const {
  const int64_t m = held(layer), len = length(layer);
  const int64_t W = settings_.window, S = settings_.sinks;
  auto out = at::empty({m}, at::kLong);
  auto* p = out.data_ptr<int64_t>();
  for (int64_t s = 0; s < m; ++s) {
    if (W == 0 || s < S || len <= S + W) {
      p[s] = s;
    } else {
      const int64_t r = s - S, last = len - 1 - S;
      p[s] = S + r + ((last - r) / W) * W;
    }
  }
  return out;
}

int64_t KVCache::length(int64_t layer) const {
  check_layer(layer, "length");
  return lengths_[static_cast<size_t>(layer)];
}

int64_t KVCache::length() const { return *std::min_element(lengths_.begin(), lengths_.end()); }

void KVCache::reset() { std::fill(lengths_.begin(), lengths_.end(), 0); }

KVCache KVCache::clone() const {
  KVCache copy = *this;
  auto cloned = [](const at::Tensor& t) { return t.defined() ? t.clone() : t; };
  for (auto& s : copy.storage_)
    s = Storage{cloned(s.keys), cloned(s.key_scales), cloned(s.values), cloned(s.value_scales)};
  return copy;
}

KVCacheSize KVCache::size_bytes() const {
  const auto& s = settings_;
  return kv_cache_bytes(KVCacheShape{s.layers, s.batch, s.kv_heads, s.dk, s.dv, capacity_, s.dtype});
}

const KVCache::Storage& KVCache::storage(int64_t layer) const {
  check_layer(layer, "storage");
  return storage_[static_cast<size_t>(layer)];
}

void KVCache::restore(int64_t layer, int64_t length, const Storage& rows) {
  check_layer(layer, "restore");
  if (length < 0 || (settings_.max_length > 0 && length > settings_.max_length))
    throw UsageError("KVCache::restore: length " + std::to_string(length) + " is out of range");
  const int64_t m = held_positions(length, settings_.window, settings_.sinks);
  const Storage& st = storage_[static_cast<size_t>(layer)];
  auto same = [&](const at::Tensor& given, const at::Tensor& like) {
    if (given.defined() != like.defined()) return false;
    if (!given.defined()) return true;
    auto want = like.sizes().vec();
    want[2] = m;
    return given.sizes().vec() == want && given.scalar_type() == like.scalar_type();
  };
  if (!same(rows.keys, st.keys) || !same(rows.values, st.values) || !same(rows.key_scales, st.key_scales) ||
      !same(rows.value_scales, st.value_scales))
    throw UsageError("KVCache::restore: the rows do not match this cache's layout for " + std::to_string(m) +
                     " held positions");
  reserve(m);
  at::NoGradGuard no_grad;
  copy_rows(storage_[static_cast<size_t>(layer)], 0, rows, 0, m);
  lengths_[static_cast<size_t>(layer)] = length;
}

// ---------------------------------------------------------------------------- attention over the cache

// One new position per sequence: q [B,Hq,1,dk] over the held rows. On the
// CPU each (sequence, kv head) goes to decode::attend, which reads the stored
// rows (and block scales) in place for all the query heads that share them;
// float64 caches (exact references) and other devices: the rows are converted and handed to
// scaled_dot_product_attention with those query heads as a block of queries.
at::Tensor KVCache::attend_one(int64_t layer, const at::Tensor& q, double softmax_scale) const {
  const int64_t m = held(layer), B = batch(), H = heads(), Hq = q.size(1), group = Hq / H;
  const int64_t dk = key_dim(), dv = value_dim();
  const Storage& st = storage_[static_cast<size_t>(layer)];
  if (!st.keys.device().is_cpu() || settings_.dtype == CacheDtype::kFloat64) {  // the kernel sums in float32
    const auto type = q.scalar_type();
    SdpaOptions o;
    o.scale = softmax_scale;
    auto out =
        scaled_dot_product_attention(q.reshape({B, H, group, dk}), keys(layer).to(type), values(layer).to(type), o);
    return out.output.reshape({B, Hq, 1, dv});
  }
  const auto qf = q.to(at::kFloat).reshape({B, H, group, dk}).contiguous();
  auto out = at::empty({B, H, group, dv}, at::kFloat);
  auto rows_of = [&](const at::Tensor& data, const at::Tensor& scales, int64_t width) {
    decode::StoredRows r;
    r.dtype = settings_.dtype;
    r.data = data.data_ptr();
    r.scales = scales.defined() ? scales.data_ptr<c10::Half>() : nullptr;
    r.width = width;
    r.row_elems = data.size(3);
    r.row_scales = scales.defined() ? scales.size(3) : 0;
    r.block = quant_block(width);
    return r;
  };
  const decode::StoredRows k = rows_of(st.keys, st.key_scales, dk), v = rows_of(st.values, st.value_scales, dv);
  const float* qp = qf.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t cap = capacity_;
  // One task per kv head reads its rows once for all its query heads; with
  // fewer kv heads than threads (multi-query decoding of one sequence), one
  // task per query head keeps every thread busy instead.
  const int64_t per_task = B * H < at::get_num_threads() ? 1 : group;
  at::parallel_for(0, B * H * (group / per_task), 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / (group / per_task), first = (task % (group / per_task)) * per_task;
      // Storage is [B,H,capacity,...]: the rows of (b, h) start at bh * capacity.
      decode::StoredRows kh = k, vh = v;
      kh.data = advance(k, bh * cap);
      vh.data = advance(v, bh * cap);
      if (k.scales) kh.scales = k.scales + bh * cap * k.row_scales;
      if (v.scales) vh.scales = v.scales + bh * cap * v.row_scales;
      decode::attend(qp + (bh * group + first) * dk, per_task, kh, vh, m, static_cast<float>(softmax_scale),
                     op + (bh * group + first) * dv);
    }
  });
  return out.reshape({B, Hq, 1, dv}).to(q.scalar_type());
}

at::Tensor KVCache::append_and_attend(int64_t layer, const at::Tensor& q, const at::Tensor& k_new,
                                      const at::Tensor& v_new, double softmax_scale, bool causal) {
  const Storage rows = rows_to_append(layer, k_new, v_new, "append_and_attend");
  const int64_t n = k_new.size(2);
  if (!q.defined() || q.dim() != 4 || q.size(0) != batch() || q.size(1) % heads() != 0 || q.size(2) != n ||
      q.size(3) != key_dim())
    throw UsageError("KVCache::append_and_attend: q must be [B, Hq, n, dk] = [" + std::to_string(batch()) +
                     ", a multiple of " + std::to_string(heads()) + ", " + std::to_string(n) + ", " +
                     std::to_string(key_dim()) + "], got " + (q.defined() ? shape_of(q) : std::string("undefined")));
  if (!(softmax_scale > 0)) throw UsageError("KVCache::append_and_attend: softmax_scale must be > 0");
  at::NoGradGuard no_grad;
  if (n <= 1) {
    write(layer, rows);
    if (n == 0) return at::zeros({batch(), q.size(1), 0, value_dim()}, q.options());
    return attend_one(layer, q, softmax_scale);
  }
  // Several positions: what was held before, then the new rows exactly as
  // they will be stored, masked by position (the ring is not in position
  // order, and a block longer than the window overwrites its own start).
  const int64_t len = length(layer), group = q.size(1) / heads();
  auto k = at::cat({keys(layer), dequantise(rows.keys, rows.key_scales, key_dim())}, 2);
  auto v = at::cat({values(layer), dequantise(rows.values, rows.value_scales, value_dim())}, 2);
  if (group > 1) {
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  SdpaOptions o;
  o.scale = softmax_scale;
  if (settings_.window == 0 && causal) {
    o.causal = true;  // held positions are 0..len-1 in order: end-aligned causal is the mask
  } else if (settings_.window > 0 || causal) {
    const auto key_positions = at::cat({positions(layer), at::arange(len, len + n, at::kLong)});
    o.bool_mask = window_attend_mask(at::arange(len, len + n, at::kLong), key_positions, causal, settings_.window,
                                     settings_.sinks)
                      .to(q.device());
  }
  auto out = scaled_dot_product_attention(q, k.to(q.scalar_type()), v.to(q.scalar_type()), o).output;
  write(layer, rows);
  return out;
}

}  // namespace qkv::attention
