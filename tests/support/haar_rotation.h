#pragma once
// A Haar-random rotation from the QR of a Gaussian matrix (sign-fixed,
// det +1), for equivariance tests. Independent of the library's random_so3 on
// purpose: the tests must not share the code they check.
#include <torch/torch.h>

namespace qkv::testing {

inline at::Tensor haar_rotation(int64_t seed, torch::Dtype dtype = torch::kDouble) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto a = torch::randn({3, 3}, gen, torch::kDouble);
  auto [q, r] = torch::linalg_qr(a);
  q = q * torch::sign(torch::diagonal(r)).unsqueeze(0);
  if (torch::det(q).item<double>() < 0) q.select(1, 0).neg_();
  return q.to(dtype);
}

}  // namespace qkv::testing
