// estimate_up_axis on shapes built upright (tables, lamps, chairs standing on
// y), turned to stand on z, and on shapes with no up (cubes).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <stdexcept>
#include <vector>

#include "qkv/pointcloud/up_axis.h"

namespace qkv::testing {
namespace {

using qkv::pointcloud::estimate_up_axis;

// Points spread through boxes {centre, size} (x, y, z with y up), as many per
// box as its volume's share; `n` in all.
torch::Tensor points_in_boxes(const std::vector<std::array<float, 6>>& boxes, int64_t n, torch::Generator& g) {
  std::vector<torch::Tensor> parts;
  float total = 0;
  for (const auto& b : boxes) total += b[3] * b[4] * b[5];
  int64_t used = 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const auto& b = boxes[i];
    const int64_t k = i + 1 == boxes.size() ? n - used : static_cast<int64_t>(n * b[3] * b[4] * b[5] / total);
    used += k;
    auto u = torch::rand({k, 3}, g) - 0.5;
    parts.push_back(u * torch::tensor({b[3], b[4], b[5]}) + torch::tensor({b[0], b[1], b[2]}));
  }
  auto p = torch::cat(parts);
  return p.index_select(0, torch::randperm(n, g));  // surface samples come in random order
}

// Six tables, lamps and chairs of slightly different sizes, y up: [18, n, 3].
torch::Tensor upright_shapes(int64_t n) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(3);
  std::vector<torch::Tensor> shapes;
  for (int i = 0; i < 6; ++i) {
    const float s = 1.0f + 0.05f * static_cast<float>(i);
    shapes.push_back(points_in_boxes({{0, 0.7f * s, 0, 1.2f, 0.05f, 0.7f},
                                      {-0.55f, 0.35f * s, -0.3f, 0.05f, 0.7f * s, 0.05f},
                                      {0.55f, 0.35f * s, -0.3f, 0.05f, 0.7f * s, 0.05f},
                                      {-0.55f, 0.35f * s, 0.3f, 0.05f, 0.7f * s, 0.05f},
                                      {0.55f, 0.35f * s, 0.3f, 0.05f, 0.7f * s, 0.05f}},
                                     n, g));
    shapes.push_back(points_in_boxes({{0, 0.02f, 0, 0.4f, 0.04f, 0.4f},
                                      {0, 0.5f * s, 0, 0.04f, 1.0f * s, 0.04f},
                                      {0, 1.0f * s, 0, 0.3f, 0.2f, 0.3f}},
                                     n, g));
    shapes.push_back(points_in_boxes({{0, 0.45f * s, 0, 0.5f, 0.05f, 0.5f},
                                      {0, 0.75f * s, -0.23f, 0.5f, 0.6f, 0.04f},
                                      {-0.22f, 0.22f * s, -0.22f, 0.04f, 0.45f * s, 0.04f},
                                      {0.22f, 0.22f * s, -0.22f, 0.04f, 0.45f * s, 0.04f},
                                      {-0.22f, 0.22f * s, 0.22f, 0.04f, 0.45f * s, 0.04f},
                                      {0.22f, 0.22f * s, 0.22f, 0.04f, 0.45f * s, 0.04f}},
                                     n, g));
  }
  return torch::stack(shapes);
}

TEST(EstimateUpAxis, FindsTheAxisUprightShapesStandOnWhicheverItIs) {
  const auto y_up = upright_shapes(512);
  const auto e = estimate_up_axis(y_up);
  EXPECT_EQ(e.axis, 1);
  EXPECT_EQ(e.shapes, 18);
  EXPECT_GT(e.margin, 1.2) << e.asymmetry[0] << " " << e.asymmetry[1] << " " << e.asymmetry[2];
  // The same shapes standing on z (y -> z, z -> -y), and on x.
  const auto z_up = torch::stack({y_up.select(2, 0), -y_up.select(2, 2), y_up.select(2, 1)}, 2);
  EXPECT_EQ(estimate_up_axis(z_up).axis, 2);
  const auto x_up = torch::stack({y_up.select(2, 1), y_up.select(2, 0), y_up.select(2, 2)}, 2);
  EXPECT_EQ(estimate_up_axis(x_up).axis, 0);
  // Looking at fewer shapes and points still finds it.
  EXPECT_EQ(estimate_up_axis(z_up, 6, 128).axis, 2);
}

TEST(EstimateUpAxis, SaysItIsUnsureWhereNothingIsUp) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  std::vector<torch::Tensor> cubes;
  for (int i = 0; i < 8; ++i) cubes.push_back(points_in_boxes({{0, 0, 0, 1, 1, 1}}, 512, g));
  const auto e = estimate_up_axis(torch::stack(cubes));
  EXPECT_LT(e.margin, 1.2);
  // A cube is its own mirror image: what is left is sampling noise, well
  // below the asymmetry of shapes that have a top and a bottom.
  const double upright = estimate_up_axis(upright_shapes(512)).asymmetry[1];
  for (double a : e.asymmetry) EXPECT_LT(a, 0.6 * upright) << a << " against " << upright;
}

TEST(EstimateUpAxis, RefusesAnythingButShapesOfPoints) {
  EXPECT_THROW(estimate_up_axis(torch::zeros({0, 4, 3})), std::invalid_argument);
  EXPECT_THROW(estimate_up_axis(torch::zeros({2, 4, 2})), std::invalid_argument);
  EXPECT_THROW(estimate_up_axis(torch::zeros({2, 4, 3}), 0), std::invalid_argument);
}

}  // namespace
}  // namespace qkv::testing
