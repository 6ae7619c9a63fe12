// Point-cloud transforms; farthest point sampling against a brute-force reference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <set>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/pointcloud/transforms.h"

using namespace qkv;
using namespace qkv::pointcloud;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Recomputes every point's distance to every picked point at each step, with
// the same arithmetic (the difference squared in the points' own precision).
template <typename T>
std::vector<int64_t> brute_force_fps(const at::Tensor& cloud, int64_t m, int64_t start) {
  const auto c = cloud.contiguous();
  const T* p = c.data_ptr<T>();
  const int64_t n = c.size(0);
  std::vector<int64_t> picked = {start};
  while (static_cast<int64_t>(picked.size()) < m) {
    int64_t best = -1;
    T best_dist = -1;
    for (int64_t i = 0; i < n; ++i) {
      T nearest = std::numeric_limits<T>::infinity();
      for (int64_t j : picked) {
        const T dx = p[3 * i] - p[3 * j], dy = p[3 * i + 1] - p[3 * j + 1], dz = p[3 * i + 2] - p[3 * j + 2];
        nearest = std::min(nearest, dx * dx + dy * dy + dz * dz);
      }
      if (nearest > best_dist) {
        best_dist = nearest;
        best = i;
      }
    }
    picked.push_back(best);
  }
  return picked;
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  const auto c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

at::Generator generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

double max_magnitude(const at::Tensor& t) { return t.abs().max().item<double>(); }

}  // namespace

TEST(FarthestPointSample, MatchesBruteForceFloatAndDouble) {
  auto gen = generator(11);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (int64_t n : {1, 7, 200}) {
      const auto cloud = torch::randn({n, 3}, gen, dtype);
      for (int64_t start : {int64_t{0}, n / 2, n - 1}) {
        const int64_t m = std::min<int64_t>(n, 40);
        const auto got = to_vector(farthest_point_sample(cloud, m, start));
        const auto want =
            dtype == torch::kFloat ? brute_force_fps<float>(cloud, m, start) : brute_force_fps<double>(cloud, m, start);
        EXPECT_EQ(got, want) << "n " << n << " start " << start << " dtype " << dtype;
      }
    }
  }
}

TEST(FarthestPointSample, TiesGoToTheLowestIndex) {
  // A 4x4x4 integer grid with every point twice: distances tie all the time.
  std::vector<float> xyz;
  for (int rep = 0; rep < 2; ++rep)
    for (int i = 0; i < 64; ++i) xyz.insert(xyz.end(), {float(i % 4), float(i / 4 % 4), float(i / 16)});
  const auto cloud = torch::tensor(xyz).reshape({128, 3});
  for (int64_t start : {0, 5, 127}) {
    const auto got = to_vector(farthest_point_sample(cloud, 128, start));
    EXPECT_EQ(got, brute_force_fps<float>(cloud, 128, start));
    EXPECT_EQ(std::set<int64_t>(got.begin(), got.begin() + 64).size(), 64u);  // distinct while any is left
  }
  const auto corners = to_vector(farthest_point_sample(cloud, 2, 0));
  EXPECT_EQ(corners[1], 63);  // (3, 3, 3), not its twin 127
}

TEST(FarthestPointSample, BatchedEqualsOneByOne) {
  auto gen = generator(5);
  const auto batch = torch::rand({5, 300, 3}, gen, torch::kFloat);
  const auto together = farthest_point_sample(batch, 64, 3);
  ASSERT_EQ(together.sizes(), (std::vector<int64_t>{5, 64}));
  ASSERT_EQ(together.scalar_type(), torch::kLong);
  for (int64_t b = 0; b < 5; ++b) {
    EXPECT_TRUE(torch::equal(together[b], farthest_point_sample(batch[b], 64, 3)));
    EXPECT_EQ(to_vector(together[b]), brute_force_fps<float>(batch[b], 64, 3));
  }
  // A non-contiguous batch gives the same picks.
  const auto strided = batch.transpose(1, 2).contiguous().transpose(1, 2);
  EXPECT_TRUE(torch::equal(farthest_point_sample(strided, 64, 3), together));
}

TEST(FarthestPointSample, RandomStartAndErrors) {
  auto gen = generator(2);
  const auto batch = torch::rand({8, 100, 3}, gen, torch::kDouble);
  const auto a = farthest_point_sample_random_start(batch, 10, generator(9));
  const auto b = farthest_point_sample_random_start(batch, 10, generator(9));
  EXPECT_TRUE(torch::equal(a, b));
  const auto starts = to_vector(a.select(1, 0));
  EXPECT_GT(std::set<int64_t>(starts.begin(), starts.end()).size(), 1u);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_TRUE(torch::equal(a[i], farthest_point_sample(batch[i], 10, a[i][0].item<int64_t>())));
  EXPECT_THROW(farthest_point_sample(batch, 101, 0), UsageError);
  EXPECT_THROW(farthest_point_sample(batch, 10, 100), UsageError);
  EXPECT_EQ(farthest_point_sample(batch[0], 0, 0).numel(), 0);
}

