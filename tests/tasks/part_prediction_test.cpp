// The part-segmentation task's predict, called as a library function (what
// `qkv seg predict` prints and writes comes from it): every point of a file
// labelled with one of its class's parts, counted, coloured, scored against
// the file's own labels, and the same for a rotated copy of an invariant model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/data/dataset.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_parts.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/tasks/part_segmentation.h"
#include "support/haar_rotation.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

namespace fs = std::filesystem;
namespace pc = qkv::pointcloud;

// One built-in table in ShapeNet-part's text layout: "x y z nx ny nz part" lines.
std::string one_table_file(const std::string& dir) {
  pc::SynthPartsOptions o;
  o.train_per_category = 1;
  o.val_per_category = 0;
  o.test_per_category = 0;
  o.points_per_shape = 300;
  o.categories = {"Table"};
  pc::write_synth_parts(dir, o);
  for (const auto& f : fs::directory_iterator(dir + "/04379243")) return f.path().string();
  return "";
}

models::ModelPtr small_segmenter() {
  auto model = models::find_model("vnt-seg").make(
      {{"linear_dim", 8}, {"heads", 2}, {"head_dim", 4}, {"k", 8}, {"category_dim", 8}, {"seg_hidden", {16, 16}}});
  model->eval();
  return model;
}

// The task's data settings as a synthetic run records them (the up axis
// resolved); `num_points` the run's points, 0 for the task's default.
tasks::PartSegData synthetic_run_data(int64_t num_points = 0) {
  tasks::PartSegData data;
  data.source = "synthetic";
  data.view.up_axis = 1;
  if (num_points > 0) data.view.num_points = num_points;
  return data;
}

void expect_parts_of(const pc::PartCategory& cat, const std::vector<int64_t>& labels) {
  for (const auto label : labels) {
    EXPECT_GE(label, cat.first_part);
    EXPECT_LT(label, cat.first_part + cat.parts);
  }
}

TEST(PredictParts, EveryPointGetsOneOfItsClasssPartsScoredAgainstTheFile) {
  const auto dir = fresh_dir("tasks_predict_parts");
  const auto file = one_table_file(dir);
  ASSERT_FALSE(file.empty());
  const auto data = synthetic_run_data();
  torch::manual_seed(0);
  auto model = small_segmenter();
  const int64_t table = pc::find_part_category("Table", "class");
  const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(table)];
  const auto p = tasks::predict_parts(*model, data, file, table, pc::Rotation::None, 1, torch::kCPU);
  ASSERT_EQ(p.labels.size(), 300u);  // a labelled cloud: every point, none resampled
  expect_parts_of(cat, p.labels);
  EXPECT_EQ(std::accumulate(p.per_part.begin(), p.per_part.end(), int64_t{0}), 300);
  EXPECT_EQ(p.cloud.vertices.size(), 300u);
  // Written in the file's own coordinates, not the centred, scaled view.
  const auto rows = pc::read_part_text(file, nullptr).rows;
  for (size_t i = 0; i < rows.size(); ++i)
    ASSERT_EQ(p.cloud.vertices[i], (pc::Vec3{rows[i][0], rows[i][1], rows[i][2]})) << "point " << i;
  EXPECT_EQ(p.cloud.colors.size(), 300u);
  ASSERT_EQ(p.cloud.vertex_properties.size(), 2u);  // 'label', and 'true_label' from the file
  EXPECT_EQ(p.cloud.vertex_properties[1].name, "true_label");
  EXPECT_EQ(p.part_names, pc::synth_part_names("Table"));  // the built-in shapes' parts have names
  EXPECT_EQ(p.picture.legend.size(), static_cast<size_t>(cat.parts));
  EXPECT_EQ(p.report.at("points"), 300);
  const double accuracy = p.report.at("accuracy");
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  EXPECT_TRUE(p.report.contains("miou"));
  // The model is rotation invariant: the same labels for the file turned in SO(3).
  const auto turned = tasks::predict_parts(*model, data, file, table, pc::Rotation::SO3, 7, torch::kCPU);
  int64_t same = 0;
  for (size_t i = 0; i < p.labels.size(); ++i) same += p.labels[i] == turned.labels[i];
  EXPECT_GE(same, 297) << "labels that changed under rotation: " << 300 - same;
  fs::remove_all(dir);
}

// The table file's points, each repeated `copies` times with a small jitter,
// turned by `rotation` (xyz and normals), as a cloud file of
// "x y z nx ny nz part" lines.
std::string dense_copy(const std::string& file, const std::string& out, int copies, const at::Tensor& rotation) {
  const auto rows = pc::read_part_text(file, nullptr).rows;
  torch::manual_seed(5);
  const auto jitter = 0.002 * torch::randn({static_cast<int64_t>(rows.size()) * copies, 3}, torch::kDouble);
  std::ofstream o(out);
  int64_t i = 0;
  for (const auto& r : rows)
    for (int c = 0; c < copies; ++c, ++i) {
      auto p = torch::tensor({r[0], r[1], r[2]}, torch::kDouble) + jitter[i];
      auto n = torch::tensor({r[3], r[4], r[5]}, torch::kDouble);
      p = torch::mv(rotation, p);
      n = torch::mv(rotation, n);
      char line[256];
      std::snprintf(line, sizeof line, "%.7f %.7f %.7f %.6f %.6f %.6f\n", p[0].item<double>(), p[1].item<double>(),
                    p[2].item<double>(), n[0].item<double>(), n[1].item<double>(), n[2].item<double>());
      o << line;
    }
  return out;
}

