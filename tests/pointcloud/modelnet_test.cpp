// ModelNet40 loading: each of the three layouts on a tiny tree written here
// (the HDF5 one with the HDF5 C API), and the malformed cases.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/pointcloud/modelnet.h"
#include "qkv/tasks/point_task.h"
#include "support/build_parts.h"
#include "support/cli_run.h"
#include "support/h5_writer.h"
#include "support/test_files.h"

using namespace qkv;
using namespace qkv::pointcloud;
using qkv::testing::data_error_of;
using qkv::testing::expect_data_error;
using qkv::testing::fresh_dir;
using qkv::testing::write_text_file;

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------- OFF tree

// An axis-aligned box of half-size h, as OFF text (quads); fused puts the counts on the magic line.
std::string box_off(float h, bool fused) {
  std::ostringstream s;
  s << (fused ? "OFF8 6 0\n" : "OFF\n8 6 0\n");
  for (int i = 0; i < 8; ++i) s << ((i & 1) ? h : -h) << ' ' << ((i & 2) ? h : -h) << ' ' << ((i & 4) ? h : -h) << '\n';
  s << "4 0 1 3 2\n4 4 5 7 6\n4 0 1 5 4\n4 2 3 7 6\n4 0 2 6 4\n4 1 3 7 5\n";
  return s.str();
}

std::string tetra_off() { return "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 2 1\n3 0 1 3\n3 0 3 2\n3 1 2 3\n"; }

// Classes "cube" and "airplane" (airplane sorts first), 3 train and 2 test meshes each.
std::string make_off_tree() {
  const fs::path dir = fresh_dir("modelnet_off");
  for (int i = 0; i < 5; ++i) {
    const char* split = i < 3 ? "train" : "test";
    const std::string id = "_000" + std::to_string(i + 1) + ".off";
    write_text_file(dir / "cube" / split / ("cube" + id), box_off(0.25f * float(i + 1), i % 2 == 1));
    write_text_file(dir / "airplane" / split / ("airplane" + id), tetra_off());
  }
  write_text_file(dir / "cube" / "train" / "notes.txt", "not a mesh\n");
  make_directories((dir / "__MACOSX").string());  // unzip debris, not a class
  return dir.string();
}

TEST(ModelNetOff, LoadsSortedClassesSampledMeshes) {
  const auto dir = make_off_tree();
  ModelNetLoadOptions o;
  o.points_per_shape = 64;
  o.with_normals = true;
  o.seed = 5;
  const auto data = load_modelnet40(dir, o);
  EXPECT_EQ(data.layout, "ModelNet40");
  EXPECT_EQ(data.train.class_names, (std::vector<std::string>{"airplane", "cube"}));
  ASSERT_EQ(data.train.size(), 6);
  ASSERT_EQ(data.test.size(), 4);
  EXPECT_EQ(data.train.points.sizes(), (std::vector<int64_t>{6, 64, 3}));
  EXPECT_EQ(data.train.points.scalar_type(), torch::kFloat);
  EXPECT_EQ(data.train.normals.sizes(), data.train.points.sizes());
  EXPECT_TRUE(torch::equal(data.train.labels, torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong)));
  EXPECT_TRUE(torch::equal(data.test.labels, torch::tensor({0, 0, 1, 1}, torch::kLong)));
  ASSERT_EQ(data.train.sources.size(), 6u);
  EXPECT_NE(data.train.sources[4].find("cube_0002.off"), std::string::npos);
  // The box of half-size 0.25 (i + 1): every point on its surface.
  for (int64_t s = 3; s < 6; ++s) {
    const double h = 0.25 * double(s - 2);
    const auto extent = std::get<0>(data.train.points[s].abs().max(1));
    EXPECT_LT((extent - h).abs().max().item<double>(), 1e-5) << data.train.sources[static_cast<size_t>(s)];
  }
  EXPECT_LT((data.train.normals.norm(2, 2) - 1).abs().max().item<double>(), 1e-5);

  // Deterministic by seed, and a shape's points do not depend on what else is loaded.
  EXPECT_TRUE(torch::equal(load_modelnet40(dir, o).train.points, data.train.points));
  auto few = o;
  few.max_per_class = 1;
  const auto small = load_modelnet40(dir, few);
  ASSERT_EQ(small.train.size(), 2);
  EXPECT_TRUE(torch::equal(small.train.points[1], data.train.points[3]));
  auto other = o;
  other.seed = 6;
  EXPECT_FALSE(torch::equal(load_modelnet40(dir, other).train.points, data.train.points));
}

