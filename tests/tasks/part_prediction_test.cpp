// The part-segmentation task's predict, called as a library function (what
// `qkv seg predict` prints and writes comes from it): every point of a file
// labelled with one of its class's parts, counted, coloured, scored against
// the file's own labels, and the same for a rotated copy of an invariant model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <numeric>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_parts.h"
#include "qkv/tasks/part_segmentation.h"
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

TEST(PredictParts, EveryPointGetsOneOfItsClasssPartsScoredAgainstTheFile) {
  const auto dir = fresh_dir("tasks_predict_parts");
  const auto file = one_table_file(dir);
  ASSERT_FALSE(file.empty());
  tasks::PartSegData data;  // the task's defaults, as a run records them: the up axis resolved
  data.source = "synthetic";
  data.view.up_axis = 1;
  torch::manual_seed(0);
  auto model = small_segmenter();
  const int64_t table = pc::find_part_category("Table", "class");
  const auto& cat = pc::shapenet_part_categories()[static_cast<size_t>(table)];
  const auto p = tasks::predict_parts(*model, data, file, table, pc::Rotation::None, 1, torch::kCPU);
  ASSERT_EQ(p.labels.size(), 300u);  // a labelled cloud: every point, none resampled
  for (const auto label : p.labels) {
    EXPECT_GE(label, cat.first_part);
    EXPECT_LT(label, cat.first_part + cat.parts);
  }
  EXPECT_EQ(std::accumulate(p.per_part.begin(), p.per_part.end(), int64_t{0}), 300);
  EXPECT_EQ(p.cloud.vertices.size(), 300u);
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
