// STL meshes, ASCII and binary.
#include "fuzz/fuzz_input.h"
#include "qkv/pointcloud/mesh_read.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".stl");
  qkv::fuzz::write_input(path, data, size);
  qkv::fuzz::expect_documented([&] { qkv::pointcloud::read_stl(path); });
  return 0;
}
