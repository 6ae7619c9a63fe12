#include "qkv/data/folds.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "qkv/core/errors.h"

namespace qkv::data {
namespace {

// Uniform in [0, bound) by rejection (no modulo bias), from the engine's raw
// 64-bit output, which the standard fixes exactly, unlike its distributions.
uint64_t below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % bound;
}

void shuffle(std::vector<int64_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(rng, i)]);
}

// SplitMix64's finaliser: nearby (run, fold) pairs get unrelated seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Class label -> its members, in ascending label order (std::map) so the
// shuffle order, and therefore the folds, depend only on the data and seed.
std::map<int64_t, std::vector<int64_t>> by_class(const std::vector<int64_t>& indices,
                                                 const std::vector<int64_t>& labels) {
  std::map<int64_t, std::vector<int64_t>> classes;
  for (int64_t i : indices) classes[labels[static_cast<size_t>(i)]].push_back(i);
  return classes;
}

}  // namespace

std::vector<std::vector<int64_t>> stratified_kfold(const std::vector<int64_t>& labels, int64_t k, uint64_t seed) {
  if (k < 2) throw ConfigError("folds", "must be at least 2, got " + std::to_string(k));
  if (labels.empty()) throw DataError("stratified k-fold: no subjects");
  std::vector<int64_t> all(labels.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  auto classes = by_class(all, labels);
  for (const auto& [label, members] : classes)
    if (static_cast<int64_t>(members.size()) < k)
      throw DataError("class " + std::to_string(label) + " has " + std::to_string(members.size()) +
                      " subjects, fewer than --folds " + std::to_string(k));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> folds(static_cast<size_t>(k));
  size_t next = 0;
  for (auto& [label, members] : classes) {
    shuffle(members, rng);
    for (int64_t i : members) {
      folds[next].push_back(i);
      next = (next + 1) % folds.size();
    }
  }
  for (auto& f : folds) std::sort(f.begin(), f.end());
  return folds;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> stratified_split(const std::vector<int64_t>& indices,
                                                                       const std::vector<int64_t>& labels,
                                                                       double fraction, uint64_t seed) {
  if (!(fraction >= 0 && fraction < 1)) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", fraction);
    throw ConfigError("val_fraction", std::string("must be in [0, 1), got ") + shown);
  }
  std::vector<int64_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= static_cast<int64_t>(labels.size()))
      throw DataError("stratified split: index " + std::to_string(sorted[i]) + " is outside the " +
                      std::to_string(labels.size()) + " labels");
    if (i > 0 && sorted[i] == sorted[i - 1])
      throw DataError("stratified split: index " + std::to_string(sorted[i]) + " appears twice");
  }
  std::mt19937_64 rng(seed);
  std::vector<int64_t> first, second;
  for (auto& [label, members] : by_class(sorted, labels)) {
    const auto n = static_cast<int64_t>(members.size());
    auto take = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
    if (fraction > 0 && n >= 2) take = std::max<int64_t>(take, 1);
    take = std::min<int64_t>(take, n - 1);
    shuffle(members, rng);
    second.insert(second.end(), members.begin(), members.begin() + take);
    first.insert(first.end(), members.begin() + take, members.end());
  }
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  return {std::move(first), std::move(second)};
}

std::vector<CVFold> repeated_stratified_folds(const std::vector<int64_t>& labels, int64_t runs, int64_t k,
                                              double val_fraction, uint64_t seed) {
  if (runs < 1) throw ConfigError("runs", "must be at least 1, got " + std::to_string(runs));
  std::vector<CVFold> out;
  for (int64_t r = 0; r < runs; ++r) {
    const uint64_t run_seed = seed + static_cast<uint64_t>(r);
    const auto tests = stratified_kfold(labels, k, run_seed);
    for (int64_t f = 0; f < k; ++f) {
      std::vector<int64_t> rest;
      for (int64_t g = 0; g < k; ++g)
        if (g != f) rest.insert(rest.end(), tests[static_cast<size_t>(g)].begin(), tests[static_cast<size_t>(g)].end());
      CVFold fold;
      fold.run = r;
      fold.fold = f;
      fold.test = tests[static_cast<size_t>(f)];
      std::tie(fold.train, fold.val) =
          stratified_split(rest, labels, val_fraction, mix(mix(run_seed) ^ static_cast<uint64_t>(f)));
      out.push_back(std::move(fold));
    }
  }
  return out;
}

}  // namespace qkv::data