TEST(ModelNetOff, EmptySplitAndBadMeshNameTheFile) {
  const fs::path dir = make_off_tree();
  fs::remove_all(dir / "cube" / "test");
  make_directories((dir / "cube" / "test").string());
  expect_data_error([&] { load_modelnet40(dir.string()); }, (dir / "cube" / "test").string(),
                    "no shape files (.off .ply .obj");
  write_text_file(dir / "cube" / "test" / "cube_0009.off", "OFF\n3 1 0\n0 0 0\n1 0 0\n");
  expect_data_error([&] { load_modelnet40(dir.string()); }, "cube_0009.off", "truncated");
}

// ---------------------------------------------------------------------------- normal_resampled

// The value of coordinate k on line i of shape `shape`'s file.
float resampled_value(int shape, int i, int k) { return float(shape) + 0.01f * float(i) + 0.001f * float(k); }

// In <root>/modelnet40_normal_resampled: classes night_stand (label 0) and bed,
// listed in that order, 20 points per file.
fs::path make_resampled(const std::string& name) {
  const fs::path root = fresh_dir(name);
  const fs::path dir = root / "modelnet40_normal_resampled";
  write_text_file(dir / "modelnet40_shape_names.txt", "night_stand\nbed\n");
  write_text_file(dir / "modelnet40_train.txt", "night_stand_0001\nnight_stand_0002\nbed_0001\nbed_0002\n");
  write_text_file(dir / "modelnet40_test.txt", "night_stand_0003\r\nbed_0003\r\n\n");
  int shape = 0;
  for (const char* cls : {"night_stand", "bed"})
    for (int k = 1; k <= 3; ++k, ++shape) {
      std::ostringstream s;
      for (int i = 0; i < 20; ++i) {
        s << resampled_value(shape, i, 0) << ',' << resampled_value(shape, i, 1) << ',' << resampled_value(shape, i, 2);
        s << ",0,0," << (i % 2 ? -1 : 1) << '\n';
      }
      write_text_file(dir / cls / (std::string(cls) + "_000" + std::to_string(k) + ".txt"), s.str());
    }
  return root;
}

TEST(ModelNetResampled, FirstPointsWithNormalsFromTheParentFolder) {
  const auto root = make_resampled("modelnet_resampled");
  ModelNetLoadOptions o;
  o.points_per_shape = 16;
  o.with_normals = true;
  const auto data = load_modelnet40(root.string(), o);  // finds the subfolder
  EXPECT_EQ(data.layout, "modelnet40_normal_resampled");
  EXPECT_EQ(data.train.class_names, (std::vector<std::string>{"night_stand", "bed"}));
  ASSERT_EQ(data.train.size(), 4);
  ASSERT_EQ(data.test.size(), 2);
  EXPECT_TRUE(torch::equal(data.train.labels, torch::tensor({0, 0, 1, 1}, torch::kLong)));
  EXPECT_EQ(data.train.points.sizes(), (std::vector<int64_t>{4, 16, 3}));
  // Train shape 2 is bed_0001, the fourth file written (shape 3).
  for (int i : {0, 7, 15})
    for (int k = 0; k < 3; ++k) EXPECT_FLOAT_EQ(data.train.points[2][i][k].item<float>(), resampled_value(3, i, k));
  EXPECT_FLOAT_EQ(data.test.points[0][1][0].item<float>(), resampled_value(2, 1, 0));
  EXPECT_FLOAT_EQ(data.train.normals[0][1][2].item<float>(), -1.f);
  EXPECT_NE(data.test.sources[1].find("bed_0003.txt"), std::string::npos);

  auto few = o;
  few.max_per_class = 1;
  EXPECT_EQ(load_modelnet40(root.string(), few).train.size(), 2);

  // The names may also come as shape_names.txt.
  const auto dir = root / "modelnet40_normal_resampled";
  fs::rename(dir / "modelnet40_shape_names.txt", dir / "shape_names.txt");
  EXPECT_EQ(load_modelnet40(dir.string(), o).train.size(), 4);
}