TEST(PredictParts, ACloudLargerThanTheRunsPointsIsLabelledWholeByVotesAndStaysInvariant) {
  // Every point of a cloud ten times the run's size gets a label, from the
  // votes on samplings of the run's size and its nearest sampled point; the
  // same labels for the cloud turned in SO(3) (the samplings depend on the
  // seed, not on the coordinates).
  const auto dir = fresh_dir("tasks_predict_votes");
  const auto file = one_table_file(dir);
  ASSERT_FALSE(file.empty());
  const auto data = synthetic_run_data(300);
  torch::manual_seed(0);
  auto model = small_segmenter();
  const int64_t table = pc::find_part_category("Table", "class");
  const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(table)];
  const auto plain = dense_copy(file, dir + "/dense.txt", 10, torch::eye(3, torch::kDouble));
  const auto q = qkv::testing::haar_rotation(9);
  const auto turned_file = dense_copy(file, dir + "/turned.txt", 10, q);
  const auto p = tasks::predict_parts(*model, data, plain, table, pc::Rotation::None, 4, torch::kCPU, 3);
  ASSERT_EQ(p.labels.size(), 3000u);
  expect_parts_of(cat, p.labels);
  EXPECT_EQ(p.report.at("votes").at("samplings"), 3);
  EXPECT_EQ(p.report.at("votes").at("points_each"), 300);
  const int64_t sampled = p.report.at("votes").at("points_sampled");
  EXPECT_GT(sampled, 300);
  EXPECT_LE(sampled, 900);
  const auto turned = tasks::predict_parts(*model, data, turned_file, table, pc::Rotation::None, 4, torch::kCPU, 3);
  int64_t same = 0;
  for (size_t i = 0; i < p.labels.size(); ++i) same += p.labels[i] == turned.labels[i];
  EXPECT_GE(same, 2985) << "labels that changed under rotation: " << 3000 - same;
  // A point that was sampled keeps its own vote: its nearest sampled point is itself.
  const auto xyz = torch::rand({50, 3}, torch::kDouble);
  EXPECT_TRUE(torch::equal(pc::nearest_point_indices(xyz, xyz), torch::arange(50, torch::kLong)));
  EXPECT_EQ(pc::nearest_point_indices(torch::zeros({2, 3}), torch::zeros({4, 3})).sum().item<int64_t>(),
            0);  // ties: lowest
  fs::remove_all(dir);
}

TEST(PredictParts, ACloudOfFewerPointsThanTheModelsNeighboursIsLabelled) {
  // 5 points for a model of k = 8: filled up to the run's size by repeats.
  const auto dir = fresh_dir("tasks_predict_tiny");
  fs::create_directories(dir);
  const auto file = dir + "/five.xyz";
  std::ofstream(file) << "0 0 0\n1 0 0\n0 1 0\n0 0 1\n0.5 0.5 0.5\n";
  const auto data = synthetic_run_data(64);
  torch::manual_seed(0);
  auto model = small_segmenter();
  const int64_t table = pc::find_part_category("Table", "class");
  const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(table)];
  const auto p = tasks::predict_parts(*model, data, file, table, pc::Rotation::None, 1, torch::kCPU);
  ASSERT_EQ(p.labels.size(), 5u);
  expect_parts_of(cat, p.labels);
  EXPECT_EQ(p.cloud.vertices[3], (pc::Vec3{0, 0, 1}));
  fs::remove_all(dir);
}

