// The one-pass edge features against the composed LibTorch version: the same
// values, and the same gradients (which autograd derives for the composed
// version), with and without the cross product; plus central differences.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/vn/vn_ops.h"
#include "support/gradcheck.h"
#include "support/tolerance.h"

namespace qkv::testing {
namespace {

TEST(EdgeFeatures, ForwardAndGradientEqualTheComposedVersion) {
  torch::manual_seed(8);
  for (const bool cross : {false, true}) {
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      const auto x0 = torch::randn({2, 5, 3, 40}, dtype);
      const auto idx = vn::knn_indices(x0.reshape({2, 15, 40}), 6);
      auto x = x0.clone().requires_grad_(), xr = x0.clone().requires_grad_();
      const auto fast = vn::edge_features(x, idx, cross), ref = vn::edge_features_composed(xr, idx, cross);
      ASSERT_EQ(fast.sizes(), ref.sizes());
      // Equal to the bit but for the cross product, which LibTorch's
      // vectorised kernel may round differently (fused multiply-add).
      const double tol = dtype == torch::kDouble ? 1e-12 : 1e-5;
      if (cross)
        EXPECT_LT(precision_difference(fast, ref), tol) << dtype;
      else
        EXPECT_TRUE(torch::equal(fast, ref)) << dtype;
      const auto up = torch::randn_like(ref);
      (fast * up).sum().backward();
      (ref * up).sum().backward();
      EXPECT_LT(precision_difference(x.grad(), xr.grad()), tol) << "cross " << cross << " " << dtype;
    }
  }
}

TEST(EdgeFeatures, GradientMatchesCentralDifferences) {
  torch::manual_seed(9);
  const auto x0 = torch::randn({1, 2, 3, 7}, torch::kDouble);
  const auto idx = torch::randint(7, {1, 7, 3}, torch::kLong);  // repeated neighbours too
  const auto f = [&](const std::vector<at::Tensor>& in) { return vn::edge_features(in[0], idx, true); };
  EXPECT_LT(max_gradient_error(f, {x0}), 1e-6);
}

TEST(EdgeFeatures, RejectsIndicesOutsideTheCloud) {
  const auto x = torch::zeros({1, 2, 3, 5});
  EXPECT_THROW(vn::edge_features(x, torch::full({1, 5, 2}, 5, torch::kLong), false), UsageError);
  EXPECT_THROW(vn::edge_features(x, torch::full({1, 5, 2}, -1, torch::kLong), false), UsageError);
}

}  // namespace
}  // namespace qkv::testing
