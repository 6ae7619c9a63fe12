#pragma once
// HDF5 test files laid out as the public data sets are (ModelNet40's
// ply_hdf5_2048, ShapeNet-part's hdf5_data, ScanObjectNN's h5_files). A build
// without HDF5 (runtime/build_parts.h) has no writer: its tests skip first
// (QKV_SKIP_WITHOUT in support/build_parts.h).
#include <gtest/gtest.h>

#if QKV_TESTS_WRITE_HDF5
#include <hdf5.h>
#endif

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace qkv::testing {

// One dataset: its name, shape and values, stored little-endian as the type of
// its values (float32, uint8 or int32), as the public files store them.
struct H5Dataset {
  std::string name;
  std::vector<uint64_t> dims;
  std::variant<std::vector<float>, std::vector<uint8_t>, std::vector<int32_t>> values;
};

// A test failure where HDF5 refuses, or where the tests have no HDF5.
inline void write_h5_file(const std::string& path, const std::vector<H5Dataset>& datasets) {
#if QKV_TESTS_WRITE_HDF5
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  for (const auto& d : datasets) {
    const hid_t file_types[] = {H5T_IEEE_F32LE, H5T_STD_U8LE, H5T_STD_I32LE};
    const hid_t memory_types[] = {H5T_NATIVE_FLOAT, H5T_NATIVE_UINT8, H5T_NATIVE_INT32};
    const void* values = std::visit([](const auto& v) -> const void* { return v.data(); }, d.values);
    const std::vector<hsize_t> dims(d.dims.begin(), d.dims.end());
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t ds =
        H5Dcreate2(file, d.name.c_str(), file_types[d.values.index()], space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(ds, 0) << path << ": " << d.name;
    if (ds >= 0) {
      EXPECT_GE(H5Dwrite(ds, memory_types[d.values.index()], H5S_ALL, H5S_ALL, H5P_DEFAULT, values), 0) << d.name;
      H5Dclose(ds);
    }
    H5Sclose(space);
  }
  H5Fclose(file);
#else
  ADD_FAILURE() << path << ": the tests were built without HDF5 (skip with QKV_SKIP_WITHOUT first)";
  (void)datasets;
#endif
}

}  // namespace qkv::testing
