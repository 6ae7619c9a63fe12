// ShapeNet-part loading (both layouts, on tiny trees written here) and its
// malformed cases; the built-in synthetic part shapes, read back by the same
// reader; the per-point targets of the data set.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/pointcloud/point_dataset.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_parts.h"
#include "support/build_parts.h"
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

// `n` points of a shape: x = base + i, y = i, z = part; normals +y; parts
// alternate between the given ids.
std::string shape_text(float base, int n, std::vector<int> parts) {
  std::ostringstream s;
  for (int i = 0; i < n; ++i) {
    const int part = parts[static_cast<size_t>(i) % parts.size()];
    s << base + float(i) << ' ' << i << ' ' << part << " 0 1 0 " << part << ".000000\n";
  }
  return s.str();
}

// Airplane (02691156) and Mug (03797390): train 2 + 1, val 1 + 0, test 1 + 1.
fs::path make_text_tree(const std::string& name) {
  const fs::path dir = fresh_dir(name);
  write_text_file(dir / "synsetoffset2category.txt", "Airplane\t02691156\nMug\t03797390\n");
  write_text_file(dir / "02691156" / "a1.txt", shape_text(0, 40, {0, 1, 3}));
  write_text_file(dir / "02691156" / "a2.txt", shape_text(100, 10, {2}));  // fewer points than asked: repeats
  write_text_file(dir / "02691156" / "a3.txt", shape_text(200, 40, {0, 1}));
  write_text_file(dir / "02691156" / "a4.txt", shape_text(300, 40, {1, 2}));
  write_text_file(dir / "03797390" / "m1.txt", shape_text(400, 40, {36, 37}));
  write_text_file(dir / "03797390" / "m2.txt", shape_text(500, 40, {37}));
  write_text_file(dir / "train_test_split" / "shuffled_train_file_list.json",
                  R"(["shape_data/02691156/a1", "shape_data/03797390/m1", "shape_data/02691156/a2"])");
  write_text_file(dir / "train_test_split" / "shuffled_val_file_list.json", R"(["shape_data/02691156/a3"])");
  write_text_file(dir / "train_test_split" / "shuffled_test_file_list.json",
                  R"(["shape_data/02691156/a4", "shape_data/03797390/m2"])");
  return dir;
}

ShapeNetPartLoadOptions options(int64_t points) {
  ShapeNetPartLoadOptions o;
  o.points_per_shape = points;
  o.with_normals = true;
  return o;
}

}  // namespace

TEST(ShapeNetPart, CategoriesAndTheirPartRanges) {
  const auto& cats = shapenet_part_categories();
  ASSERT_EQ(cats.size(), 16u);
  int64_t next = 0;
  for (const auto& c : cats) {  // contiguous, in order, 50 in all
    EXPECT_EQ(c.first_part, next) << c.name;
    next += c.parts;
  }
  EXPECT_EQ(next, kShapeNetPartCount);
  EXPECT_EQ(cats[static_cast<size_t>(find_part_category("table"))].first_part, 47);
  EXPECT_EQ(find_part_category("03797390"), find_part_category("Mug"));
  EXPECT_THROW(find_part_category("Sofa"), UsageError);
}

TEST(ShapeNetPart, ZeroPointsPerShapeStoresMoreThanAViewTakes) {
  // 2,500 per text-layout shape (all plus repeats for the fixture's short
  // files), so the default 2,048-point views draw a new subset each epoch.
  const auto data = load_shapenet_part(make_text_tree("shapenet_text_default").string(), options(0));
  EXPECT_EQ(data.train.points.size(1), 2500);
  EXPECT_EQ(data.train.point_labels.size(1), 2500);
  EXPECT_THROW(load_shapenet_part(make_text_tree("shapenet_text_negative").string(), options(-1)), UsageError);
}

