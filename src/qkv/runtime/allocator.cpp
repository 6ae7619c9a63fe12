#include "qkv/runtime/allocator.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

// jemalloc's control interface, declared weak: a build without jemalloc (the
// sanitizers replace malloc) links, and the functions below do nothing.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) __attribute__((weak));

namespace qkv {

namespace {

size_t read_size_stat(const char* name) {
  size_t value = 0, length = sizeof(value);
  return mallctl(name, &value, &length, nullptr, 0) == 0 ? value : 0;
}

}  // namespace

AllocatorStats allocator_stats() {
  AllocatorStats s;
  if (!mallctl) return s;
  // Statistics are a snapshot taken when "epoch" is written.
  uint64_t epoch = 1;
  size_t length = sizeof(epoch);
  if (mallctl("epoch", &epoch, &length, &epoch, length) != 0) return s;
  s.available = true;
  s.allocated = read_size_stat("stats.allocated");
  s.active = read_size_stat("stats.active");
  s.resident = read_size_stat("stats.resident");
  return s;
}

size_t release_cached_memory_above(size_t bound) {
  const auto before = allocator_stats();
  if (!before.available || before.resident <= before.active + bound) return 0;
  // "arena.<MALLCTL_ARENAS_ALL>.purge": every arena's unused dirty and muzzy
  // pages go back to the system now (MALLCTL_ARENAS_ALL is 4096).
  if (mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) != 0) return 0;
  const auto after = allocator_stats();
  return before.resident > after.resident ? before.resident - after.resident : 0;
}

size_t cached_memory_bound() {
  static const size_t bound = [] {
    size_t mb = 64;
    if (const char* env = std::getenv("QKV_CACHED_MEMORY_MB")) {
      char* end = nullptr;
      const long long v = std::strtoll(env, &end, 10);
      if (end != env && *end == '\0' && v >= 0) mb = static_cast<size_t>(v);
    }
    return mb * 1024 * 1024;
  }();
  return bound;
}

bool keep_freed_memory_in_glibc(bool keep) {
  if (mallctl) return false;
  // glibc's defaults: mmap above 128 KiB, at most 65,536 mappings, trim a
  // free top above 128 KiB. Kept: no mappings, and a free top trimmed only
  // above 2 GiB (mallopt takes an int).
  constexpr int kDefaultThreshold = 128 * 1024, kDefaultMappings = 65536;
  const bool ok = mallopt(M_MMAP_MAX, keep ? 0 : kDefaultMappings) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, keep ? std::numeric_limits<int>::max() : kDefaultThreshold) == 1 &&
                  (keep || mallopt(M_MMAP_THRESHOLD, kDefaultThreshold) == 1);
  return ok;
}

size_t release_glibc_free_memory() {
  if (mallctl) return 0;
  const size_t before = resident_set_bytes();
  malloc_trim(0);
  const size_t after = resident_set_bytes();
  return before > after ? before - after : 0;
}

size_t resident_set_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long total = 0, resident = 0;
  const int read = std::fscanf(f, "%llu %llu", &total, &resident);
  std::fclose(f);
  return read == 2 ? static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace qkv
