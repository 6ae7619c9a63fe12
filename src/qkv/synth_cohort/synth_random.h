#pragma once
// The synthetic cohort's random numbers: xoshiro256** and the distributions
// drawn from it. Internal to write_synth_cohort (qkv/synth_cohort/synth_cohort.h is
// the public face and documents the model).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "qkv/core/splitmix64.h"

namespace qkv::medical::synth {

// xoshiro256** seeded through splitmix64, with its own distributions: the
// standard library's are implementation-defined, and the files must be the
// same on every platform for a seed.

// Streams, so that adding a draw to one purpose does not shift another's.
enum class Stream : uint64_t { kCohort = 1, kSubject, kVolume, kSites, kMethylation, kCrossModal };

class Rng {
 public:
  Rng(uint64_t seed, Stream stream, uint64_t index) {
    uint64_t x = seed;
    x = splitmix64_next(x) ^ static_cast<uint64_t>(stream);
    x = splitmix64_next(x) ^ index;
    for (auto& s : s_) s = splitmix64_next(x);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // [0, 1)
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  bool bernoulli(double p) { return uniform() < p; }
  // Unbiased integer in [0, n) by rejection.
  uint64_t below(uint64_t n) {
    const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
    uint64_t r;
    do r = next();
    while (r >= limit);
    return r % n;
  }
  // Marsaglia's polar method; the second value is kept for the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2 * uniform() - 1;
      v = 2 * uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    const double f = std::sqrt(-2 * std::log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }
  double normal(double mean, double sd) { return mean + sd * normal(); }
  double lognormal_factor(double sd_log) { return std::exp(sd_log * normal()); }
  // Knuth's product method for the small means of SPECT voxels; a rounded
  // normal above 30, where the two are indistinguishable at this noise level.
  int64_t poisson(double lambda) {
    if (lambda <= 0) return 0;
    if (lambda >= 30) return std::max<int64_t>(0, std::llround(lambda + std::sqrt(lambda) * normal()));
    const double limit = std::exp(-lambda);
    int64_t k = 0;
    double p = uniform();
    while (p > limit) {
      ++k;
      p *= uniform();
    }
    return k;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  double spare_ = 0;
};

inline double logit(double p) { return std::log(p / (1 - p)); }
inline double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace qkv::medical::synth
