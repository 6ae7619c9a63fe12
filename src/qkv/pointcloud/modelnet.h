#pragma once
// ModelNet40 as it is distributed, in any of its three usual layouts, loaded
// into fixed-size point tensors. No downloads: the folder is given.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qkv::pointcloud {

// S shapes of P points each, with labels into class_names (for part
// segmentation: the object category, and a part label per point).
struct PointCloudSet {
  at::Tensor points;                     // [S, P, 3] float32
  at::Tensor normals;                    // [S, P, 3] float32, or undefined when not loaded
  at::Tensor features;                   // [S, P, F] float32 per-point features (point_features.h), or undefined
  at::Tensor labels;                     // [S] int64 in [0, class_names.size())
  at::Tensor point_labels;               // [S, P] int64 per-point labels (part segmentation), or undefined
  std::vector<std::string> class_names;  // label -> name
  std::vector<std::string> sources;      // per shape, for messages: a file, or "file.h5[row]"

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// The layouts load_modelnet40 reads, by the name ModelNetData::layout gives
// them (their distribution's folder name, or what they look like).
inline constexpr const char* kModelNetOffLayout = "ModelNet40";  // <class>/{train,test}/*
inline constexpr const char* kModelNetResampledLayout = "modelnet40_normal_resampled";
inline constexpr const char* kModelNetH5Layout = "modelnet40_ply_hdf5_2048";
inline constexpr const char* kSplitLayout = "split";                // {train,test}/<class>/*
inline constexpr const char* kFlatLayout = "flat";                  // <class>/*, cut by test_fraction
inline constexpr const char* kScanObjectNNLayout = "ScanObjectNN";  // its h5_files, one variant

// ScanObjectNN's variants (Uy et al., ICCV 2019) and its 15 classes, in label
// order. OBJ_ONLY is main_split_nobg/{training,test}_objectdataset.h5, the
// others main_split/ with the variant's suffix: OBJ_BG "", PB_T25
// "_augmented25_norot", PB_T25_R "_augmented25rot", PB_T50_R
// "_augmentedrot", PB_T50_RS "_augmentedrot_scale75" (the hardest, the one
// rotation-invariance papers report; our default).
inline constexpr const char* kScanObjectNNVariants = "OBJ_ONLY|OBJ_BG|PB_T25|PB_T25_R|PB_T50_R|PB_T50_RS";
const std::vector<std::string>& scanobjectnn_class_names();

// The names ModelNetLoadOptions::layout takes: "auto" (detected), "modelnet"
// (the OFF tree), "split", "flat", "resampled", "hdf5", "scanobjectnn".
inline constexpr const char* kLayoutChoices[] = {"auto",      "modelnet", "split",       "flat",
                                                 "resampled", "hdf5",     "scanobjectnn"};
inline bool is_layout_choice(const std::string& name) {
  for (const char* c : kLayoutChoices)
    if (name == c) return true;
  return false;
}

struct ModelNetData {
  PointCloudSet train, test;
  // Which layout was found, by its distribution's folder name: "ModelNet40"
  // (OFF meshes), "modelnet40_normal_resampled" or "modelnet40_ply_hdf5_2048".
  std::string layout;
  // The OFF-tree layout: files in the split folders that are not shape files,
  // counted by extension ("skipped 3 files that qkv does not read as shapes
  // (2 .mtl, 1 .png)"); empty when there were none.
  std::string skipped;
};

// Surface samples of an OFF mesh (the built-in shapes too) when
// ModelNetLoadOptions::points_per_shape is 0.
inline constexpr int64_t kMeshSamplesByDefault = 2048;

struct ModelNetLoadOptions {
  // 0: every point a pre-sampled layout stores (as many as its first file
  // holds: 10,000 in modelnet40_normal_resampled, 2,048 in the HDF5 files),
  // and 2,048 surface samples of an OFF mesh.
  int64_t points_per_shape = 2048;
  uint64_t seed = 0;          // surface sampling of OFF meshes only; the other layouts are pre-sampled
  bool with_normals = false;  // load normals too (face normals for OFF meshes); an error where there are none
  // Per-point features by name (point_features.h), from point-cloud files of
  // a class tree (the modelnet, split and flat layouts); the pre-sampled
  // layouts hold none (UsageError).
  std::vector<std::string> point_features;
  int64_t max_per_class = 0;  // keep at most this many shapes per class and split (the first ones); 0 = all
  // The flat layout (<class>/*): the share of each class's files, drawn with
  // the seed, that goes to the test split (rounded; at least one, and one
  // left for training). 0.2: our choice.
  double test_fraction = 0.2;
  // Which layout to read (kLayoutChoices): "auto" detects it as described
  // below; any other name reads the folder as that layout, and a folder that
  // is not one is a DataError saying what is missing.
  std::string layout = "auto";
  // A class tree's files that are not shape files are a DataError listing
  // them by extension, instead of being counted in `skipped`.
  bool strict = false;
  // The ScanObjectNN layout: which variant's files to read (kScanObjectNNVariants).
  std::string scanobjectnn_variant = "PB_T50_RS";
};

// Loads `dir`, or the one of its subfolders named like a layout below:
//  - "ModelNet40": <class>/{train,test}/<shape files> of any format
//    read_shape_file reads but .txt (mixed formats allowed; other files are
//    counted in `skipped`); classes are the sorted
//    subfolder names; each mesh is sampled area-weighted to points_per_shape
//    points, seeded by (seed, the file's path below dir) so that a shape's
//    points do not depend on which other shapes are loaded. Files load in
//    parallel (at::parallel_for).
//  - "split": {train,test}/<class>/<shape files>; the classes are train's
//    folders and test must have each of them.
//  - "flat": <class>/<shape files>, split per class by test_fraction with a
//    seeded shuffle (the same seed, the same split).
//  - "modelnet40_normal_resampled": modelnet40_shape_names.txt (or
//    shape_names.txt), modelnet40_{train,test}.txt listing ids such as
//    airplane_0001 stored as <class>/<id>.txt with lines x,y,z,nx,ny,nz; the
//    first points_per_shape points are kept, as is standard.
//  - "modelnet40_ply_hdf5_2048": {train,test}_files.txt listing .h5 files
//    (found by base name inside dir), shape_names.txt, datasets "data"
//    [S, 2048, 3], "label" [S, 1] or [S] of any integer type and optionally
//    "normal" [S, 2048, 3]; the first points_per_shape points are kept.
//  - "ScanObjectNN": its h5_files folder (main_split/, main_split_nobg/) or
//    one of those two: the variant's training and test files, datasets
//    "data" [S, 2048, 3] and "label" [S] in 0..14 (the per-point "mask" is not
//    read: OBJ_ONLY's files already hold no background); the first
//    points_per_shape points are kept. No normals.
// With layout "auto" the first of these found decides: the HDF5 lists (or an
// .h5 file), the resampled lists, <class>/train/, train/<class>/, then
// <class>/ holding shape files; a folder of none of them is looked for in
// subfolders named ModelNet40, modelnet40_normal_resampled,
// modelnet40_ply_hdf5_2048.
// Every problem is a DataError naming the file (or folder) at fault: a folder
// of no known layout (the message lists what was looked for), a missing list
// file, an unknown class, a label out of range, an empty split or class, a
// shape with too few points, a malformed shape file. Bad options are UsageErrors.
ModelNetData load_modelnet40(const std::string& dir, const ModelNetLoadOptions& options = {});

// The shape files in `folder` and below it, in name order, by the class
// trees' rule: hidden files and folders (.DS_Store, __MACOSX, qkv's ledger)
// skipped unsaid, .txt left out (beside shapes a note more often than
// points), every other file that is not a shape counted in `skipped` ("3
// files that qkv does not read as shapes (2 .mtl, 1 .png)", or "").
struct ShapeFilesBelow {
  std::vector<std::string> files;
  std::string skipped;
};
ShapeFilesBelow shape_files_below(const std::string& folder);

}  // namespace qkv::pointcloud
