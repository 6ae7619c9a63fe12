// ModelNet40's resampled point files (modelnet40_normal_resampled/*.txt):
// "x,y,z,nx,ny,nz" lines, read whole and with a point limit.
#include "fuzz/fuzz_input.h"
#include "qkv/pointcloud/mesh_read.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".txt");
  qkv::fuzz::write_input(path, data, size);
  qkv::fuzz::expect_documented([&] { qkv::pointcloud::read_point_text(path); });
  qkv::fuzz::expect_documented([&] { qkv::pointcloud::read_point_text(path, 4); });
  return 0;
}