TEST(ModelNetResampled, MalformedListsAndFilesNameTheFile) {
  const auto root = make_resampled("modelnet_resampled_bad");
  const auto dir = root / "modelnet40_normal_resampled";
  ModelNetLoadOptions o;
  o.points_per_shape = 16;

  fs::remove(dir / "modelnet40_test.txt");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "modelnet40_test.txt", "missing list file");
  write_text_file(dir / "modelnet40_test.txt", "night_stand_0003\nsofa_0001\n");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "modelnet40_test.txt", "line 2: unknown class 'sofa'");
  write_text_file(dir / "modelnet40_test.txt", "night_stand_0003\n");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "modelnet40_test.txt", "no shapes of class 'bed'");
  write_text_file(dir / "modelnet40_test.txt", "\n");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "modelnet40_test.txt", "lists no shapes");
  write_text_file(dir / "modelnet40_test.txt", "night_stand_0003\nbed_0003\n");

  o.points_per_shape = 32;
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "_0001.txt", "fewer than the 32");
  o.points_per_shape = 16;
  write_text_file(dir / "bed" / "bed_0002.txt", "0,0,0,0,0,1\n0,nan,0,0,0,1\n");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "bed_0002.txt", "not finite");
  fs::remove(dir / "bed" / "bed_0002.txt");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "bed_0002.txt", "no such file");
}

// ---------------------------------------------------------------------------- ply_hdf5_2048

// data [S, 32, 3] float32 = base + arange, label [S, 1] uint8, normal (optional) all +z.
void write_h5(const std::string& path, float base, const std::vector<uint8_t>& labels, bool normals) {
  const auto s = static_cast<uint64_t>(labels.size());
  const uint64_t p = 32;
  std::vector<float> data(s * p * 3), normal(s * p * 3, 0.f);
  for (size_t i = 0; i < data.size(); ++i) data[i] = base + float(i);
  for (size_t i = 2; i < normal.size(); i += 3) normal[i] = 1.f;
  std::vector<qkv::testing::H5Dataset> datasets = {{"data", {s, p, 3}, data}, {"label", {s, 1}, labels}};
  if (normals) datasets.push_back({"normal", {s, p, 3}, normal});
  qkv::testing::write_h5_file(path, datasets);
}

fs::path make_h5(const std::string& name) {
  const fs::path dir = fresh_dir(name);
  make_directories(dir.string());
  write_text_file(dir / "shape_names.txt", "airplane\ncube\n");
  write_text_file(
      dir / "train_files.txt",
      "data/modelnet40_ply_hdf5_2048/ply_data_train0.h5\ndata/modelnet40_ply_hdf5_2048/ply_data_train1.h5\n");
  write_text_file(dir / "test_files.txt", "data/modelnet40_ply_hdf5_2048/ply_data_test0.h5\n");
  write_h5((dir / "ply_data_train0.h5").string(), 0, {0, 1, 1, 0}, true);
  write_h5((dir / "ply_data_train1.h5").string(), 1000, {1, 0}, true);
  write_h5((dir / "ply_data_test0.h5").string(), 2000, {1, 0, 1}, true);
  return dir;
}

TEST(ModelNetH5, ReadsListedFilesByBaseName) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  const auto dir = make_h5("modelnet_h5");
  ModelNetLoadOptions o;
  o.points_per_shape = 8;
  o.with_normals = true;
  const auto data = load_modelnet40(dir.string(), o);
  EXPECT_EQ(data.layout, "modelnet40_ply_hdf5_2048");
  EXPECT_EQ(data.train.class_names, (std::vector<std::string>{"airplane", "cube"}));
  ASSERT_EQ(data.train.size(), 6);
  ASSERT_EQ(data.test.size(), 3);
  EXPECT_EQ(data.train.points.sizes(), (std::vector<int64_t>{6, 8, 3}));
  EXPECT_TRUE(torch::equal(data.train.labels, torch::tensor({0, 1, 1, 0, 1, 0}, torch::kLong)));
  // Shape 4 is the first of ply_data_train1.h5: its first 8 of 32 points.
  const auto want = (1000 + torch::arange(24, torch::kFloat)).reshape({8, 3});
  EXPECT_TRUE(torch::equal(data.train.points[4], want));
  // Shape 1 of file 0 starts at 1 * 32 * 3.
  EXPECT_EQ(data.train.points[1][0][0].item<float>(), 96.f);
  EXPECT_TRUE(torch::equal(data.train.normals.select(2, 2), torch::ones({6, 8})));
  EXPECT_NE(data.train.sources[4].find("ply_data_train1.h5[0]"), std::string::npos);

  auto few = o;
  few.max_per_class = 1;
  const auto small = load_modelnet40(dir.string(), few);
  EXPECT_TRUE(torch::equal(small.train.labels, torch::tensor({0, 1}, torch::kLong)));
  EXPECT_EQ(small.test.size(), 2);
}