TEST(RandomSubsample, DistinctIndicesSeeded) {
  const auto cloud = torch::rand({50, 3});
  const auto a = random_subsample(cloud, 20, generator(1));
  const auto v = to_vector(a);
  EXPECT_EQ(std::set<int64_t>(v.begin(), v.end()).size(), 20u);
  EXPECT_GE(a.min().item<int64_t>(), 0);
  EXPECT_LT(a.max().item<int64_t>(), 50);
  EXPECT_TRUE(torch::equal(a, random_subsample(cloud, 20, generator(1))));
  const auto batch = random_subsample(torch::rand({3, 50, 3}), 20, generator(1));
  EXPECT_EQ(batch.sizes(), (std::vector<int64_t>{3, 20}));
  const auto gathered = gather_points(torch::rand({3, 50, 3}), batch);
  EXPECT_EQ(gathered.sizes(), (std::vector<int64_t>{3, 20, 3}));
}

TEST(GatherPoints, PicksRows) {
  const auto pts = torch::arange(30, torch::kFloat).reshape({2, 5, 3});
  const auto idx = torch::tensor({4, 0, 1, 1}, torch::kLong).reshape({2, 2});
  const auto g = gather_points(pts, idx);
  EXPECT_TRUE(torch::equal(g[0][0], pts[0][4]));
  EXPECT_TRUE(torch::equal(g[1][1], pts[1][1]));
  EXPECT_TRUE(torch::equal(gather_points(pts[1], idx[0]), pts[1].index_select(0, idx[0])));
}

TEST(NormalizeUnitSphere, ZeroCentroidAndUnitRadius) {
  auto gen = generator(4);
  const auto cloud = torch::rand({100, 3}, gen, torch::kFloat) * 7 + 3;
  const auto x = normalize_unit_sphere(cloud);
  EXPECT_LT(max_magnitude(x.mean(0)), 1e-6);
  EXPECT_NEAR(x.norm(2, 1).max().item<double>(), 1.0, 1e-6);
  const auto batch = torch::stack({cloud, cloud * 0.01 - 5});
  const auto y = normalize_unit_sphere(batch);
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_LT(max_magnitude(y[b].mean(0)), 1e-5);
    EXPECT_NEAR(y[b].norm(2, 1).max().item<double>(), 1.0, 1e-6);
  }
  EXPECT_LT(max_magnitude(y[0] - x), 1e-6);
  EXPECT_THROW(normalize_unit_sphere(torch::zeros({0, 3})), DataError);
  EXPECT_TRUE(torch::equal(normalize_unit_sphere(torch::ones({4, 3})), torch::zeros({4, 3})));
}

TEST(NormalizeUnitSphere, ACloudInAnyUnitsKeepsItsShape) {
  // Squares of float32 overflow past 1.8e19 and vanish below 1e-19: the
  // norm is taken in float64, so a cloud 1e20 or 1e-30 times the size keeps
  // its normalised shape (it was all zeros).
  auto gen = generator(5);
  const auto cloud = torch::rand({50, 3}, gen, torch::kFloat) * 2 - 1;
  const auto unit = normalize_unit_sphere(cloud);
  for (const double scale : {1e20, 1e-30}) {
    SCOPED_TRACE(scale);
    const auto x = normalize_unit_sphere(cloud * scale);
    EXPECT_EQ(x.scalar_type(), torch::kFloat);
    EXPECT_LT(max_magnitude(x - unit), 1e-5);
  }
}

TEST(RandomScaleShift, OneDrawPerCloudInRange) {
  const auto batch = torch::rand({64, 20, 3}) + 0.5;
  const auto scaled = random_scale(batch, 0.8, 1.25, generator(3));
  const auto ratio = scaled / batch;  // one factor per cloud
  EXPECT_LT(max_magnitude(ratio - ratio.select(1, 0).unsqueeze(1)), 1e-5);
  EXPECT_GE(ratio.min().item<double>(), 0.8 - 1e-6);
  EXPECT_LT(ratio.max().item<double>(), 1.25 + 1e-6);
  EXPECT_GT(ratio.select(1, 0).select(1, 0).std().item<double>(), 0.05);  // clouds differ
  EXPECT_TRUE(torch::equal(scaled, random_scale(batch, 0.8, 1.25, generator(3))));

  const auto shifted = random_shift(batch, 0.1, generator(3));
  const auto offset = shifted - batch;
  EXPECT_LT(max_magnitude(offset - offset.select(1, 0).unsqueeze(1)), 1e-6);
  EXPECT_LE(max_magnitude(offset), 0.1 + 1e-6);
  EXPECT_GT(max_magnitude(offset), 0.05);
  EXPECT_EQ(random_shift(batch[0], 0.1).sizes(), batch[0].sizes());
}

