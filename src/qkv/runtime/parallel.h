#pragma once
// Tasks of unequal cost on ATen's intra-op threads. at::parallel_for (OpenMP
// in this build) gives each thread one contiguous chunk of a range, which
// balances work that splits evenly; when tasks cost very different amounts
// (causal attention blocks, a cohort's volumes) parallel_tasks balances
// better: at::parallel_for starts the workers and each takes the next task
// from a shared counter until none is left.
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace qkv {

// How many workers parallel_tasks should start for `tasks` tasks: ATen's
// thread count, at most `wanted` when wanted > 0, at most `tasks`, at least 1;
// 1 inside a parallel region (at::parallel_for runs nested work on one thread).
inline int64_t parallel_workers(int64_t tasks, int64_t wanted) {
  int64_t n = at::in_parallel_region() ? 1 : at::get_num_threads();
  if (wanted > 0) n = std::min(n, wanted);
  return std::max<int64_t>(1, std::min(n, tasks));
}

// Runs fn(worker, task) once for every task in [0, tasks), worker in
// [0, workers), and returns when all have run. A worker runs its tasks one
// after another (per-worker scratch needs no lock); worker 0 is the calling
// thread. Which worker runs which task varies from run to run. After the
// first exception no further task starts, and it is rethrown once every
// worker has finished its current task.
template <typename Fn>
void parallel_tasks(int64_t tasks, int64_t workers, const Fn& fn) {
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::max<int64_t>(1, workers), 1, [&](int64_t first, int64_t last) {
    for (int64_t worker = first; worker < last; ++worker)
      for (int64_t task = next++; task < tasks; task = next++) {
        try {
          fn(worker, task);
        } catch (...) {
          next = tasks;
          throw;
        }
      }
  });
}

}  // namespace qkv
