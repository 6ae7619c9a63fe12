// vnt attention's pictures as a library function: one attention row on a
// shape and on a rotated copy, equal up to float rounding (VNAttention is
// rotation invariant), each a distribution over the points.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "qkv/models/model.h"
#include "qkv/tasks/classification.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

// An irregular tetrahedron: no symmetry that would make rows coincide by chance.
std::string tetra_off() {
  const auto path = temp_path("attention_tetra.off");
  write_text_file(path, "OFF\n4 4 0\n0 0 0\n1 0 0\n0 2 0\n0.3 0.2 1.5\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3\n");
  return path;
}

tasks::ClassificationData attention_run_data() {
  tasks::ClassificationData d;
  d.view.num_points = 64;
  d.view.up_axis = 2;  // resolved, as a run records it
  return d;
}

TEST(AttentionPictures, OneRowOnTheShapeAndItsRotatedCopyAgrees) {
  torch::manual_seed(0);
  auto model = models::find_model("vnt").make(
      {{"linear_dim", 8}, {"heads", 2}, {"head_dim", 4}, {"k", 8}, {"classes", 3}, {"head_hidden", {16}}});
  model->eval();
  const auto p = tasks::attention_pictures(*model, attention_run_data(), tetra_off(), 5, 1, "absolute", 3, torch::kCPU);
  for (const auto& cloud : p.clouds) {
    ASSERT_EQ(cloud.vertices.size(), 64u);
    ASSERT_EQ(cloud.vertex_properties.size(), 1u);
    const auto& w = cloud.vertex_properties[0].values;
    EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-5);  // a softmax row
  }
  const double top = p.report.at("max_attention");
  EXPECT_LE(p.report.at("max_attention_difference").get<double>(), 1e-4 * top);
  EXPECT_DOUBLE_EQ(p.report.at("uniform_attention").get<double>(), 1.0 / 64);
  EXPECT_EQ(p.pictures[0].marked_point, 5);
  EXPECT_DOUBLE_EQ(p.pictures[0].bar_hi, top);
  // Bad requests name what is wrong.
  expect_usage_error(
      [&] { tasks::attention_pictures(*model, attention_run_data(), tetra_off(), 64, 0, "absolute", 3, torch::kCPU); },
      "query 64: the cloud has 64 points");
  expect_usage_error(
      [&] { tasks::attention_pictures(*model, attention_run_data(), tetra_off(), 0, 9, "absolute", 3, torch::kCPU); },
      "block 9: the model has 3 blocks");
  auto plain = models::find_model("xyz-transformer").make({{"classes", 3}});
  expect_usage_error(
      [&] { tasks::attention_pictures(*plain, attention_run_data(), tetra_off(), 0, 0, "absolute", 3, torch::kCPU); },
      "attention_maps: this model has no attention over the points");
}

// vnt-local: the row weighs the query's neighbours, every other point 0, and
// stays the same under rotation (the neighbourhoods are rotation invariant).
TEST(AttentionPictures, LocalAttentionRowsWeighTheQuerysNeighbours) {
  torch::manual_seed(0);
  auto model = models::find_model("vnt-local")
                   .make({{"linear_dim", 8},
                          {"heads", 2},
                          {"head_dim", 4},
                          {"k", 8},
                          {"neighbours", 12},
                          {"classes", 3},
                          {"head_hidden", {16}}});
  model->eval();
  const auto p = tasks::attention_pictures(*model, attention_run_data(), tetra_off(), 5, 2, "row", 3, torch::kCPU);
  for (const auto& cloud : p.clouds) {
    const auto& w = cloud.vertex_properties.at(0).values;
    ASSERT_EQ(w.size(), 64u);
    EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-5);
    EXPECT_EQ(std::count_if(w.begin(), w.end(), [](double v) { return v > 0; }), 12);
  }
  EXPECT_LE(p.report.at("max_attention_difference").get<double>(), 1e-4 * p.report.at("max_attention").get<double>());
  EXPECT_DOUBLE_EQ(p.report.at("uniform_attention").get<double>(), 1.0 / 12);
}

}  // namespace
}  // namespace qkv::testing