TEST(Rotations, AboutAxisKeepsThatCoordinateAndIsRightHanded) {
  const auto pts = torch::randn({50, 3}, torch::kDouble);
  for (int64_t axis = 0; axis < 3; ++axis) {
    const auto r = rotation_about_axis(0.7, axis);
    const auto x = rotate(pts, r);
    EXPECT_LT(max_magnitude(x.select(1, axis) - pts.select(1, axis)), 1e-12);
    EXPECT_LT(max_magnitude(x.norm(2, 1) - pts.norm(2, 1)), 1e-12);
    EXPECT_LT(max_magnitude(r.t().mm(r) - torch::eye(3, torch::kDouble)), 1e-14);
    EXPECT_NEAR(torch::det(r).item<double>(), 1.0, 1e-14);
    const auto rr = random_rotation_about_axis(axis, generator(axis));
    EXPECT_LT(max_magnitude(rotate(pts, rr).select(1, axis) - pts.select(1, axis)), 1e-12);
  }
  // A quarter turn about z takes x to y; about x takes y to z; about y takes z to x.
  const auto e = torch::eye(3, torch::kDouble);
  for (int64_t axis = 0; axis < 3; ++axis) {
    const auto turned = rotate(e[(axis + 1) % 3].unsqueeze(0), rotation_about_axis(kPi / 2, axis));
    EXPECT_LT(max_magnitude(turned[0] - e[(axis + 2) % 3]), 1e-15) << "axis " << axis;
  }
  EXPECT_THROW(rotation_about_axis(1.0, 3), UsageError);
}

TEST(Rotations, RandomSo3IsOrthonormalAndHaarUniform) {
  auto gen = generator(123);
  const int draws = 2000;
  auto sum = torch::zeros({3, 3}, torch::kDouble);
  auto sum_sq = torch::zeros({3, 3}, torch::kDouble);
  double max_orth = 0, max_det = 0;
  for (int i = 0; i < draws; ++i) {
    const auto r = random_so3(gen);
    ASSERT_EQ(r.scalar_type(), torch::kDouble);
    max_orth = std::max(max_orth, max_magnitude(r.t().mm(r) - torch::eye(3, torch::kDouble)));
    max_det = std::max(max_det, std::abs(torch::det(r).item<double>() - 1));
    sum += r;
    sum_sq += r * r;
  }
  EXPECT_LT(max_orth, 1e-12);
  EXPECT_LT(max_det, 1e-12);
  EXPECT_LT(max_magnitude(sum / draws), 0.05);               // E[R] = 0 under Haar measure
  EXPECT_LT(max_magnitude(sum_sq / draws - 1.0 / 3), 0.03);  // E[R_ij^2] = 1/3
  // Rotating float32 points keeps their norms.
  const auto pts = torch::randn({100, 3});
  EXPECT_LT(max_magnitude(rotate(pts, random_so3(gen)).norm(2, 1) - pts.norm(2, 1)), 1e-5);
}

TEST(Rotations, RotateBatchedAndGlobalGeneratorConvention) {
  torch::manual_seed(77);
  const auto r1 = random_so3();
  torch::manual_seed(77);
  const auto r2 = random_so3();
  EXPECT_TRUE(torch::equal(r1, r2));  // nullopt = torch's global generator, which manual_seed resets
  const auto pts = torch::randn({2, 10, 3});
  const auto rs = torch::stack({r1, rotation_about_axis(0.3, 1)});
  const auto x = rotate(pts, rs);
  for (int64_t b = 0; b < 2; ++b) {
    const auto want = rs[b].to(torch::kFloat).mm(pts[b].t()).t();  // R p for every column vector p
    EXPECT_LT(max_magnitude(x[b] - want), 1e-5);
  }
}

TEST(FarthestPointSample, APointThatIsNotFiniteIsRefusedNamingIt) {
  // A NaN distance compares as neither nearer nor farther: the sample repeated index 0.
  auto cloud = torch::rand({2, 50, 3}, generator(4));
  cloud[1][17][2] = std::numeric_limits<float>::quiet_NaN();
  try {
    farthest_point_sample(cloud, 10, 0);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("point 17 of cloud 1 holds NaN or an infinity"), std::string::npos)
        << e.what();
  }
  auto one = torch::rand({50, 3}, generator(5), torch::kDouble);
  one[3][0] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(farthest_point_sample_random_start(one, 10, generator(6)), UsageError);
  one[3][0] = 0.5;
  EXPECT_EQ(farthest_point_sample(one, 10, 0).numel(), 10);
}
