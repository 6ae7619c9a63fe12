#pragma once
// The process allocator (jemalloc, configured in malloc_conf.c to keep freed
// pages for reuse, which is what makes a training step fast) and the one
// place that hands cached pages back to the system, so that a long run's
// memory stays bounded.
#include <cstddef>
#include <cstdint>

namespace qkv {

struct AllocatorStats {
  bool available = false;  // false without jemalloc (sanitizer builds): nothing to report or release
  size_t allocated = 0;    // bytes the program holds
  size_t active = 0;       // bytes in pages with live allocations
  size_t resident = 0;     // bytes of the allocator's pages in memory (its part of RSS)
};

AllocatorStats allocator_stats();

// When the allocator keeps more than `bound` bytes of freed pages (resident
// but not active), returns them to the system; returns the bytes released
// (0 when under the bound or without jemalloc). Called between epochs: a
// step's activations are reused within the epoch, and the cost of faulting
// them in again is paid once per epoch, not once per step.
size_t release_cached_memory_above(size_t bound);

// The bound the trainer uses between epochs (our choice: 64 MiB). The
// environment variable QKV_CACHED_MEMORY_MB overrides it.
size_t cached_memory_bound();

// This process's resident set size in bytes (/proc/self/statm), 0 if unknown.
size_t resident_set_bytes();

}  // namespace qkv
