// ModelNet40's modelnet40_ply_hdf5_2048 layout: lists, shape names and the
// .h5 files ("data", "label", optional "normal"); the input is the .h5 file
// of both splits. With QKV_FUZZ_SEED_DIR set, first writes a valid one there.
#include <cstdlib>

#include "fuzz/fuzz_h5.h"

namespace {

const std::string& folder() {
  static const std::string dir = [] {
    const auto d = std::filesystem::path(qkv::fuzz::scratch_path("modelnet40_ply_hdf5_2048", ""));
    std::filesystem::create_directories(d);
    qkv::fuzz::write_text((d / "shape_names.txt").string(), "a\nb\n");
    qkv::fuzz::write_text((d / "train_files.txt").string(), "data/modelnet40_ply_hdf5_2048/train.h5\n");
    qkv::fuzz::write_text((d / "test_files.txt").string(), "data/modelnet40_ply_hdf5_2048/test.h5\n");
    return d.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5's own error stack printing, off (qkv reports)
  if (const char* dir = std::getenv("QKV_FUZZ_SEED_DIR"))
    qkv::fuzz::write_h5_seed(std::string(dir) + "/seed.h5", {2, 1});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qkv::pointcloud::ModelNetLoadOptions options;
  options.layout = "hdf5";
  options.points_per_shape = 0;
  qkv::fuzz::load_h5_folder(folder(), {"train.h5", "test.h5"}, data, size, options);
  return 0;
}
