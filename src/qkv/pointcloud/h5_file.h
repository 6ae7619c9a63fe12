#pragma once
// One HDF5 file, its datasets read whole into tensors with one-line errors
// naming the file. libhdf5 stays out of this header: a build without HDF5
// (runtime/build_parts.h) has the class, whose constructor refuses the file.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace qkv::pointcloud {

class H5File {
 public:
  // DataError if it is not an HDF5 file, or the build has no HDF5.
  explicit H5File(std::string path);
  ~H5File();
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  bool has(const std::string& name) const;
  // The whole dataset (rank 1 to 3) converted by HDF5 to `dtype` (float32 or
  // int64). integer_only refuses floating-point storage (labels).
  at::Tensor read(const std::string& name, at::ScalarType dtype, bool integer_only) const;

 private:
  static int64_t open(const std::string& path);

  std::string path_;
  int64_t id_;  // HDF5's hid_t, closed by the destructor
};

}  // namespace qkv::pointcloud
