// A build without HDF5 (not found, or QKV_WITHOUT names it): an existing file
// is refused with the line runtime/build_parts.h words; a missing one with
// the error every reader gives.
#include "qkv/core/file_input.h"
#include "qkv/pointcloud/h5_file.h"
#include "qkv/runtime/build_parts.h"

namespace qkv::pointcloud {

H5File::H5File(std::string path) : path_(std::move(path)), id_(open(path_)) {}

H5File::~H5File() = default;

int64_t H5File::open(const std::string& path) {
  regular_file_size(path);
  refuse_without(Part::Hdf5, path);
}

bool H5File::has(const std::string&) const { refuse_without(Part::Hdf5, path_); }

at::Tensor H5File::read(const std::string&, at::ScalarType, bool) const { refuse_without(Part::Hdf5, path_); }

}  // namespace qkv::pointcloud