TEST(ShapeNetPart, TextLayoutLoadsEverySplitWithLabelsPerPoint) {
  const auto dir = make_text_tree("shapenet_text");
  const auto data = load_shapenet_part(dir.string(), options(16));
  EXPECT_EQ(data.layout, "shapenetcore_partanno_segmentation_benchmark_v0_normal");
  ASSERT_EQ(data.train.size(), 3);
  EXPECT_EQ(data.val.size(), 1);
  EXPECT_EQ(data.test.size(), 2);
  EXPECT_EQ(data.train.class_names.size(), 16u);
  const int64_t airplane = find_part_category("Airplane"), mug = find_part_category("Mug");
  EXPECT_EQ(data.train.labels[0].item<int64_t>(), airplane);
  EXPECT_EQ(data.train.labels[1].item<int64_t>(), mug);
  EXPECT_EQ(data.train.points.sizes(), (std::vector<int64_t>{3, 16, 3}));
  EXPECT_EQ(data.train.point_labels.sizes(), (std::vector<int64_t>{3, 16}));
  // Every loaded point is a row of its file with that row's label (z holds it),
  // distinct rows for a subset, all 10 rows (plus repeats) for the short file.
  for (int64_t s = 0; s < 3; ++s) {
    std::set<int64_t> rows;
    for (int64_t i = 0; i < 16; ++i) {
      EXPECT_EQ(data.train.points[s][i][2].item<float>(), float(data.train.point_labels[s][i].item<int64_t>()));
      EXPECT_EQ(data.train.normals[s][i][1].item<float>(), 1.f);
      rows.insert(static_cast<int64_t>(data.train.points[s][i][1].item<float>()));
    }
    EXPECT_EQ(rows.size(), s == 2 ? 10u : 16u);
  }
  // Seeded per shape: the same seed gives the same points, another seed others.
  const auto again = load_shapenet_part(dir.string(), options(16));
  EXPECT_TRUE(torch::equal(again.train.points, data.train.points));
  auto other = options(16);
  other.seed = 5;
  EXPECT_FALSE(torch::equal(load_shapenet_part(dir.string(), other).train.points, data.train.points));
  // Filtering by category and per-category caps.
  auto only = options(16);
  only.categories = {"airplane"};
  EXPECT_EQ(load_shapenet_part(dir.string(), only).train.size(), 2);
  only.max_per_category = 1;
  EXPECT_EQ(load_shapenet_part(dir.string(), only).train.size(), 1);
  only.categories = {"03797390"};  // no mug in val: an empty split
  expect_data_error([&] { load_shapenet_part(dir.string(), only); }, "shuffled_val_file_list.json", "lists no shapes");
}

TEST(ShapeNetPart, MalformedTextLayoutNamesTheFile) {
  {  // a part id outside its category
    const auto dir = make_text_tree("shapenet_bad_part");
    write_text_file(dir / "03797390" / "m1.txt", shape_text(400, 40, {36, 12}));
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "m1.txt",
                      "part 12 is not a part of Mug (36-37)");
  }
  {  // a wrong column count
    const auto dir = make_text_tree("shapenet_bad_columns");
    write_text_file(dir / "02691156" / "a2.txt", "0 0 0 0 1 0 0\n1 2 3 0 1 0\n");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "a2.txt: line 2", "expected 7 columns");
  }
  {  // a missing split file
    const auto dir = make_text_tree("shapenet_no_split");
    fs::remove(dir / "train_test_split" / "shuffled_val_file_list.json");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "shuffled_val_file_list.json",
                      "missing split file");
  }
  {  // a listed shape that is not there, a synset not in the category file, a bad synset
    const auto dir = make_text_tree("shapenet_missing_shape");
    fs::remove(dir / "02691156" / "a3.txt");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "a3.txt", "missing");
    write_text_file(dir / "train_test_split" / "shuffled_val_file_list.json", R"(["shape_data/04379243/t1"])");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "04379243", "synsetoffset2category.txt");
    write_text_file(dir / "synsetoffset2category.txt", "Sofa\t04256520\n");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "synsetoffset2category.txt: line 1",
                      "not one of the 16");
  }
  {  // not a number, NaN, not JSON, no layout at all
    const auto dir = make_text_tree("shapenet_bad_values");
    write_text_file(dir / "02691156" / "a1.txt", "0 0 0 0 1 0 x\n");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "a1.txt: line 1", "not a number");
    write_text_file(dir / "02691156" / "a1.txt", "0 nan 0 0 1 0 0\n");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "a1.txt: line 1", "not finite");
    write_text_file(dir / "train_test_split" / "shuffled_train_file_list.json", "[\"shape_data/");
    expect_data_error([&] { load_shapenet_part(dir.string(), options(16)); }, "shuffled_train_file_list.json",
                      "not valid JSON");
    expect_data_error([&] { load_shapenet_part((dir / "02691156").string(), options(16)); }, "02691156",
                      "not a ShapeNet-part folder");
  }
}