TEST(ModelNetH5, MalformedCasesNameTheFile) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  const auto dir = make_h5("modelnet_h5_bad");
  ModelNetLoadOptions o;
  o.points_per_shape = 8;
  const auto train1 = (dir / "ply_data_train1.h5").string();

  write_h5(train1, 0, {1, 2}, true);
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, train1, "label 2 of shape 1 is outside 0..1");
  write_h5(train1, NAN, {1, 0}, false);
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, train1, "dataset 'data' has NaN or infinite values");
  write_h5(train1, 0, {1, 0}, false);
  EXPECT_EQ(load_modelnet40(dir.string(), o).train.size(), 6);
  o.with_normals = true;
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, train1, "no dataset 'normal'");
  o.with_normals = false;
  o.points_per_shape = 64;
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "ply_data_train0.h5", "fewer than the 64");
  o.points_per_shape = 8;

  write_text_file(train1, "this is not HDF5\n");
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, train1, "cannot open as an HDF5 file");
  fs::remove(train1);
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, "train_files.txt", "line 2");
  fs::remove(dir / "test_files.txt");
  write_h5(train1, 0, {1, 0}, false);
  expect_data_error([&] { load_modelnet40(dir.string(), o); }, (dir / "test_files.txt").string(), "missing list file");
}

// ---------------------------------------------------------------------------- detection

TEST(ModelNet, UnknownFolderSaysWhatWasLookedFor) {
  const auto dir = fresh_dir("modelnet_empty");
  make_directories(dir);
  write_text_file(fs::path(dir) / "readme.md", "nothing here\n");
  const auto message = data_error_of([&] { load_modelnet40(dir); });
  EXPECT_NE(message.find(dir), std::string::npos) << message;
  EXPECT_NE(message.find("train_files.txt"), std::string::npos) << message;
  EXPECT_NE(message.find("modelnet40_train.txt"), std::string::npos) << message;
  EXPECT_NE(message.find(".off"), std::string::npos) << message;
  expect_data_error([&] { load_modelnet40(dir + "/missing"); }, dir + "/missing", "no such folder");
  ModelNetLoadOptions bad;
  bad.points_per_shape = -1;
  EXPECT_THROW(load_modelnet40(dir, bad), UsageError);
}

// ---------------------------------------------------------------------------- ScanObjectNN

// One of ScanObjectNN's files as the release lays it out: data [S, 64, 3]
// float32 (base + row), label [S] int32, mask [S, 64] int32; one shape of each
// of the 15 classes, or the labels given.
void write_scanobjectnn_file(const fs::path& path, float base, std::vector<int32_t> labels = {}) {
  if (labels.empty())
    for (int32_t c = 0; c < 15; ++c) labels.push_back(c);
  make_directories(path.parent_path().string());
  const auto s = static_cast<uint64_t>(labels.size());
  const uint64_t p = 64;
  std::vector<float> data(s * p * 3);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = base + static_cast<float>(i % (p * 3)) * 0.01f + static_cast<float>(i / (p * 3));
  std::vector<int32_t> mask(s * p, 1);
  qkv::testing::write_h5_file(path.string(),
                              {{"data", {s, p, 3}, data}, {"label", {s}, labels}, {"mask", {s, p}, mask}});
}

