#pragma once
// SplitMix64 (Steele, Lea & Flood, 2014): the seed mixer behind every
// reproducible stream of qkv (point sampling, the synthetic shapes and
// cohort). Integer arithmetic alone, so a seed gives the same numbers on
// every platform, which the standard library's engines seeded through
// std::seed_seq and its distributions do not promise.
#include <cstdint>

namespace qkv {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The generator's output for the state before `z` (state z + gamma, mixed):
// a bijection of 64 bits, so distinct inputs never collide.
constexpr uint64_t splitmix64(uint64_t z) {
  z += kSplitMix64Gamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The next number of the sequence whose state is `state`, which it advances.
inline uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t out = splitmix64(state);
  state += kSplitMix64Gamma;
  return out;
}

}  // namespace qkv