// ---------------------------------------------------------------------------- hdf5_data

namespace {

// data [S, 8, 3] = base + index, label [S, 1] uint8, pid [S, 8] uint8.
void write_h5(const std::string& path, float base, const std::vector<uint8_t>& categories,
              const std::vector<std::vector<uint8_t>>& pids) {
  const auto s = static_cast<uint64_t>(categories.size());
  const uint64_t p = 8;
  std::vector<float> data(s * p * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = base + float(i);
  std::vector<uint8_t> pid;
  for (const auto& row : pids) pid.insert(pid.end(), row.begin(), row.end());
  qkv::testing::write_h5_file(path, {{"data", {s, p, 3}, data}, {"label", {s, 1}, categories}, {"pid", {s, p}, pid}});
}

fs::path make_h5_tree(const std::string& name) {
  const fs::path dir = fresh_dir(name);
  make_directories(dir.string());
  write_text_file(dir / "train_hdf5_file_list.txt", "hdf5_data/ply_data_train0.h5\n");
  write_text_file(dir / "val_hdf5_file_list.txt", "hdf5_data/ply_data_val0.h5\n");
  write_text_file(dir / "test_hdf5_file_list.txt", "hdf5_data/ply_data_test0.h5\n");
  const std::vector<uint8_t> airplane{0, 1, 2, 3, 0, 1, 2, 3}, mug{36, 37, 36, 37, 36, 37, 36, 37};
  write_h5((dir / "ply_data_train0.h5").string(), 0, {0, 11}, {airplane, mug});
  write_h5((dir / "ply_data_val0.h5").string(), 1000, {11}, {mug});
  write_h5((dir / "ply_data_test0.h5").string(), 2000, {0}, {airplane});
  return dir;
}

}  // namespace

TEST(ShapeNetPartH5, ReadsDataCategoriesAndPartIds) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  const auto dir = make_h5_tree("shapenet_h5");
  ShapeNetPartLoadOptions o;
  o.points_per_shape = 6;
  const auto data = load_shapenet_part(dir.string(), o);
  EXPECT_EQ(data.layout, "hdf5_data");
  ASSERT_EQ(data.train.size(), 2);
  EXPECT_EQ(data.train.labels[1].item<int64_t>(), 11);
  EXPECT_EQ(data.train.point_labels[1][1].item<int64_t>(), 37);
  EXPECT_EQ(data.train.points.sizes(), (std::vector<int64_t>{2, 6, 3}));
  EXPECT_EQ(data.val.points[0][0][0].item<float>(), 1000.f);
  EXPECT_EQ(data.test.size(), 1);
  o.with_normals = true;
  expect_data_error([&] { load_shapenet_part(dir.string(), o); }, dir.string(), "no normals");
}

TEST(ShapeNetPartH5, MalformedFilesNameTheFile) {
  QKV_SKIP_WITHOUT(qkv::Part::Hdf5);
  const auto dir = make_h5_tree("shapenet_h5_bad");
  ShapeNetPartLoadOptions o;
  o.points_per_shape = 8;
  ShapeNetPartLoadOptions nine;
  nine.points_per_shape = 9;
  expect_data_error([&] { load_shapenet_part(dir.string(), nine); }, "ply_data_train0.h5", "fewer than the 9");
  write_h5((dir / "ply_data_val0.h5").string(), 0, {11}, {{36, 37, 36, 2, 36, 37, 36, 37}});
  expect_data_error([&] { load_shapenet_part(dir.string(), o); }, "ply_data_val0.h5", "not a part of Mug (36-37)");
  write_h5((dir / "ply_data_val0.h5").string(), 0, {16}, {{36, 37, 36, 37, 36, 37, 36, 37}});
  expect_data_error([&] { load_shapenet_part(dir.string(), o); }, "ply_data_val0.h5", "outside 0..15");
  write_text_file(dir / "ply_data_val0.h5", "not hdf5");
  expect_data_error([&] { load_shapenet_part(dir.string(), o); }, "ply_data_val0.h5", "cannot open as an HDF5 file");
  fs::remove(dir / "val_hdf5_file_list.txt");
  expect_data_error([&] { load_shapenet_part(dir.string(), o); }, "val_hdf5_file_list.txt", "missing list file");
}