// ScanObjectNN's h5_files folder with OBJ_ONLY's and PB_T50_RS's files (synthetic stand-ins).
fs::path make_scanobjectnn(const std::string& name) {
  const fs::path root = fresh_dir(name);
  write_scanobjectnn_file(root / "main_split_nobg" / "training_objectdataset.h5", 0);
  write_scanobjectnn_file(root / "main_split_nobg" / "test_objectdataset.h5", 100);
  write_scanobjectnn_file(root / "main_split" / "training_objectdataset_augmentedrot_scale75.h5", 200);
  write_scanobjectnn_file(root / "main_split" / "test_objectdataset_augmentedrot_scale75.h5", 300);
  return root;
}

}  // namespace

TEST(ScanObjectNN, ItsVariantsAreReadFromTheReleasedLayout) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  const auto root = make_scanobjectnn("scanobjectnn");
  ModelNetLoadOptions o;
  o.points_per_shape = 32;
  const auto hardest = load_modelnet40(root.string(), o);  // detected; PB_T50_RS by default
  EXPECT_EQ(hardest.layout, kScanObjectNNLayout);
  EXPECT_EQ(hardest.train.class_names, scanobjectnn_class_names());
  ASSERT_EQ(hardest.train.size(), 15);
  EXPECT_EQ(hardest.train.points.sizes(), (std::vector<int64_t>{15, 32, 3}));
  EXPECT_FLOAT_EQ(hardest.train.points[0][0][0].item<float>(), 200.f);  // main_split's augmented file
  EXPECT_FLOAT_EQ(hardest.test.points[3][0][0].item<float>(), 303.f);
  EXPECT_EQ(hardest.train.labels[14].item<int64_t>(), 14);
  o.scanobjectnn_variant = "OBJ_ONLY";
  EXPECT_FLOAT_EQ(load_modelnet40(root.string(), o).test.points[0][0][0].item<float>(), 100.f);
  // The variant's own folder, named explicitly.
  o.layout = "scanobjectnn";
  EXPECT_EQ(load_modelnet40((root / "main_split_nobg").string() + "/", o).train.size(), 15);
  // End to end: vnt train reads it by its options, says the layout, trains.
  const auto run = qkv::testing::run_qkv(
      "vnt train --data " + root.string() +
      " --layout scanobjectnn --scanobjectnn-variant OBJ_ONLY --points 32 "
      "--points-per-shape 64 --epochs 1 --batch-size 5 --linear-dim 4 --heads 2 --head-dim 4 --model-options "
      "'{\"k\":4}' --threads 1 --out " +
      root.string() + "-run");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("(ScanObjectNN layout): 15 train / 15 test shapes, 15 classes"), std::string::npos)
      << run.output;
  // A variant whose files are not there, and an unknown one.
  o.scanobjectnn_variant = "OBJ_BG";
  expect_data_error([&] { load_modelnet40(root.string(), o); }, "main_split/training_objectdataset.h5", "no such file");
  o.scanobjectnn_variant = "PB_T99";
  EXPECT_THROW(load_modelnet40(root.string(), o), UsageError);
  // A label outside the 15 classes, named with its file and row.
  o.scanobjectnn_variant = "OBJ_ONLY";
  write_scanobjectnn_file(root / "main_split_nobg" / "test_objectdataset.h5", 100,
                          {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  expect_data_error([&] { load_modelnet40(root.string(), o); }, "test_objectdataset.h5",
                    "label 15 of shape 15 is outside 0..14");
  fs::remove_all(root);
  fs::remove_all(root.string() + "-run");
}

// --recipe scanobjectnn: the reference code's settings in config.json; the
// command line's sizes win (the stand-in files hold 64 points of 15 scans).
TEST(ScanObjectNN, TheRecipeRecordsTheReferenceCodesSettings) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  const auto root = make_scanobjectnn("scanobjectnn_recipe");
  const auto run =
      qkv::testing::run_qkv("vnt train --recipe scanobjectnn --data " + root.string() +
                            " --points 32 --epochs 1 --batch-size 5 "
                            "--linear-dim 4 --heads 2 --head-dim 4 --model-options '{\"k\":4}' --threads 1 --out " +
                            root.string() + "-run");
  ASSERT_EQ(run.status, 0) << run.output;
  const auto config = qkv::testing::read_json(root.string() + "-run/config.json");
  const auto& d = config.at("data");
  EXPECT_EQ(d.at("layout"), "scanobjectnn");
  EXPECT_EQ(d.at("scanobjectnn_variant"), "PB_T50_RS");
  EXPECT_EQ(d.at("protocol"), "so3/so3");
  EXPECT_EQ(d.at("sampling"), "random");
  EXPECT_EQ(d.at("points"), 32);
  const auto& t = config.at("train");
  EXPECT_EQ(t.at("optimizer"), "sgd");
  EXPECT_DOUBLE_EQ(t.at("lr").get<double>(), 0.1);
  EXPECT_EQ(t.at("schedule"), "cosine");
  EXPECT_DOUBLE_EQ(t.at("min_lr").get<double>(), 0.001);
  EXPECT_EQ(t.at("batch_size"), 5);
  EXPECT_NE(config.at("recipe").at("source").get<std::string>().find("Pattern Recognition 2024"), std::string::npos);
  fs::remove_all(root);
  fs::remove_all(root.string() + "-run");
}

