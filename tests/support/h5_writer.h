#pragma once
// HDF5 test files laid out as the public data sets are (ModelNet40's
// ply_hdf5_2048, ShapeNet-part's hdf5_data, ScanObjectNN's h5_files), one
// dataset at a time.
#include <gtest/gtest.h>

// CMake gives the HDF5 include folder to the library only; Debian keeps it in hdf5/serial.
#if __has_include(<hdf5.h>)
#include <hdf5.h>
#else
#include <hdf5/serial/hdf5.h>
#endif

#include <vector>

namespace qkv::testing {

// `buf` written as the dataset `name` of the open `file`, of shape `dims`,
// stored as `file_type` and read from memory as `mem_type`; a test failure
// where HDF5 refuses.
inline void put_h5_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type,
                           const std::vector<hsize_t>& dims, const void* buf) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(ds, 0) << name;
  EXPECT_GE(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), 0) << name;
  H5Dclose(ds);
  H5Sclose(space);
}

}  // namespace qkv::testing
