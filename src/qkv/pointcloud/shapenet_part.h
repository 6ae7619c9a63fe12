#pragma once
// ShapeNet-part (Yi et al. 2016) as it is distributed, for part segmentation:
// 16 object categories whose 50 parts are numbered globally (Airplane 0-3,
// Bag 4-5, ..., Table 47-49). No downloads: the folder is given.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/pointcloud/modelnet.h"

namespace qkv::pointcloud {

struct PartCategory {
  std::string name;    // "Airplane"
  std::string synset;  // "02691156": the folder name in the distribution
  int64_t first_part;  // its parts are first_part .. first_part + parts - 1
  int64_t parts;
};

constexpr int64_t kShapeNetPartCount = 50;

// The 16 categories in the distribution's order (the category index of the
// h5 layout's "label").
const std::vector<PartCategory>& shapenet_part_categories();
// The category names in that order.
std::vector<std::string> shapenet_part_category_names();
// The index of a category by name (any case) or synset; ConfigError naming
// `key` (the setting that gave the name) and listing the names otherwise.
int64_t find_part_category(const std::string& name_or_synset, const std::string& key = "category");

// One shape file of the text layout: lines "x y z nx ny nz part".
struct PartText {
  std::vector<std::array<float, 6>> rows;  // x y z (relative to origin) nx ny nz
  std::vector<int64_t> parts;
  std::array<double, 3> origin{0, 0, 0};  // as Mesh::origin: the file's x y z are rows' + origin
};
// Reads it; DataError naming the file and line for a wrong column count, a
// value that is not a number or not finite, a part id that is not an integer,
// or (with `category`) a part outside the category's range; also for no points.
PartText read_part_text(const std::string& path, const PartCategory* category = nullptr);
// Whether a .txt file is ShapeNet-part's text layout rather than a point
// text read_shape_file reads: its first lines (up to 64) are each seven
// numbers x y z nx ny nz part, the normal a unit vector and the part a
// whole number (one outside 0-49 is refused by the reader, naming it). A
// header line, a comment, or seven columns of another kind (a scan's x y z
// intensity r g b) go to read_shape_file.
bool looks_like_part_text(const std::string& path);

// The two public layouts, by the folder names they are published under.
inline constexpr const char* kShapeNetPartTextLayout = "shapenetcore_partanno_segmentation_benchmark_v0_normal";
inline constexpr const char* kShapeNetPartH5Layout = "hdf5_data";

struct ShapeNetPartData {
  // labels: category index into shapenet_part_categories(); point_labels:
  // global part ids; class_names: the 16 category names.
  PointCloudSet train, val, test;
  std::string layout;  // kShapeNetPartTextLayout or kShapeNetPartH5Layout
};

// Points a shape of the text layout (the built-in part shapes too) is
// resampled to when ShapeNetPartLoadOptions::points_per_shape is 0.
inline constexpr int64_t kPartTextPointsByDefault = 2500;

struct ShapeNetPartLoadOptions {
  int64_t points_per_shape = 2048;      // 0: the layout's (2,500 for the text layout, 2,048 for HDF5)
  uint64_t seed = 0;                    // resampling of the text layout's shapes
  bool with_normals = false;            // the text layout has them; the h5 layout does not (DataError)
  int64_t max_per_category = 0;         // keep at most this many shapes per category and split (the first); 0 = all
  std::vector<std::string> categories;  // load only these (names or synsets); empty = all
};

// Loads `dir`, or the one of its subfolders named like a layout:
//  - "shapenetcore_partanno_segmentation_benchmark_v0_normal":
//    synsetoffset2category.txt (lines "Airplane<TAB>02691156"),
//    train_test_split/shuffled_{train,val,test}_file_list.json (JSON lists of
//    "shape_data/<synset>/<token>"), and <synset>/<token>.txt with lines
//    "x y z nx ny nz part". A shape is resampled to points_per_shape points:
//    a random subset when it has at least that many, else all of them plus
//    random repeats, seeded by (seed, synset/token) so that a shape's points do
//    not depend on which other shapes are loaded. Files load in parallel.
//  - "hdf5_data": {train,val,test}_hdf5_file_list.txt listing .h5 files (by
//    base name inside dir), datasets "data" [S, P, 3], "label" [S, 1]
//    (category index) and "pid" [S, P] (part ids); the first points_per_shape
//    points are kept.
// Every problem is a DataError naming the file at fault: a folder of no known
// layout, a missing split or list file, a synset that is not one of the 16, a
// wrong column count, a part id outside its category's range, non-finite
// values, an empty split, too few points. Bad options are UsageErrors.
ShapeNetPartData load_shapenet_part(const std::string& dir, const ShapeNetPartLoadOptions& options = {});

}  // namespace qkv::pointcloud
