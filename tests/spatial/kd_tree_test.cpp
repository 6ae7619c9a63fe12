// The k-d tree's kNN, nearest point and farthest point sampling against
// naive references that compute every distance as the brute-force kernels
// do (in the points' own precision, x then y then z), on random clouds and
// on the degenerate ones a tree can get wrong: duplicates, one point
// repeated, all points on a plane or a line, one far outlier, an integer
// grid (every distance exact, ties everywhere). Equal means equal: the same
// indices, ties included, in float32 and float64.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/spatial/kd_tree.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::testing {
namespace {

// Squared distances of every point of a cloud [N, 3] to the points `to`
// [M, 3]: [M, N], by elementwise tensor ops (each rounds once, as the
// kernels' scalar code), in the cloud's dtype.
at::Tensor squared_distances(const at::Tensor& to, const at::Tensor& cloud) {
  const auto diff = cloud.unsqueeze(0) - to.unsqueeze(1);  // [M, N, 3]: point - query
  const auto sq = diff * diff;
  return (sq.select(2, 0) + sq.select(2, 1)) + sq.select(2, 2);
}

// kNN of one cloud [N, 3]: itself first, then by (distance, index).
at::Tensor naive_knn(const at::Tensor& cloud, int64_t k) {
  auto d = squared_distances(cloud, cloud);
  d.diagonal().fill_(-std::numeric_limits<double>::infinity());
  return std::get<1>(d.sort(/*stable=*/true, /*dim=*/1, /*descending=*/false)).slice(1, 0, k);
}

// FPS of one cloud [N, 3]: each pick the first index of the largest minimum distance.
at::Tensor naive_fps(const at::Tensor& cloud, int64_t m, int64_t start) {
  auto picks = torch::empty({m}, torch::kLong);
  auto nearest = torch::full({cloud.size(0)}, std::numeric_limits<double>::infinity(), cloud.options());
  int64_t current = start;
  for (int64_t i = 0; i < m; ++i) {
    picks[i] = current;
    nearest = torch::minimum(nearest, squared_distances(cloud.slice(0, current, current + 1), cloud)[0]);
    current = nearest.argmax().item<int64_t>();  // the first of equal maxima
  }
  return picks;
}

// Clouds [N, 3] that a spatial index can get wrong, by name.
std::vector<std::pair<std::string, at::Tensor>> hard_clouds(int64_t n, c10::ScalarType dtype) {
  torch::manual_seed(n);
  const auto random = torch::randn({n, 3}, torch::kDouble);
  auto duplicates = random.slice(0, 0, n / 8).repeat({8, 1});
  duplicates = duplicates.index_select(0, torch::randperm(n / 8 * 8));  // each point 8 times, spread over the indices
  auto plane = random.clone();
  plane.select(1, 2).fill_(0.5);
  auto line = random.clone();
  line.select(1, 1).fill_(-1), line.select(1, 2).copy_(line.select(1, 0) * 2);
  auto outlier = random.clone();
  outlier[n / 2] = torch::tensor({1e4, -3e3, 2e4}, torch::kDouble);
  std::vector<std::pair<std::string, at::Tensor>> clouds = {
      {"random", random},
      {"duplicates", duplicates},
      {"one point repeated", torch::full({n, 3}, 0.25, torch::kDouble)},
      {"plane", plane},
      {"line", line},
      {"far outlier", outlier},
      {"integer grid", torch::randint(-4, 5, {n, 3}).to(torch::kDouble)},
  };
  for (auto& [name, cloud] : clouds) cloud = cloud.to(dtype).contiguous();
  return clouds;
}

std::string dtype_name(c10::ScalarType dtype) { return dtype == torch::kFloat ? "float32" : "float64"; }

TEST(KdTree, KnnEqualsBruteForceOnHardClouds) {
  // 2,100 points: past the size where knn_indices takes the tree.
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const auto& [name, cloud] : hard_clouds(2100, dtype))
      for (const int64_t k : {1, 20}) {
        const auto got = vn::knn_indices(cloud.t().unsqueeze(0), k)[0];
        EXPECT_TRUE(torch::equal(got, naive_knn(cloud, k))) << name << ", " << dtype_name(dtype) << ", k " << k;
      }
}

