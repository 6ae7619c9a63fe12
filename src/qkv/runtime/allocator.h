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

// glibc's malloc, which a Python process that imports qkv runs on, serves a
// block above its mmap threshold (which grows to at most 32 MiB) with a
// mapping of its own and unmaps it on free: a training step that allocates
// large activations faults their pages in again every step (VN-DGCNN's and
// VNT-Net's steps 1.17x and 1.18x the C++ step on jemalloc; docs/python.md).
// keep = true makes glibc keep freed memory for reuse, as qkv's jemalloc
// configuration does: every block from its heaps (no per-block mappings), a
// free heap top trimmed only above 2 GiB. keep = false puts back glibc's default thresholds
// (fixed at their start values: glibc cannot be made dynamic again).
// Returns false, changing nothing, where jemalloc serves malloc (qkv's
// executables, or Python with it preloaded). Process-wide.
bool keep_freed_memory_in_glibc(bool keep);

// Hands the freed memory glibc's malloc keeps back to the system
// (malloc_trim); the bytes of resident memory that went. 0 under jemalloc
// (release_cached_memory_above is its counterpart).
size_t release_glibc_free_memory();

// This process's resident set size in bytes (/proc/self/statm), 0 if unknown.
size_t resident_set_bytes();

}  // namespace qkv