// The up axis a train command picks when --up-axis is left at -1: ModelNet40's
// meshes stand on z, the resampled text and HDF5 copies (PointNet, PointNet++)
// on y. Each fixture is loaded, so the layout name the reader reports is the
// one the table is looked up with.
TEST(ModelNet, EachLayoutHasTheUpAxisItsDataUse) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  pointcloud::ModelNetLoadOptions o;
  o.points_per_shape = 8;
  const auto off = pointcloud::load_modelnet40(make_off_tree(), o);
  EXPECT_EQ(off.layout, "ModelNet40");
  EXPECT_EQ(tasks::default_up_axis(off.layout), 2);
  const auto resampled = pointcloud::load_modelnet40(make_resampled("modelnet_up_axis").string(), o);
  EXPECT_EQ(tasks::default_up_axis(resampled.layout), 1);
  const auto h5 = pointcloud::load_modelnet40(make_h5("modelnet_up_axis_h5").string(), o);
  EXPECT_EQ(tasks::default_up_axis(h5.layout), 1);
  EXPECT_EQ(tasks::default_up_axis("synthetic"), 1);
  EXPECT_EQ(tasks::default_up_axis("shapenetcore_partanno_segmentation_benchmark_v0_normal"), 1);
  EXPECT_THROW(tasks::default_up_axis("elsewhere"), std::invalid_argument);
  // resolve_up_axis keeps a chosen axis and fills -1 from the layout.
  pointcloud::PointViewOptions v;
  v.up_axis = -1;
  EXPECT_NE(tasks::resolve_up_axis(v, off.layout).find("z (the ModelNet40 layout's"), std::string::npos);
  EXPECT_EQ(v.up_axis, 2);
  v.up_axis = 0;
  tasks::resolve_up_axis(v, off.layout);
  EXPECT_EQ(v.up_axis, 0);
}

// points_per_shape 0 keeps every stored point, so that FPS picks among all of
// them (the resampled distribution stores 10,000 per shape); meshes get 2,048
// surface samples.
TEST(ModelNet, ZeroPointsPerShapeKeepsEveryStoredPoint) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  pointcloud::ModelNetLoadOptions all;
  all.points_per_shape = 0;
  const auto resampled = pointcloud::load_modelnet40(make_resampled("modelnet_all_points").string(), all);
  EXPECT_EQ(resampled.train.points.size(1), 20);  // the fixture's files hold 20 points
  EXPECT_EQ(resampled.test.points.size(1), 20);
  const auto h5 = pointcloud::load_modelnet40(make_h5("modelnet_all_points_h5").string(), all);
  EXPECT_EQ(h5.train.points.size(1), 32);
  const auto off = pointcloud::load_modelnet40(make_off_tree(), all);
  EXPECT_EQ(off.train.points.size(1), 2048);
  // A file with fewer points than the first one is named.
  const auto root = make_resampled("modelnet_all_points_short");
  write_text_file(root / "modelnet40_normal_resampled" / "bed" / "bed_0002.txt", "0,0,0,0,0,1\n1,1,1,0,0,1\n");
  expect_data_error([&] { pointcloud::load_modelnet40(root.string(), all); }, "bed_0002.txt",
                    "2 points, fewer than the 20");
  all.points_per_shape = -1;
  EXPECT_THROW(pointcloud::load_modelnet40(root.string(), all), UsageError);
}
