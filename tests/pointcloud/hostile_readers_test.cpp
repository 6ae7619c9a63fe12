// Hostile mesh, point and list files: counts declared far beyond what the
// file holds, counts whose byte sizes overflow, endless lines, FIFOs. Each
// is a DataError naming the file, raised before the reader reserves what
// the header declares (checked in a child under an address-space budget).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "qkv/core/atomic_file.h"
#include "qkv/pointcloud/data_files.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/runtime/build_parts.h"
#include "support/bounded_child.h"
#include "support/paths.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

using pointcloud::read_off;
using pointcloud::read_ply;

std::string write(const std::string& name, const std::string& contents) {
  const auto path = temp_path("hostile_" + name);
  write_file_atomic(path, contents);
  return path;
}

const std::string kTriangle = "0 0 0\n1 0 0\n0 1 0\n";

TEST(HostileMesh, OnePolygonOfMillionsOfCornersIsReadInAddressSpaceInProportionToTheFile) {
  // 2,000,000 corners at 2 bytes each: a 4 MB file fanned into 1,999,998
  // triangles of 24 bytes. Streamed and reserved once, the reader needs the
  // text and the triangles (13x the file); it needed about 55x before (a
  // token and a corner vector per face, and a face vector grown by doubling).
  const int64_t corners = 2000000;
  std::string off = "OFF\n4 1 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n" + std::to_string(corners);
  std::string obj = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf";
  for (int64_t i = 0; i < corners; ++i) {
    off += i == 0 ? " 0" : i % 2 ? " 1" : " 3";
    obj += i == 0 ? " 1" : i % 2 ? " 2" : " 4";
  }
  const auto off_path = write("fan.off", off + "\n");
  const auto obj_path = write("fan.obj", obj + "\n");
  const int64_t budget = 16 * static_cast<int64_t>(off.size()) + 64 * kMiB;
  for (const auto& path : {off_path, obj_path}) {
    const auto outcome = outcome_in_child(budget, [&] {
      const auto mesh = pointcloud::read_shape_file(path);
      if (static_cast<int64_t>(mesh.faces.size()) != corners - 2) throw std::runtime_error("wrong triangle count");
    });
    EXPECT_EQ(outcome, "ok") << path;
  }
}

TEST(HostileMesh, OffDeclaringTwoToThe31VerticesOrFacesIsRefusedByName) {
  // Under `prlimit --as=6G` these were a bare std::bad_alloc naming no file.
  const auto vertices = write("v.off", "OFF\n2147483648 1 0\n" + kTriangle);
  expect_bounded_data_error(
      256 * kMiB, [&] { read_off(vertices); }, vertices, "2147483648 vertices");
  const auto faces = write("f.off", "OFF\n3 2147483648 0\n" + kTriangle + "3 0 1 2\n");
  expect_bounded_data_error(
      256 * kMiB, [&] { read_off(faces); }, faces, "2147483648 faces");
  const auto overflow = write("o.off", "OFF\n9223372036854775807 9223372036854775807 0\n" + kTriangle);
  expect_bounded_data_error(
      256 * kMiB, [&] { read_off(overflow); }, overflow, "truncated");
}

std::string ply_header(const std::string& format, const std::string& vertices, const std::string& faces) {
  return "ply\nformat " + format + " 1.0\nelement vertex " + vertices +
         "\nproperty float x\nproperty float y\nproperty float z\nelement face " + faces +
         "\nproperty list uchar int vertex_indices\nend_header\n";
}

