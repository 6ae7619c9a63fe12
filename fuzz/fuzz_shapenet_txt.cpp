// ShapeNet-part point files: "x y z nx ny nz part" lines, with and without
// a category whose part range the labels must fall in; and the list files.
#include "fuzz/fuzz_input.h"
#include "qkv/pointcloud/data_files.h"
#include "qkv/pointcloud/shapenet_part.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = qkv::fuzz::scratch_path("input", ".txt");
  qkv::fuzz::write_input(path, data, size);
  const auto& categories = qkv::pointcloud::shapenet_part_categories();
  qkv::fuzz::expect_documented([&] { qkv::pointcloud::read_part_text(path); });
  qkv::fuzz::expect_documented([&] { qkv::pointcloud::read_part_text(path, &categories[4]); });
  qkv::fuzz::expect_documented([&] { qkv::pointcloud::read_list(path); });
  return 0;
}