TEST(PredictParts, APartFileFarFromZeroKeepsItsDetailAndItsLabels) {
  // The table moved to UTM-like coordinates: float32 steps of 0.5 there. Its
  // labels are the ones near 0, and the labelled cloud lies on the file's
  // own coordinates to the millimetre (origin + relative floats).
  const auto dir = fresh_dir("tasks_predict_far");
  const auto file = one_table_file(dir);
  ASSERT_FALSE(file.empty());
  const double shift[3] = {500000.0, 4500000.0, 100.0};
  std::ifstream in(file);
  std::ofstream far(dir + "/far.txt");
  std::vector<std::array<double, 3>> exact;
  for (double v[7]; in >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6];) {
    char line[256];
    std::snprintf(line, sizeof line, "%.4f %.4f %.4f %g %g %g %d\n", v[0] + shift[0], v[1] + shift[1], v[2] + shift[2],
                  v[3], v[4], v[5], static_cast<int>(v[6]));
    far << line;
    exact.push_back({v[0] + shift[0], v[1] + shift[1], v[2] + shift[2]});
  }
  far.close();
  ASSERT_TRUE(pc::looks_like_part_text(dir + "/far.txt"));
  const auto data = synthetic_run_data();
  torch::manual_seed(0);
  auto model = small_segmenter();
  const int64_t table = pc::find_part_category("Table", "class");
  const auto near = tasks::predict_parts(*model, data, file, table, pc::Rotation::None, 1, torch::kCPU);
  const auto moved = tasks::predict_parts(*model, data, dir + "/far.txt", table, pc::Rotation::None, 1, torch::kCPU);
  ASSERT_EQ(moved.labels.size(), exact.size());
  int64_t same = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    same += near.labels[i] == moved.labels[i];
    for (size_t c = 0; c < 3; ++c)
      ASSERT_NEAR(moved.cloud.vertices[i][c] + moved.cloud.origin[c], std::round(exact[i][c] * 1e4) / 1e4, 1e-3)
          << "point " << i;
  }
  EXPECT_GE(same, 297) << "labels that changed far from 0: " << 300 - same;
  fs::remove_all(dir);
}

TEST(PredictParts, OnlyShapeNetPartsOwnLinesAreReadAsAPartFile) {
  // Seven numbers a line, a unit normal and a part id: ShapeNet-part. A
  // header, a comment, or a scan's x y z intensity r g b is another point
  // text, for read_shape_file.
  const auto dir = fresh_dir("tasks_part_text_kinds");
  fs::create_directories(dir);
  auto file = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  EXPECT_TRUE(pc::looks_like_part_text(file("part.txt", "0.1 0.2 0.3 0 0 1 47\n0.2 0.1 0.3 0.6 0.8 0 48\n")));
  EXPECT_FALSE(pc::looks_like_part_text(file("header.txt", "x y z intensity r g b\n1 2 3 0.5 20 30 40\n")));
  EXPECT_FALSE(pc::looks_like_part_text(file("comment.txt", "# x y z nx ny nz\n1 2 3 0 0 1\n")));
  EXPECT_FALSE(pc::looks_like_part_text(file("scan.txt", "1 2 3 -1200 140 120 110\n4 5 6 -900 20 30 40\n")));
  EXPECT_FALSE(pc::looks_like_part_text(file("part.xyz", "0.1 0.2 0.3 0 0 1 47\n")));  // .txt only
  // A part outside 0-49 is still a part: the reader names it (the cloud
  // reader, which has no parts, said "7 columns, expected 3 or 6").
  const auto bad = file("bad_part.txt", "0 0 0 0 0 1 99\n1 0 0 0 0 1 37\n");
  ASSERT_TRUE(pc::looks_like_part_text(bad));
  expect_data_error([&] { pc::read_part_text(bad); }, bad, "line 1: part 99.000000 is not a part id (0-49)");
  fs::remove_all(dir);
}

TEST(PredictParts, TrainingAccuracyCountsWhatTheValidationMetricCounts) {
  // The trainer's accuracy of a seg batch (predict_among_class_parts) and
  // PartIoUMetric's: the arg-max among the shape's class's parts, one
  // measure for train and val (over all 50 parts, an untrained model scored
  // 0 in training against 0.5 in validation).
  torch::manual_seed(3);
  const auto& cats = pc::shapenet_part_categories();
  const int64_t table = pc::find_part_category("Table", "class"), plane = pc::find_part_category("Airplane", "class");
  data::Batch batch;
  batch.inputs["category"] = torch::tensor({table, plane}, torch::kLong);
  const auto logits = torch::randn({2, 40, pc::kShapeNetPartCount});
  const auto& t = cats[static_cast<size_t>(table)];
  const auto& a = cats[static_cast<size_t>(plane)];
  const auto target = torch::stack({torch::randint(t.first_part, t.first_part + t.parts, {40}),
                                    torch::randint(a.first_part, a.first_part + a.parts, {40})});
  const auto predicted = tasks::predict_among_class_parts(batch, logits);
  EXPECT_TRUE(
      torch::equal(predicted[0], logits[0].slice(1, t.first_part, t.first_part + t.parts).argmax(1) + t.first_part));
  auto metric = tasks::part_iou_metric()();
  metric->add(logits, target);
  EXPECT_DOUBLE_EQ(metric->result().at("accuracy").get<double>(),
                   (predicted == target).to(torch::kDouble).mean().item<double>());
}

TEST(PredictParts, AClassTheRunDidNotLearnIsRefusedBeforeTheFileIsRead) {
  tasks::PartSegData data;
  data.trained_categories = {"Airplane", "Table"};
  auto model = small_segmenter();
  expect_usage_error(
      [&] {
        tasks::predict_parts(*model, data, "/nonexistent/mug.txt", pc::find_part_category("Mug", "class"),
                             pc::Rotation::None, 0, torch::kCPU);
      },
      "class Mug: the run was trained on Airplane, Table only");
}

}  // namespace
}  // namespace qkv::testing
