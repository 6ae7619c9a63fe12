#pragma once
// File helpers the data-set readers share: existence checks that never throw,
// the list files of the public layouts (one entry a line), and the point
// clouds of their HDF5 files (read through h5_file.h).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "qkv/pointcloud/h5_file.h"

namespace qkv::pointcloud {

bool is_file(const std::filesystem::path& p);
bool is_dir(const std::filesystem::path& p);

// The folder of a data set a caller names: DataError "DIR: a file, not a data
// folder (...)", "DIR: not a folder (a FIFO, device or socket)" or "DIR: no
// such folder".
void require_data_folder(const std::string& dir_name);

struct ListLine {
  std::string text;
  int64_t line;  // 1-based, for messages
};

// The non-blank lines of a list file, trimmed. DataError for a missing or
// unreadable file.
std::vector<ListLine> read_list(const std::filesystem::path& path);

// The point clouds of one file of the HDF5 layouts (ModelNet40's
// ply_hdf5_2048, ShapeNet-part's hdf5_data): "data" [S, P, 3] read whole and
// "label" [S, 1] or [S] (any integer type). DataError naming the file for a
// wrong shape, fewer than min_points points per shape or a label count that
// differs from the shapes'.
struct H5Clouds {
  at::Tensor points;  // [S, P, 3] float32 (P as stored)
  at::Tensor labels;  // [S] int64
};
H5Clouds read_h5_clouds(const H5File& h5, const std::string& file, int64_t min_points);

// The HDF5 files a layout's list file names (ModelNet40's train_files.txt,
// ShapeNet-part's train_hdf5_file_list.txt): the lists give paths under the
// authors' own root (data/modelnet40_ply_hdf5_2048/ply_data_train0.h5), so
// each line's file name is looked up in `dir`. DataError naming the list and
// the line for a file that is not there.
std::vector<std::string> listed_h5_files(const std::filesystem::path& dir, const std::filesystem::path& list_path);

// What a loader's max_per_class (max_per_category) means: at most `cap`
// shapes of each class (0 = all), the first offered.
class ClassCap {
 public:
  ClassCap(size_t classes, int64_t cap) : taken(classes, 0), cap_(cap) {}
  // Counts a shape of class `label` (in 0..classes-1) unless its class is
  // full; returns whether it was taken.
  bool take(int64_t label);

  std::vector<int64_t> taken;  // per class

 private:
  int64_t cap_;
};

// The shapes of one split an HDF5 loader keeps, in file order, as `cap`
// allows, each with its label and its source "file[row]".
struct KeptShapes {
  explicit KeptShapes(ClassCap cap) : cap(std::move(cap)) {}

  ClassCap cap;
  std::vector<int64_t> labels;
  std::vector<std::string> sources;

  // Row `row` of `file`, of class `label`; returns whether it was kept.
  bool keep(const std::string& file, int64_t row, int64_t label);
};

// Rows `rows` of an HDF5 file's dataset `name` (`values`, [S, P, ...]), each
// cut to its first `points`; DataError naming `file` and `name` for NaN or
// infinite values.
at::Tensor finite_h5_rows(const at::Tensor& values, const std::vector<int64_t>& rows, int64_t points,
                          const std::string& file, const char* name);

}  // namespace qkv::pointcloud
