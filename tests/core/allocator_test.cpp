// The allocator keeps freed pages for the next training step (fast) and hands
// them back above a bound between epochs (bounded): both halves measured.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "qkv/runtime/allocator.h"

TEST(Allocator, CachedPagesAboveTheBoundGoBackToTheSystem) {
  if (!qkv::allocator_stats().available) GTEST_SKIP() << "built without jemalloc (sanitizers)";
  constexpr size_t kMiB = 1024 * 1024;
  const size_t rss_before = qkv::resident_set_bytes();
  {
    // 256 MiB in blocks of mixed sizes, touched (so resident) then freed: like
    // a step's activations.
    std::vector<void*> blocks;
    for (size_t i = 0; i < 64; ++i) {
      const size_t size = (2 + i % 5) * kMiB;
      void* p = std::malloc(size);
      ASSERT_NE(p, nullptr);
      std::memset(p, 1, size);
      blocks.push_back(p);
    }
    for (void* p : blocks) std::free(p);
  }
  const auto cached = qkv::allocator_stats();
  // malloc_conf.c keeps them: the next step reuses them without page faults.
  EXPECT_GT(cached.resident - cached.active, 200 * kMiB);
  EXPECT_GT(qkv::resident_set_bytes(), rss_before + 200 * kMiB);
  // Nothing is released while under the bound.
  EXPECT_EQ(qkv::release_cached_memory_above(1024 * kMiB), 0u);
  const size_t released = qkv::release_cached_memory_above(64 * kMiB);
  EXPECT_GT(released, 200 * kMiB);
  const auto after = qkv::allocator_stats();
  EXPECT_LT(after.resident - after.active, 64 * kMiB);
  EXPECT_LT(qkv::resident_set_bytes(), rss_before + 64 * kMiB);
}