TEST(KdTree, KnnOfEveryClusterSizeAndBatch) {
  // Directly on the tree: k = N (every point ranked), and a batch whose
  // clouds differ (each cloud its own tree).
  torch::manual_seed(3);
  const auto small = torch::randint(-2, 3, {40, 3}).to(torch::kFloat).contiguous();
  std::vector<int64_t> out(40 * 40);
  const auto* p = small.data_ptr<float>();
  spatial::KdTree<float>(p, p + 1, p + 2, 40, 3).nearest_of_members(40, out.data());
  EXPECT_TRUE(torch::equal(torch::tensor(out).view({40, 40}), naive_knn(small, 40)));

  const auto batch = torch::randn({3, 3, 2100}, torch::kDouble);
  const auto got = vn::knn_indices(batch, 12);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_TRUE(torch::equal(got[i], naive_knn(batch[i].t().contiguous(), 12))) << "cloud " << i;
}

TEST(KdTree, FarthestPointSampleEqualsExactFps) {
  // 5,000 points: past the size where farthest_point_sample takes the tree.
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const auto& [name, cloud] : hard_clouds(5000, dtype)) {
      const auto got = pointcloud::farthest_point_sample(cloud, 300, 17);
      EXPECT_TRUE(torch::equal(got, naive_fps(cloud, 300, 17))) << name << ", " << dtype_name(dtype);
    }
}

TEST(KdTree, FarthestPointSampleOfEveryPoint) {
  // m = N. Distinct points: each picked once. On a grid with duplicates,
  // once every position is picked all distances are 0 and the lowest index
  // wins every later pick, in the tree as in the exact FPS.
  const auto distinct = torch::rand({4200, 3}, torch::kDouble);
  const auto picks = pointcloud::farthest_point_sample(distinct, 4200, 9);
  EXPECT_TRUE(torch::equal(picks, naive_fps(distinct, 4200, 9)));
  EXPECT_EQ(std::get<0>(at::_unique(picks)).numel(), 4200);
  const auto grid = torch::randint(-3, 4, {4200, 3}).to(torch::kFloat).contiguous();
  EXPECT_TRUE(torch::equal(pointcloud::farthest_point_sample(grid, 4200, 0), naive_fps(grid, 4200, 0)));
}

TEST(KdTree, LargeCloudsEqualTheExhaustiveKernels) {
  // Scan-like sizes, against qkv's own exhaustive kernels (the naive
  // references above would hold N x N).
  torch::manual_seed(8);
  auto scan = torch::rand({12000, 3});
  scan.select(1, 2).mul_(0.01);  // a thin slab, as a scanned floor
  const auto features = scan.t().unsqueeze(0).contiguous();
  EXPECT_TRUE(torch::equal(vn::knn_indices(features, 16), vn::knn_indices_exhaustive(features, 16)));
  EXPECT_TRUE(torch::equal(pointcloud::farthest_point_sample(scan, 1000, 5),
                           pointcloud::farthest_point_sample_exhaustive(scan, 1000, 5)));
}

TEST(KdTree, NearestPointEqualsBruteForce) {
  for (const auto& [name, points] : hard_clouds(3000, torch::kDouble)) {
    const auto queries = torch::cat({torch::randn({500, 3}, torch::kDouble) * 3, points.slice(0, 0, 100)});
    const auto got = pointcloud::nearest_point_indices(queries, points);
    EXPECT_TRUE(torch::equal(got, squared_distances(queries, points).argmin(1))) << name;
  }
}

TEST(KdTree, NearestPointRefusesAPointThatIsNotFinite) {
  auto points = torch::randn({50, 3});
  points[7][1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(pointcloud::nearest_point_indices(torch::randn({4, 3}), points), UsageError);
}

}  // namespace
}  // namespace qkv::testing
