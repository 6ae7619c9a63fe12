// lm cache-size as a library function: the cache shape a model's sizes or a
// checkpoint describe, and each bad combination named by its key (the CLI
// says the flag; tests/lm/lm_cli_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "qkv/core/errors.h"
#include "qkv/tasks/lm_cache_size.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

using tasks::CacheSizeSettings;

std::string cache_shape_refusal_key(const CacheSizeSettings& s) {
  return config_error_key_of([&] { tasks::cache_shape(s); });
}

CacheSizeSettings small_cache_sizes() {
  CacheSizeSettings s;
  s.layers = 2;
  s.heads = 4;
  s.dk = s.dv = 8;
  s.seq = 10;
  return s;
}

TEST(LmCacheSize, ShapeFollowsTheSettingsAndCountsTheBytes) {
  auto s = small_cache_sizes();
  s.kv_heads = 2;
  s.dtype = "int8";
  const auto shape = tasks::cache_shape(s);
  EXPECT_EQ(shape.kv_heads, 2);
  EXPECT_EQ(shape.dtype, attention::CacheDtype::kInt8);
  // int8 in one block of 8 with a 2-byte scale: 10 bytes a head and position.
  EXPECT_EQ(attention::kv_cache_bytes(shape).key_bytes, 2 * 2 * 10 * 10);
  s = small_cache_sizes();
  s.dk = s.dv = 0;
  s.head_dim = 16;
  EXPECT_EQ(tasks::cache_shape(s).dv, 16);
}

TEST(LmCacheSize, EachBadCombinationNamesItsKey) {
  auto s = small_cache_sizes();
  s.head_dim = 8;
  EXPECT_EQ(cache_shape_refusal_key(s), "head_dim");
  s = small_cache_sizes();
  s.seq = 0;
  EXPECT_EQ(cache_shape_refusal_key(s), "seq");
  s = small_cache_sizes();
  s.kv_heads = 3;
  EXPECT_EQ(cache_shape_refusal_key(s), "kv_heads");
  s = small_cache_sizes();
  s.sinks = 2;
  EXPECT_EQ(cache_shape_refusal_key(s), "sinks");
  s = small_cache_sizes();
  s.layers = s.heads = 4294967296;
  s.dk = s.dv = s.seq = 1;
  EXPECT_EQ(cache_shape_refusal_key(s), "seq");  // more than 8 EiB: refused, not wrapped
}

TEST(LmCacheSize, TheArticleShrinksStepByStep) {
  const auto rows = tasks::article_cache_shapes();
  ASSERT_EQ(rows.size(), 6u);
  // 50 layers x 20 heads x 1000 x 5000 positions x 2 bytes = 10 GB of keys.
  EXPECT_EQ(attention::kv_cache_bytes(rows[0].second).key_bytes, 10000000000);
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_LT(attention::kv_cache_bytes(rows[i].second).total_bytes,
              attention::kv_cache_bytes(rows[i - 1].second).total_bytes)
        << rows[i].first;
}

}  // namespace
}  // namespace qkv::testing
