#pragma once
// Point clouds whose distances tie, for the kNN and FPS kernels' tie rules.
#include <torch/torch.h>

#include <cstdint>

namespace qkv::testing {

// [b, dims, n] of the given dtype: points on a coarse grid (multiples of
// 1/4, exact in float32 and float64 alike) and exact duplicates (the n/8
// points from n/2 on repeat the first n/8), so that equal distances occur.
inline at::Tensor clouds_with_ties(int64_t b, int64_t n, int64_t dims, torch::Dtype dtype, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randint(-6, 7, {b, dims, n}, gen, torch::kDouble) / 4.0;
  x.narrow(2, n / 2, n / 8).copy_(x.narrow(2, 0, n / 8));
  return x.to(dtype);
}

}  // namespace qkv::testing
