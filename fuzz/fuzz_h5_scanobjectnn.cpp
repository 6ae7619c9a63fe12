// ScanObjectNN's h5_files layout (main_split_nobg/, the OBJ_ONLY variant):
// "data" and "label" in 0..14; the input is the .h5 file of both splits.
// With QKV_FUZZ_SEED_DIR set, first writes a valid one there.
#include <cstdlib>

#include "fuzz/fuzz_h5.h"

namespace {

const std::string& folder() {
  static const std::string dir = [] {
    const auto d = std::filesystem::path(qkv::fuzz::scratch_path("h5_files", ""));
    std::filesystem::create_directories(d / "main_split_nobg");
    return d.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5's own error stack printing, off (qkv reports)
  if (const char* dir = std::getenv("QKV_FUZZ_SEED_DIR")) qkv::fuzz::write_h5_seed(std::string(dir) + "/seed.h5", {2});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qkv::pointcloud::ModelNetLoadOptions options;
  options.layout = "scanobjectnn";
  options.scanobjectnn_variant = "OBJ_ONLY";
  options.points_per_shape = 0;
  qkv::fuzz::load_h5_folder(folder(),
                            {"main_split_nobg/training_objectdataset.h5", "main_split_nobg/test_objectdataset.h5"},
                            data, size, options);
  return 0;
}
