#pragma once
// The machine's roofs as the benches measure them (bench_attention's ceiling,
// bench_pointcloud's rescaled roofline limits): sgemm's rate and memcpy's
// bandwidth on the calling thread count. Header-only: each bench is its own
// executable.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace qkv::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// at::mm_out on 2048^3 float32 (BLAS on its current thread count), GFLOP/s:
// the best of at least min_runs runs after a warm-up, and of more (up to 50)
// until min_seconds have been timed.
inline double sgemm_gflops(int min_runs, double min_seconds) {
  at::Tensor a = at::randn({2048, 2048}), b = at::randn({2048, 2048}), c = at::empty({2048, 2048});
  at::mm_out(c, a, b);
  double best = 1e30, total = 0;
  for (int r = 0; r < min_runs || (total < min_seconds && r < 50); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    const double t = seconds_since(t0);
    total += t;
    best = std::min(best, t);
  }
  return 2.0 * 2048 * 2048 * 2048 / best / 1e9;
}

// memcpy of 256 MiB a thread on `threads` threads at once, GB/s of read +
// write bytes, best of 5 (the buffers are touched before timing).
inline double copy_gbs(int threads) {
  const size_t per_thread = size_t(256) << 20, n = per_thread * static_cast<size_t>(threads);
  std::vector<char> from(n, 1), to(n, 2);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> copies;
    for (int t = 0; t < threads; ++t)
      copies.emplace_back(
          [&, t] { std::memcpy(to.data() + t * per_thread, from.data() + t * per_thread, per_thread); });
    for (auto& c : copies) c.join();
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * static_cast<double>(n) / best / 1e9;
}

}  // namespace qkv::bench
