#include "qkv/tasks/lm_cache_size.h"

#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/tasks/lm_task.h"

namespace qkv::tasks {

attention::KVCacheShape cache_shape(CacheSizeSettings s) {
  attention::KVCacheShape shape;
  shape.dtype = attention::parse_cache_dtype(s.dtype, "{dtype}");
  if (s.head_dim > 0) {
    if (s.dk > 0 || s.dv > 0) throw ConfigError("head_dim", "sets {dk} and {dv}: give one or the others");
    s.dk = s.dv = s.head_dim;
  }
  if (!s.checkpoint.path.empty()) {
    for (const auto& [key, given] : {std::pair<const char*, bool>{"layers", s.layers > 0},
                                     {"heads", s.heads > 0},
                                     {"kv_heads", s.kv_heads > 0},
                                     {"head_dim", s.head_dim > 0},
                                     {"dk", s.dk > 0},
                                     {"dv", s.dv > 0},
                                     {"window", s.window_given},
                                     {"sinks", s.sinks_given}})
      if (given) throw ConfigError(key, ": the checkpoint gives it; leave it out with {checkpoint}");
    const auto model = load_transformer_lm(s.checkpoint, nullptr);
    const auto& mo = model->options();
    s.layers = mo.layers;
    s.heads = mo.heads;
    s.kv_heads = mo.head_kv();
    s.dk = mo.head_dk();
    s.dv = mo.head_dv();
    s.window = mo.window;  // what `lm generate` decodes with
    s.sinks = mo.sinks;
    if (!s.dtype_given) shape.dtype = attention::cache_dtype_of(model->embedding()->weight.scalar_type());
  }
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"layers", s.layers},
                                   {"heads", s.heads},
                                   {"dk", s.dk},
                                   {"dv", s.dv},
                                   {"seq", s.seq}})
    if (value < 1) throw ConfigError(key, "is required (or {checkpoint} for a trained model's sizes)");
  const int64_t kv = s.kv_heads > 0 ? s.kv_heads : s.heads;
  if (s.heads % kv != 0)
    throw ConfigError("kv_heads", std::to_string(kv) + " must divide {heads} " + std::to_string(s.heads));
  if (s.sinks > 0 && s.window == 0) throw ConfigError("sinks", "needs {window}");
  shape.layers = s.layers;
  shape.batch = s.batch_size;
  shape.kv_heads = kv;
  shape.dk = s.dk;
  shape.dv = s.dv;
  shape.seq = s.seq;
  shape.window = s.window;
  shape.sinks = s.sinks;
  // A head width the dtype cannot hold is said as such, not as an overflow,
  // naming the option that gave the width (the dtype, for a checkpoint's).
  for (const auto& [name, width] : {std::pair<const char*, int64_t>{"dk", s.dk}, {"dv", s.dv}}) {
    try {
      attention::head_row_bytes(shape.dtype, width);
    } catch (const UsageError& e) {
      throw ConfigError(!s.checkpoint.path.empty() ? "dtype"
                        : s.head_dim > 0           ? "head_dim"
                                                   : name,
                        std::string(": ") + e.what());
    }
  }
  try {
    attention::kv_cache_bytes(shape);
  } catch (const UsageError&) {
    throw ConfigError(
        "seq", std::to_string(s.seq) + " with {layers} " + std::to_string(s.layers) + " {heads} " +
                   std::to_string(s.heads) + " {kv_heads} " + std::to_string(kv) + " {dk} " + std::to_string(s.dk) +
                   " {dv} " + std::to_string(s.dv) + " {batch_size} " + std::to_string(s.batch_size) + " {dtype} " +
                   attention::cache_dtype_name(shape.dtype) + ": the cache would be more than " +
                   std::to_string(std::numeric_limits<int64_t>::max()) + " bytes (8 EiB), too large to count");
  }
  return shape;
}

std::vector<std::pair<std::string, attention::KVCacheShape>> article_cache_shapes() {
  std::vector<std::pair<std::string, attention::KVCacheShape>> rows;
  attention::KVCacheShape a{50, 1, 20, 1000, 1000, 5000, attention::CacheDtype::kFloat16};
  rows.emplace_back("the article: 50 layers, 20 heads, r = 1000, 5000 positions, f16", a);
  a.dk = a.dv = 200;
  rows.emplace_back("r = 200", a);
  a.kv_heads = 4;
  rows.emplace_back("r = 200, 4 kv heads", a);
  a.dtype = attention::CacheDtype::kInt8;
  rows.emplace_back("r = 200, 4 kv heads, int8", a);
  a.dtype = attention::CacheDtype::kInt4;
  rows.emplace_back("r = 200, 4 kv heads, int4", a);
  a.dtype = attention::CacheDtype::kInt8;
  a.window = 1024;
  rows.emplace_back("r = 200, 4 kv heads, int8, window 1024", a);
  return rows;
}

std::string cache_size_report(const CacheSizeSettings& s, bool article, bool json) {
  std::vector<std::pair<std::string, attention::KVCacheShape>> rows;
  if (article) {
    if (!s.checkpoint.path.empty()) throw ConfigError("article", "and {checkpoint} exclude each other");
    attention::parse_cache_dtype(s.dtype, "{dtype}");
    rows = article_cache_shapes();
  } else {
    rows.emplace_back("", cache_shape(s));
  }
  std::vector<attention::KVCacheSize> sizes;
  for (const auto& row : rows) sizes.push_back(attention::kv_cache_bytes(row.second));
  auto as_json = [](const attention::KVCacheSize& z) {
    return nlohmann::json{{"key_bytes", z.key_bytes}, {"value_bytes", z.value_bytes}, {"total_bytes", z.total_bytes}};
  };
  if (json && !article) return as_json(sizes.front()).dump() + "\n";
  if (json) {
    auto list = nlohmann::json::array();
    for (size_t i = 0; i < rows.size(); ++i) {
      auto row = as_json(sizes[i]);
      row["setting"] = rows[i].first;
      list.push_back(row);
    }
    return list.dump(2) + "\n";
  }
  char line[256];
  std::string text;
  if (article) {
    // Decimal GB, as the article counts.
    std::snprintf(line, sizeof line, "%-64s %12s %12s %9s\n", "", "keys", "keys+values", "of first");
    text += line;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::snprintf(line, sizeof line, "%-64s %9.3f GB %9.3f GB %8.4fx\n", rows[i].first.c_str(),
                    sizes[i].key_bytes / 1e9, sizes[i].total_bytes / 1e9,
                    static_cast<double>(sizes[i].total_bytes) / static_cast<double>(sizes[0].total_bytes));
      text += line;
    }
    return text;
  }
  for (const auto& [what, bytes] : {std::pair<const char*, int64_t>{"key cache", sizes[0].key_bytes},
                                    {"value cache", sizes[0].value_bytes},
                                    {"total", sizes[0].total_bytes}}) {
    std::snprintf(line, sizeof line, "%-12s %20lld bytes  (%s)\n", what, static_cast<long long>(bytes),
                  binary_size(bytes).c_str());
    text += line;
  }
  return text;
}

}  // namespace qkv::tasks
