// VN multi-head projections straight into the attention core's rows and back:
// values and gradients equal the composed versions (vn_linear, view, permute)
// in float64 and float32, with one worker and several, and bad shapes are
// usage errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/vn/vn_heads.h"
#include "support/tolerance.h"

using namespace qkv;
using namespace qkv::vn;

namespace {

// f(a, w) and its gradients for the upstream gradient `up`, as {value, da, dw}.
template <typename Fn>
std::vector<at::Tensor> value_and_grads(const Fn& f, const at::Tensor& a, const at::Tensor& w, const at::Tensor& up) {
  const auto a_leaf = a.clone().requires_grad_(), w_leaf = w.clone().requires_grad_();
  const auto out = f(a_leaf, w_leaf);
  (out * up).sum().backward();
  return {out.detach(), a_leaf.grad(), w_leaf.grad()};
}

void expect_close(const std::vector<at::Tensor>& fused, const std::vector<at::Tensor>& composed, double tol) {
  const char* names[] = {"value", "input gradient", "weight gradient"};
  for (size_t i = 0; i < fused.size(); ++i) {
    ASSERT_EQ(fused[i].sizes(), composed[i].sizes()) << names[i];
    EXPECT_LE(qkv::testing::precision_difference(fused[i], composed[i]), tol) << names[i];
  }
}

}  // namespace

TEST(VNHeads, SplitAndMergeEqualTheComposedVersions) {
  struct Case {
    int64_t b, c, n, heads, d, c_out;
  };
  // The second case is large enough (> 4 MFLOP) for several workers and their
  // summed weight-gradient buffers.
  for (const Case s : {Case{2, 5, 7, 3, 4, 6}, Case{4, 16, 300, 6, 8, 16}})
    for (const auto dtype : {torch::kDouble, torch::kFloat})
      for (const int threads : {1, 2}) {
        SCOPED_TRACE("N " + std::to_string(s.n) + (dtype == torch::kDouble ? " float64" : " float32") + ", " +
                     std::to_string(threads) + " thread(s)");
        const int saved = at::get_num_threads();
        at::set_num_threads(threads);
        torch::manual_seed(11);
        const auto opts = torch::TensorOptions().dtype(dtype);
        const double tol = dtype == torch::kDouble ? 1e-12 : 2e-4;
        const auto x = torch::randn({s.b, s.c, 3, s.n}, opts), w = torch::randn({s.heads * s.d, s.c}, opts);
        const auto up_rows = torch::randn({s.b, s.heads, s.n, 3 * s.d}, opts);
        auto split = [&](const at::Tensor& a, const at::Tensor& wt) { return vn_heads_split(a, wt, s.heads); };
        auto split_ref = [&](const at::Tensor& a, const at::Tensor& wt) {
          return vn_heads_split_composed(a, wt, s.heads);
        };
        expect_close(value_and_grads(split, x, w, up_rows), value_and_grads(split_ref, x, w, up_rows), tol);
        const auto rows = torch::randn({s.b, s.heads, s.n, 3 * s.d}, opts);
        const auto wo = torch::randn({s.c_out, s.heads * s.d}, opts);
        const auto up = torch::randn({s.b, s.c_out, 3, s.n}, opts);
        expect_close(value_and_grads(vn_heads_merge, rows, wo, up),
                     value_and_grads(vn_heads_merge_composed, rows, wo, up), tol);
        at::set_num_threads(saved);
      }
  // The axis-major rows, entry by entry: row[i*d + j] is channel j along axis i.
  const auto x = torch::randn({1, 2, 3, 4}, torch::kDouble), w = torch::randn({6, 2}, torch::kDouble);
  const auto rows = vn_heads_split(x, w, 2);  // 2 heads of d = 3
  const int64_t h = 1, n = 2, i = 1, j = 2;
  const double expected = (w[h * 3 + j] * x[0].select(1, i).select(1, n)).sum().item<double>();
  EXPECT_NEAR(rows[0][h][n][i * 3 + j].item<double>(), expected, 1e-14);
}

TEST(VNHeads, BadShapesAreUsageErrors) {
  EXPECT_THROW(vn_heads_split(torch::randn({1, 4, 3, 5}), torch::randn({6, 3}), 2), UsageError);  // C 4 vs 3
  EXPECT_THROW(vn_heads_split(torch::randn({1, 4, 3, 5}), torch::randn({7, 4}), 2), UsageError);  // 7 rows, 2 heads
  EXPECT_THROW(vn_heads_split(torch::randn({1, 4, 3, 5}), torch::randn({6, 4}), 0), UsageError);
  EXPECT_THROW(vn_heads_split(torch::randn({1, 4, 2, 5}), torch::randn({6, 4}), 2), UsageError);  // not 3-vectors
  EXPECT_THROW(vn_heads_merge(torch::randn({1, 2, 5, 7}), torch::randn({4, 4})), UsageError);     // 7 not 3d
  EXPECT_THROW(vn_heads_merge(torch::randn({1, 2, 5, 6}), torch::randn({4, 5})), UsageError);     // H*d = 4
  EXPECT_THROW(vn_attention_rows(torch::randn({1, 2, 8, 9}), torch::randn({1, 2, 8, 9}), torch::randn({1, 2, 8, 9}), 4),
               UsageError);
}