// ---------------------------------------------------------------------------- synthetic parts

TEST(SynthParts, WrittenInTheTextLayoutAndReadBack) {
  const auto dir = fresh_dir("synth_parts");
  SynthPartsOptions o;
  o.train_per_category = 3;
  o.val_per_category = 1;
  o.test_per_category = 2;
  o.points_per_shape = 300;
  const auto summary = write_synth_parts(dir, o);
  EXPECT_EQ(summary.categories, synth_part_categories());
  EXPECT_EQ(summary.categories.size(), 6u);
  ShapeNetPartLoadOptions load;
  load.points_per_shape = 256;
  load.with_normals = true;
  const auto data = load_shapenet_part(dir, load);
  EXPECT_EQ(data.train.size(), 18);
  EXPECT_EQ(data.val.size(), 6);
  EXPECT_EQ(data.test.size(), 12);
  // Every label is a part of the shape's category, and every category shows
  // at least two of its parts; normals are unit.
  std::map<int64_t, std::set<int64_t>> seen;
  for (int64_t s = 0; s < data.train.size(); ++s) {
    const auto& cat = shapenet_part_categories()[static_cast<size_t>(data.train.labels[s].item<int64_t>())];
    const auto parts = data.train.point_labels[s];
    EXPECT_GE(parts.min().item<int64_t>(), cat.first_part) << data.train.sources[static_cast<size_t>(s)];
    EXPECT_LT(parts.max().item<int64_t>(), cat.first_part + cat.parts) << data.train.sources[static_cast<size_t>(s)];
    for (int64_t i = 0; i < parts.size(0); ++i)
      seen[data.train.labels[s].item<int64_t>()].insert(parts[i].item<int64_t>());
  }
  EXPECT_EQ(seen.size(), 6u);
  for (const auto& [c, parts] : seen)
    EXPECT_GE(parts.size(), 2u) << shapenet_part_categories()[static_cast<size_t>(c)].name;
  EXPECT_LT((data.train.normals.norm(2, -1) - 1).abs().max().item<double>(), 1e-4);
  // The same options write the same bytes.
  const auto again = fresh_dir("synth_parts_again");
  write_synth_parts(again, o);
  for (const auto& f : fs::recursive_directory_iterator(dir)) {
    if (!f.is_regular_file()) continue;
    const auto other = fs::path(again) / fs::relative(f.path(), dir);
    EXPECT_EQ(read_file_bytes(f.path().string()), read_file_bytes(other.string())) << f.path();
  }
  o.categories = {"Bag"};
  EXPECT_THROW(write_synth_parts(dir, o), UsageError);  // no synthetic bags
  fs::remove_all(dir);
  fs::remove_all(again);
}

TEST(SynthParts, DataSetTargetsFollowThePointsTheModelSees) {
  const auto dir = make_text_tree("shapenet_dataset");
  auto set = std::make_shared<PointCloudSet>(load_shapenet_part(dir.string(), options(16)).train);
  PointViewOptions view;
  view.num_points = 8;
  view.sampling = "random";
  view.normalize = false;
  view.train = true;
  const PointCloudDataset dataset(set, view);
  const auto batch = dataset.get({0, 1, 2});
  EXPECT_EQ(batch.target.sizes(), (std::vector<int64_t>{3, 8}));
  EXPECT_TRUE(torch::equal(batch.input("category"), set->labels));
  // z of each point holds its part id (see shape_text): labels travel with points.
  EXPECT_TRUE(torch::equal(batch.input("points").select(1, 2).round().to(torch::kLong), batch.target));
}
