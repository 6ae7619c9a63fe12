// knn_indices against brute force: every distance computed directly, pairs
// sorted by (distance, index), the point itself first. Points on a small integer grid make every
// distance exact in float32 and float64 and give many ties, so the index
// order of equal distances is checked too.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "qkv/core/errors.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::testing {
namespace {

at::Tensor brute_force_knn(const at::Tensor& features, int64_t k) {
  const auto f = features.to(torch::kDouble);
  const int64_t b = f.size(0), n = f.size(2);
  auto out = torch::empty({b, n, k}, torch::kLong);
  for (int64_t i = 0; i < b; ++i) {
    const auto d = (f[i].unsqueeze(2) - f[i].unsqueeze(1)).pow(2).sum(0).contiguous();  // [N, N]
    const auto* dp = d.data_ptr<double>();
    for (int64_t q = 0; q < n; ++q) {
      std::vector<std::pair<double, int64_t>> row;
      for (int64_t j = 0; j < n; ++j) row.emplace_back(j == q ? -1.0 : dp[q * n + j], j);  // itself first
      std::sort(row.begin(), row.end());
      for (int64_t r = 0; r < k; ++r) out[i][q][r] = row[static_cast<size_t>(r)].second;
    }
  }
  return out;
}

void expect_brute_force(int64_t b, int64_t d, int64_t n, int64_t k, c10::ScalarType dtype) {
  torch::manual_seed(n + d);
  const auto grid = torch::randint(-3, 4, {b, d, n}).to(dtype);  // many equal distances
  const auto got = vn::knn_indices(grid, k);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{b, n, k}));
  EXPECT_TRUE(torch::equal(got, brute_force_knn(grid, k))) << "b " << b << " d " << d << " n " << n << " k " << k;
}

TEST(KnnIndices, EqualsBruteForceWithTiesByIndex) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    expect_brute_force(2, 3, 50, 7, dtype);     // points
    expect_brute_force(3, 12, 300, 20, dtype);  // C x 3 features (C = 4)
    expect_brute_force(1, 3, 600, 1, dtype);    // k = 1
    expect_brute_force(2, 3, 9, 9, dtype);      // k = N
  }
  // Past 2,048 points a cloud's queries come in blocks (2,600: 1,613 + 987).
  expect_brute_force(1, 12, 2600, 5, torch::kFloat);
}

TEST(KnnIndices, ThePointItselfComesFirstEvenAmongItsDuplicates) {
  // Every point the same: its duplicates tie with it at distance 0, and the
  // one of lowest index came first. Both paths (xyz, and the GEMM of wide features).
  for (const int64_t d : {3, 12}) {
    const auto same = torch::ones({1, d, 6});
    const auto got = vn::knn_indices(same, 3);
    for (int64_t q = 0; q < 6; ++q) {
      EXPECT_EQ(got[0][q][0].item<int64_t>(), q) << "d " << d;
      EXPECT_EQ(got[0][q][1].item<int64_t>(), q == 0 ? 1 : 0) << "d " << d;  // then the others by index
    }
  }
}

TEST(KnnIndices, ContinuousPointsMatchBruteForce) {
  torch::manual_seed(4);
  const auto x = torch::randn({2, 6, 700}, torch::kDouble);
  EXPECT_TRUE(torch::equal(vn::knn_indices(x, 16), brute_force_knn(x, 16)));
  // Nearest first: each point is its own nearest neighbour.
  EXPECT_TRUE(torch::equal(vn::knn_indices(x, 16).select(2, 0), torch::arange(700).expand({2, 700})));
}

TEST(KnnIndices, APointThatIsNotANumberRanksAfterEveryOther) {
  // NaN compares false with every distance: among a row's first k it once
  // stopped every later point from entering, the point itself included.
  // Ranked as infinitely far, it leaves the finite points' neighbours as
  // they are without it (both paths: xyz rows, the GEMM of wide features;
  // 1,100 points: the k-d tree's size, which gives a cloud with NaN to them).
  for (const int64_t d : {int64_t{3}, int64_t{12}})
    for (const int64_t n : {int64_t{20}, int64_t{1100}}) {
      torch::manual_seed(d + n);
      auto x = torch::randn({1, d, n});
      for (const int64_t bad : {int64_t{1}, n - 1}) x[0][0][bad] = std::numeric_limits<float>::quiet_NaN();
      const int64_t k = 4;
      const auto got = vn::knn_indices(x, k);
      auto finite = torch::ones({n}, torch::kBool);
      finite[1] = false, finite[n - 1] = false;
      const auto kept = torch::nonzero(finite).squeeze(1);  // old index of each finite point
      const auto without = vn::knn_indices(x.index_select(2, kept), k);
      EXPECT_TRUE(torch::equal(got[0].index_select(0, kept), kept.index_select(0, without[0].flatten()).view({-1, k})))
          << "d " << d << " n " << n;
      // The NaN point's own row: itself, then the others by index.
      EXPECT_EQ(got[0][1][0].item<int64_t>(), 1);
      EXPECT_EQ(got[0][1][1].item<int64_t>(), 0);
    }
}

TEST(KnnIndices, RejectsBadInput) {
  EXPECT_THROW(vn::knn_indices(torch::zeros({3, 10}), 2), UsageError);
  EXPECT_THROW(vn::knn_indices(torch::zeros({1, 3, 10}), 0), UsageError);
  EXPECT_THROW(vn::knn_indices(torch::zeros({1, 3, 4}), 5), DataError);
}

}  // namespace
}  // namespace qkv::testing