TEST(HostileMesh, PlyDeclaringTwoToThe31ItemsIsRefusedByName) {
  const auto ascii = write("v.ply", ply_header("ascii", "2147483648", "1") + kTriangle + "3 0 1 2\n");
  expect_bounded_data_error(
      256 * kMiB, [&] { read_ply(ascii); }, ascii, "2147483648 'vertex' items");
  const auto faces = write("f.ply", ply_header("ascii", "3", "2147483648") + kTriangle + "3 0 1 2\n");
  expect_bounded_data_error(
      256 * kMiB, [&] { read_ply(faces); }, faces, "2147483648 'face' items");
  const auto binary = write("b.ply", ply_header("binary_little_endian", "2147483648", "0") + std::string(36, '\0'));
  expect_bounded_data_error(
      256 * kMiB, [&] { read_ply(binary); }, binary, "2147483648 'vertex' items");
  // count x row size overflows 64 bits: refused, not wrapped around to a small skip.
  const auto wrap = write("w.ply",
                          "ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n"
                          "property float y\nproperty float z\nelement junk 4611686018427387905\n"
                          "property int a\nend_header\n" +
                              std::string(36, '\0'));
  expect_bounded_data_error(
      256 * kMiB, [&] { read_ply(wrap); }, wrap, "truncated");
  // Items without properties take no bytes, so no size bounds their count:
  // reading would loop 2^63 times. Refused from the header.
  const auto empty = write("e.ply",
                           "ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\n"
                           "property float y\nproperty float z\nelement junk 9223372036854775807\n"
                           "end_header\n" +
                               std::string(36, '\0'));
  expect_bounded_data_error(
      256 * kMiB, [&] { read_ply(empty); }, empty, "'junk' declares 9223372036854775807 items but no properties");
}

TEST(HostileMesh, FuzzFindingsStayFixed) {
  // fuzz_ply: a second 'vertex' element with fewer properties was read with
  // the first one's property indices (a heap read past the item's values).
  const std::string crash =
      std::string(qkv::testing::source_dir()) + "/fuzz/regressions/ply/crash-f040c4da78e135982181af58ff4406352d5c879e";
  expect_data_error([&] { read_ply(crash); }, crash, "element 'vertex' declared twice");
  const auto twice = write("twice.ply",
                           "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                           "property float z\nelement vertex 1\nproperty float x\nend_header\n" +
                               kTriangle + "0\n");
  expect_data_error([&] { read_ply(twice); }, twice, "declared twice");
}

TEST(HostileMesh, ForgedHdf5FilesAreDataErrors) {
  const std::string regressions = std::string(qkv::testing::source_dir()) + "/fuzz/regressions/";
  // fuzz_h5_scanobjectnn: a forged local heap made libhdf5 copy into the
  // null pointer its failed allocation returned (SIGSEGV in H5F__accum_read).
  // The child process that walks the metadata first dies instead of us.
  // A build without HDF5 refuses every file by name instead.
  const bool hdf5 = built_with(Part::Hdf5);
  const std::string crash = regressions + "h5_scanobjectnn/crash-c12863e03494391c235224538b7aa4f1c778e2fe";
  expect_data_error(
      [&] {
        pointcloud::H5File h5(crash);
        h5.has("data");
      },
      crash, hdf5 ? "HDF5 cannot read" : "this qkv was built without HDF5");
  // fuzz_h5_modelnet: a header asking for 380 GB: malloc fails, HDF5 reports it.
  const std::string huge = regressions + "h5_modelnet/crash-554c634b913eef8724a576d5d68bf96628cabc2e";
  expect_data_error([&] { pointcloud::read_h5_clouds(pointcloud::H5File(huge), huge, 1); }, huge,
                    hdf5 ? "" : "rebuild it where HDF5 (libhdf5-dev) is found");
}

TEST(HostileMesh, AFifoIsRefusedWithoutOpeningIt) {
  const auto path = temp_path("hostile_fifo.off");
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_bounded_data_error(
      64 * kMiB, [&] { read_off(path); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { read_ply(path); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { pointcloud::read_point_text(path); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { pointcloud::read_part_text(path, nullptr); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { pointcloud::read_list(path); }, path, "not a regular file");
}

TEST(HostileMesh, EndlessLinesInLineReadersAreRefusedAtTheirLine) {
  const auto part = write("long.txt", "0 0 0 0 0 1 0\n" + std::string(1 << 20, '7') + "\n");
  expect_data_error([&] { pointcloud::read_part_text(part, nullptr); }, part, "line 2: longer than");
  const auto list = write("long_list.txt", "airplane\n" + std::string(1 << 20, 'a') + "\n");
  expect_data_error([&] { pointcloud::read_list(list); }, list, "line 2: longer than");
}

}  // namespace
}  // namespace qkv::testing
