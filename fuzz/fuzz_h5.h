#pragma once
// Shared by the HDF5 point-cloud targets (fuzz_h5_modelnet,
// fuzz_h5_scanobjectnn): a folder laid out as the data set ships, whose two
// split files (training and test) both hold the fuzzer's input, read
// through load_modelnet40; and a small valid file of that layout as a seed.
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "qkv/pointcloud/modelnet.h"

namespace qkv::fuzz {

// A valid HDF5 point-cloud file: "data" [2, 16, 3] float32 and "label" of
// `label_dims` (uint8, classes 0 and 1).
inline void write_h5_seed(const std::string& path, const std::vector<hsize_t>& label_dims) {
  std::vector<float> points(2 * 16 * 3);
  for (size_t i = 0; i < points.size(); ++i) points[i] = static_cast<float>((i * 37) % 11) / 11.0f - 0.5f;
  const unsigned char labels[2] = {0, 1};
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) __builtin_trap();
  const hsize_t data_dims[3] = {2, 16, 3};
  const hid_t data_space = H5Screate_simple(3, data_dims, nullptr);
  const hid_t data = H5Dcreate2(file, "data", H5T_IEEE_F32LE, data_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(data, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, points.data());
  const hid_t label_space = H5Screate_simple(static_cast<int>(label_dims.size()), label_dims.data(), nullptr);
  const hid_t label = H5Dcreate2(file, "label", H5T_STD_U8LE, label_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(label, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels);
  H5Dclose(label), H5Sclose(label_space), H5Dclose(data), H5Sclose(data_space), H5Fclose(file);
}

// The input as both split files of `files` below `folder`, then the load.
inline void load_h5_folder(const std::string& folder, const std::vector<std::string>& files, const uint8_t* data,
                           size_t size, const pointcloud::ModelNetLoadOptions& options) {
  for (const auto& f : files) write_input(folder + "/" + f, data, size);
  expect_documented([&] { pointcloud::load_modelnet40(folder, options); });
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace qkv::fuzz
