#pragma once
// Differences for the suite's float comparisons (docs/testing.md has the rule
// and the audit). Float64 results keep tight absolute bounds: their rounding
// is far below them on any CPU. Float32 results are bounded relative to the
// reference's scale: BLAS and LibTorch's vectorised kernels sum in a
// different order on different CPUs (8 or 16 lanes, FMA or not), so the same
// correct code differs between machines by a few units in the last place of
// its largest terms: an absolute amount that grows with the values (a
// gradient whose largest entry is 487 moved by 3.2e-3 from an AVX2 CPU to an
// AVX-512 one: 6.6e-6 of its scale).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace qkv::testing {

// difference / max(1, |scale|). Below 1 the bound stays absolute: near zero a
// relative one would ask for more than float rounding gives. A NaN (or a
// scale that is not finite) is +inf, so that it fails every bound.
inline double relative_to_scale(double difference, double scale) {
  if (std::isnan(difference) || !std::isfinite(scale)) return std::numeric_limits<double>::infinity();
  return difference / std::max(1.0, std::abs(scale));
}

// Standard-normal entries, float64 unless said: the numeric tests' inputs.
inline at::Tensor rnd(std::vector<int64_t> shape, at::ScalarType dtype = at::kDouble) {
  return at::randn(shape, at::TensorOptions().dtype(dtype));
}

// max |actual - expected|, in double whatever the tensors' dtype. Shapes must
// match (broadcasting would hide a wrong shape); empty tensors differ by 0. A
// NaN or infinity in either is +inf: inf - inf is NaN, so non-finite entries
// cannot be compared this way (compare masked entries with torch::equal).
inline double max_abs_difference(const at::Tensor& actual, const at::Tensor& expected) {
  TORCH_CHECK(actual.sizes() == expected.sizes(), "compared tensors differ in shape: ", actual.sizes(), " vs ",
              expected.sizes());
  if (expected.numel() == 0) return 0.0;
  const auto a = actual.detach().to(at::kDouble), e = expected.detach().to(at::kDouble);
  if (!at::isfinite(a).all().item<bool>() || !at::isfinite(e).all().item<bool>())
    return std::numeric_limits<double>::infinity();
  return (a - e).abs().max().item<double>();
}

// max |actual - expected| / max(1, max |expected|): the float32 form.
inline double scaled_difference(const at::Tensor& actual, const at::Tensor& expected) {
  const double difference = max_abs_difference(actual, expected);
  if (expected.numel() == 0 || std::isinf(difference)) return difference;
  return relative_to_scale(difference, expected.detach().abs().max().item<double>());
}

// The rule in one call, for a test that runs the same comparison in both
// precisions: absolute for a float64 reference, scaled for anything narrower.
inline double precision_difference(const at::Tensor& actual, const at::Tensor& expected) {
  return expected.scalar_type() == at::kDouble ? max_abs_difference(actual, expected)
                                               : scaled_difference(actual, expected);
}

}  // namespace qkv::testing
