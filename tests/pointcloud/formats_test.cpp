// The formats of other tools: Wavefront OBJ, STL (ASCII and binary), PCL's
// PCD (ASCII and binary), big-endian PLY; written here as those tools write
// them, read back, and their malformed variants refused naming the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/modelnet.h"
#include "qkv/pointcloud/point_features.h"
#include "support/bounded_child.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

using namespace qkv::pointcloud;

std::string write_format_file(const std::string& name, const std::string& contents) {
  const auto path = temp_path("formats_" + name);
  write_file_atomic(path, contents);
  return path;
}

// Little-endian bytes of a value, or big-endian ones.
template <typename T>
void put_bytes(std::string& out, T value, bool big_endian = false) {
  char b[sizeof(T)];
  std::memcpy(b, &value, sizeof(T));
  if (big_endian) std::reverse(b, b + sizeof(T));
  out.append(b, sizeof(T));
}

void expect_format_error(const std::string& path, const std::string& what, const std::function<void()>& f) {
  const auto message = data_error_of(f);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << "expected '" << what << "' in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// A malformed file: its name, its bytes, and what its error must say.
struct MalformedCase {
  const char* name;
  std::string bytes;
  const char* what;
};

// Each case written and read with `read`, refused with its `what` and the file named.
void expect_each_refused(const std::vector<MalformedCase>& cases, Mesh (*read)(const std::string&)) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = write_format_file(c.name, c.bytes);
    expect_format_error(path, c.what, [&] { read(path); });
  }
}

// A unit cube's 8 corners and its 6 faces as quads, Blender's way.
const char* const kCubeObj =
    "# Blender v2.93 OBJ File\nmtllib cube.mtl\no Cube\n"
    "v 1 1 -1\nv 1 -1 -1\nv 1 1 1\nv 1 -1 1\nv -1 1 -1\nv -1 -1 -1\nv -1 1 1\nv -1 -1 1\n"
    "vt 0.625 0.5\nvn 0 1 0\nvn 0 0 1\nusemtl Material\ns off\n"
    "f 1/1/1 5/1/1 7/1/1 3/1/1\nf 4//2 3//2 7//2 8//2\nf 8 7 5 6\nf 6 2 4 8\nf 2 1 3 4\nf 6 5 1 2\n";

TEST(ReadObj, QuadsTexturesNormalsAndGroupsAsBlenderWritesThem) {
  const auto mesh = read_shape_file(write_format_file("cube.obj", kCubeObj));
  EXPECT_EQ(mesh.vertices.size(), 8u);
  ASSERT_EQ(mesh.faces.size(), 12u);  // 6 quads fanned
  EXPECT_EQ(mesh.faces[0], (std::array<int64_t, 3>{0, 4, 6}));
  EXPECT_EQ(mesh.faces[1], (std::array<int64_t, 3>{0, 6, 2}));
  EXPECT_TRUE(mesh.normals.empty());  // OBJ normals belong to corners, not vertices
}

TEST(ReadObj, NegativeIndicesCountBackFromTheLastVertex) {
  const auto mesh = read_obj(write_format_file("rel.obj",
                                               "v 0 0 0\nv 1 0 0\nv 0 1 0\nf -3 -2 -1\n"
                                               "v 0 0 1\nf -4/1 -3/2 -1/3\n"));
  ASSERT_EQ(mesh.faces.size(), 2u);
  EXPECT_EQ(mesh.faces[0], (std::array<int64_t, 3>{0, 1, 2}));
  EXPECT_EQ(mesh.faces[1], (std::array<int64_t, 3>{0, 1, 3}));
  const auto cloud = read_obj(write_format_file("cloud.obj", "v 0 0 0 1 0 0\nv 1 2 3 0 1 0\n"));
  EXPECT_TRUE(cloud.is_point_cloud());
  EXPECT_EQ(cloud.vertices[1], (Vec3{1, 2, 3}));
}

TEST(ReadObj, MalformedFilesNameFileAndLine) {
  const std::vector<MalformedCase> cases = {
      {"index.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 x\n", "line 4: bad vertex index 'x'"},
      {"zero.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n", "bad vertex index '0'"},
      {"before.obj", "v 0 0 0\nv 1 0 0\nf -1 -2 -3\n", "reaches before the first vertex"},
      {"forward.obj", "v 0 0 0\nv 1 0 0\nf 1 2 9\nf 1 2 3\nv 0 1 0\n",
       "line 3: vertex index 9 is out of range (3 vertices)"},
      {"two.obj", "v 0 0 0\nv 1 0 0\nf 1 2\n", "need at least 3"},
      {"short.obj", "v 0 0\n", "expected x y z"},
      {"nan.obj", "v 0 nan 0\n", "not finite"},
      {"binary.obj", "v 0 0 0\n\x01\x02\x03\n", "not an OBJ statement"},
      {"empty.obj", "# nothing\no thing\n", "no vertices"},
  };
  expect_each_refused(cases, read_obj);
}

std::string binary_stl(int32_t triangles, const std::string& header = "binary STL written by a test") {
  std::string out = header;
  out.resize(80, ' ');
  put_bytes<uint32_t>(out, static_cast<uint32_t>(triangles));
  for (int32_t t = 0; t < triangles; ++t) {
    for (float v : {0.f, 0.f, 1.f}) put_bytes(out, v);  // facet normal
    for (float v : {0.f, 0.f, float(t), 1.f, 0.f, float(t), 0.f, 1.f, float(t)}) put_bytes(out, v);
    put_bytes<uint16_t>(out, 0);
  }
  return out;
}

TEST(ReadStl, BinaryAsciiAndBinaryWhoseHeaderSaysSolid) {
  const auto binary = read_shape_file(write_format_file("two.stl", binary_stl(2)));
  ASSERT_EQ(binary.faces.size(), 2u);
  EXPECT_EQ(binary.vertices.size(), 6u);
  EXPECT_EQ(binary.vertices[4], (Vec3{1, 0, 1}));
  // Exporters that start a binary header with "solid" are read by size.
  EXPECT_EQ(read_stl(write_format_file("solid.stl", binary_stl(3, "solid exported by a CAD tool"))).faces.size(), 3u);
  const auto ascii = read_stl(
      write_format_file("ascii.stl",
                        "solid part\n  facet normal 0 0 1\n    outer loop\n      vertex 0 0 0\n      vertex 1 0 0\n"
                        "      vertex 0 1 0\n    endloop\n  endfacet\nendsolid part\n"));
  ASSERT_EQ(ascii.faces.size(), 1u);
  EXPECT_EQ(ascii.vertices[1], (Vec3{1, 0, 0}));
  // Keywords in upper case, as older CAD tools write them.
  const auto upper =
      read_stl(write_format_file("upper.stl",
                                 "SOLID PART\nFACET NORMAL 0 0 1\nOUTER LOOP\nVERTEX 0 0 0\nVERTEX 1 0 0\n"
                                 "VERTEX 0 1 0\nENDLOOP\nENDFACET\nENDSOLID PART\n"));
  EXPECT_EQ(upper.faces.size(), 1u);
}

TEST(ReadStl, MalformedFilesAreRefused) {
  auto nan = binary_stl(1);
  const float not_a_number = std::nanf("");
  std::memcpy(&nan[84 + 12 + 4], &not_a_number, 4);
  auto cut = binary_stl(4);
  cut.resize(cut.size() - 10);
  const std::vector<MalformedCase> cases = {
      {"nan.stl", nan, "not finite"},
      {"cut.stl", cut, "neither ASCII STL"},
      {"none.stl", binary_stl(0), "no triangles"},
      {"loop.stl", "solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\n", "no 'endloop'"},
      {"two.stl", "solid x\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nendloop\nendsolid\n", "need 3"},
      {"word.stl", "solid x\nfacet normal 0 0 1\nouter loop\nvertex 0 0 zero\n", "non-numeric"},
      {"empty.stl", "solid x\nendsolid x\n", "no facets"},
      // A binary file whose header starts "solid" (as some exporters write it), 2 bytes too long.
      {"padded.stl", binary_stl(12, "solid exported") + "\n\n",
       "nor binary STL: 84 + 50 x 12 triangles = 684 bytes, the file has 686"},
  };
  expect_each_refused(cases, read_stl);
}

const char* const kPcdHeader =
    "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\n"
    "FIELDS x y z normal_x normal_y normal_z curvature\nSIZE 4 4 4 4 4 4 4\nTYPE F F F F F F F\n"
    "COUNT 1 1 1 1 1 1 1\nWIDTH 3\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 3\n";

// Three points of kPcdHeader's fields, as an ascii PCD: the middle row is the case at hand.
Mesh read_pcd_around(const std::string& name, const std::string& middle_row) {
  return read_shape_file(write_format_file(
      name, std::string(kPcdHeader) + "DATA ascii\n1 2 3 0 0 1 0.5\n" + middle_row + "\n4 5 6 0 1 0 0.1\n"));
}

TEST(ReadPcd, AsciiWithNormalsDropsTheNaNPointsOfAnOrganizedCloud) {
  const auto cloud = read_pcd_around("normals.pcd", "nan nan nan nan nan nan nan");
  ASSERT_EQ(cloud.vertices.size(), 2u);
  EXPECT_EQ(cloud.vertices[1], (Vec3{4, 5, 6}));
  ASSERT_EQ(cloud.normals.size(), 2u);
  EXPECT_EQ(cloud.normals[1], (Vec3{0, 1, 0}));
  // The other field is a per-point property, the dropped point's value dropped with it.
  ASSERT_EQ(cloud.vertex_properties.size(), 1u);
  EXPECT_EQ(cloud.vertex_properties[0].name, "curvature");
  EXPECT_EQ(cloud.vertex_properties[0].values, (std::vector<double>{0.5, 0.1}));
}

TEST(ReadPcd, ANaNNormalFromPclsNormalEstimationIsThePointsZeros) {
  // PCL gives a point with too few neighbours a NaN normal (and curvature): the point is kept.
  const auto cloud = read_pcd_around("nan_normal.pcd", "7 8 9 nan nan nan nan");
  ASSERT_EQ(cloud.vertices.size(), 3u);
  EXPECT_EQ(cloud.vertices[1], (Vec3{7, 8, 9}));
  ASSERT_EQ(cloud.normals.size(), 3u);
  EXPECT_EQ(cloud.normals[1], (Vec3{0, 0, 0}));
  EXPECT_EQ(cloud.normals[2], (Vec3{0, 1, 0}));
  EXPECT_THROW(read_pcd_around("inf_normal.pcd", "7 8 9 inf 0 0 0"), DataError);
}

TEST(ReadPcd, AsciiColourAsPclWritesItAndIntensity) {
  // PCL writes a float rgb as the float whose bits pack 0x00RRGGBB.
  const uint32_t packed = (200u << 16) | (100u << 8) | 50u;
  float as_float = 0;
  std::memcpy(&as_float, &packed, sizeof as_float);
  char rgb[64];
  std::snprintf(rgb, sizeof rgb, "%.9g", static_cast<double>(as_float));
  const auto cloud = read_shape_file(
      write_format_file("colour.pcd",
                        "FIELDS x y z rgb intensity\nSIZE 4 4 4 4 4\nTYPE F F F F F\nCOUNT 1 1 1 1 1\nPOINTS 2\n"
                        "DATA ascii\n0 0 0 " +
                            std::string(rgb) + " 0.25\n1 1 1 " + std::string(rgb) + " 7\n"));
  ASSERT_EQ(cloud.colors.size(), 2u);
  EXPECT_EQ(cloud.colors[1], (std::array<uint8_t, 3>{200, 100, 50}));
  ASSERT_EQ(cloud.vertex_properties.size(), 1u);
  EXPECT_EQ(cloud.vertex_properties[0].name, "intensity");
  EXPECT_EQ(cloud.vertex_properties[0].values, (std::vector<double>{0.25, 7}));
  const auto rows = point_feature_rows(cloud, {"intensity", "rgb"}, "colour.pcd");
  EXPECT_TRUE(torch::equal(rows[1], torch::tensor({7.f, 200.f / 255, 100.f / 255, 50.f / 255})));
  // PCL 1.7 and later write an F rgb in text as the packed integer (an opaque
  // colour's float is a NaN): 0xFFC81E28 is (200, 30, 40), not the float 4.29e9's bits.
  const auto integer = read_shape_file(
      write_format_file("colour_uint.pcd",
                        "FIELDS x y z rgb\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\nPOINTS 2\nDATA ascii\n"
                        "0 0 0 4291305000\n1 1 1 0\n"));
  ASSERT_EQ(integer.colors.size(), 2u);
  EXPECT_EQ(integer.colors[0], (std::array<uint8_t, 3>{200, 30, 40}));
  EXPECT_EQ(integer.colors[1], (std::array<uint8_t, 3>{0, 0, 0}));
}

TEST(PointFeatures, NamesAreCheckedAndMissingOnesNamed) {
  EXPECT_EQ(parse_point_features("rgb,intensity", "--point-features"), (std::vector<std::string>{"rgb", "intensity"}));
  EXPECT_EQ(point_feature_channels({"rgb", "intensity"}), 4);
  EXPECT_TRUE(parse_point_features("", "x").empty());
  expect_usage_error([] { parse_point_features("rgb,,x", "--f"); }, "--f 'rgb,,x': an empty feature name");
  expect_usage_error([] { parse_point_features("rgb,rgb", "--f"); }, "'rgb' named twice");
  expect_usage_error([] { parse_point_features("a b", "--f"); }, "'a b' is not a feature name");
  Mesh cloud;
  cloud.vertices = {{0, 0, 0}, {1, 0, 0}};
  cloud.vertex_properties.push_back({"intensity", false, {1, NAN}});
  expect_data_error([&] { point_feature_rows(cloud, {"rgb"}, "c.ply"); }, "c.ply",
                    "no colour (feature 'rgb'; the file holds: intensity)");
  expect_data_error([&] { point_feature_rows(cloud, {"reflectance"}, "c.ply"); }, "c.ply",
                    "no per-point 'reflectance'");
  expect_data_error([&] { point_feature_rows(cloud, {"intensity"}, "c.ply"); }, "c.ply",
                    "point 1: 'intensity' is not a finite");
  cloud.faces = {{0, 1, 0}};
  expect_data_error([&] { point_feature_rows(cloud, {"intensity"}, "m.off"); }, "m.off", "a mesh; per-point features");
}

TEST(ReadPcd, BinaryWithAPackedColourAndIntegerFields) {
  std::string pcd =
      "VERSION .7\nFIELDS x y z rgb label\nSIZE 4 4 8 4 2\nTYPE F F F U I\nCOUNT 1 1 1 1 1\n"
      "WIDTH 2\nHEIGHT 1\nPOINTS 2\nDATA binary\n";
  for (int i = 0; i < 2; ++i) {
    put_bytes<float>(pcd, 1.5f + i);
    put_bytes<float>(pcd, -2.f);
    put_bytes<double>(pcd, 0.25 * i);
    put_bytes<uint32_t>(pcd, 0xff0000);
    put_bytes<int16_t>(pcd, -7);
  }
  const auto cloud = read_pcd(write_format_file("binary.pcd", pcd));
  ASSERT_EQ(cloud.vertices.size(), 2u);
  EXPECT_EQ(cloud.vertices[1], (Vec3{2.5f, -2.f, 0.25f}));
  EXPECT_TRUE(cloud.normals.empty());
  ASSERT_EQ(cloud.colors.size(), 2u);
  EXPECT_EQ(cloud.colors[0], (std::array<uint8_t, 3>{255, 0, 0}));
  ASSERT_EQ(cloud.vertex_properties.size(), 1u);
  EXPECT_TRUE(cloud.vertex_properties[0].integer);
  EXPECT_EQ(cloud.vertex_properties[0].values, (std::vector<double>{-7, -7}));
}

TEST(ReadPcd, MalformedFilesAreRefusedInBoundedMemory) {
  const std::string xyz = "FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n";
  const std::vector<MalformedCase> cases = {
      // Points past the count the header gives, and two counts that disagree: which is the cloud?
      {"more.pcd", xyz + "POINTS 1\nDATA ascii\n1 2 3\n4 5 6\n", "wrong counts: data after the 1 points"},
      {"morebin.pcd", xyz + "POINTS 1\nDATA binary\n" + std::string(24, '\0'),
       "wrong counts: 12 bytes after the 1 points"},
      {"wh.pcd", xyz + "WIDTH 10\nHEIGHT 10\nPOINTS 3\nDATA ascii\n1 2 3\n4 5 6\n7 8 9\n",
       "WIDTH 10 x HEIGHT 10 is not POINTS 3"},
      {"lzf.pcd", xyz + "POINTS 1\nDATA binary_compressed\n", "binary_compressed"},
      {"short.pcd", xyz + "POINTS 2\nDATA binary\n" + std::string(12, '\0'), "truncated"},
      {"noxyz.pcd", "FIELDS a b c\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nPOINTS 1\nDATA ascii\n1 2 3\n",
       "no x, y and z"},
      {"sizes.pcd", "FIELDS x y z\nSIZE 4 4\n", "lists 2 values for 3 fields"},
      {"columns.pcd", xyz + "POINTS 1\nDATA ascii\n1 2          \n", "2 values, the fields take 3"},
      {"inf.pcd", xyz + "POINTS 1\nDATA ascii\n1 inf 2\n", "not finite"},
      {"allnan.pcd", xyz + "POINTS 1\nDATA ascii\nnan nan nan\n", "all 1 are NaN"},
      {"nodata.pcd", xyz + "POINTS 1\n", "no DATA line"},
  };
  expect_each_refused(cases, read_pcd);
  // A line end after a binary cloud's points is no data.
  EXPECT_EQ(read_pcd(write_format_file("nl.pcd", xyz + "POINTS 1\nDATA binary\n" + std::string(12, '\0') + "\n"))
                .vertices.size(),
            1u);
  const auto huge =
      write_format_file("huge.pcd", xyz + "POINTS 4611686018427387904\nDATA binary\n" + std::string(12, '\0'));
  expect_bounded_data_error(
      256 * kMiB, [&] { read_pcd(huge); }, huge, "truncated");
}

TEST(ReadPly, BigEndianReadsAsItsLittleEndianTwin) {
  auto ply = [](bool big) {
    std::string out = std::string("ply\nformat ") + (big ? "binary_big_endian" : "binary_little_endian") +
                      " 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty double z\n"
                      "element face 1\nproperty list uchar int vertex_indices\nend_header\n";
    for (int v = 0; v < 3; ++v) {
      put_bytes<float>(out, 0.5f * v, big);
      put_bytes<float>(out, -1.f, big);
      put_bytes<double>(out, 3.0 + v, big);
    }
    put_bytes<uint8_t>(out, 3, big);
    for (int32_t i : {2, 1, 0}) put_bytes<int32_t>(out, i, big);
    return out;
  };
  const auto big = read_ply(write_format_file("big.ply", ply(true)));
  const auto little = read_ply(write_format_file("little.ply", ply(false)));
  EXPECT_EQ(big.vertices, little.vertices);
  EXPECT_EQ(big.faces, little.faces);
  EXPECT_EQ(big.vertices[2], (Vec3{1.f, -1.f, 5.f}));
}

TEST(ReadShapeFile, DispatchesByExtensionAndNamesTheOnesItReads) {
  EXPECT_EQ(read_shape_file(write_format_file("points.CSV", "0,0,0\n1,2,3\n")).vertices.size(), 2u);
  expect_usage_error([&] { read_shape_file(temp_path("mesh.glb")); }, ".obj, .stl, .pcd");
}

TEST(ModelNetTree, MixedFormatsLoadAndOtherFilesAreCounted) {
  const auto root = fresh_dir("formats_tree");
  const std::string tetra_off = "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3\n";
  const std::string tetra_obj = "v 0 0 0\nv 2 0 0\nv 0 2 0\nv 0 0 2\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n";
  for (const char* cls : {"a", "b"})
    for (const char* split : {"train", "test"}) {
      const std::string dir = root + "/" + cls + "/" + split;
      write_text_file(dir + "/one.off", tetra_off);
      write_text_file(dir + "/two.obj", tetra_obj);
      write_text_file(dir + "/three.stl", binary_stl(2));
      write_text_file(dir + "/notes.md", "not a shape");
    }
  ModelNetLoadOptions o;
  o.points_per_shape = 64;
  const auto data = load_modelnet40(root, o);
  EXPECT_EQ(data.train.size(), 6);
  EXPECT_EQ(data.test.size(), 6);
  EXPECT_EQ(data.skipped, "skipped 4 files that qkv does not read as shapes (4 .md)");
  EXPECT_TRUE(torch::isfinite(data.train.points).all().item<bool>());
  // A link to a device named like a shape, and shapes one folder too deep,
  // were left out without a word: counted now.
  std::filesystem::create_symlink("/dev/null", root + "/a/train/device.obj");
  write_text_file(root + "/b/test/nested/four.off", tetra_off);
  EXPECT_EQ(load_modelnet40(root, o).skipped,
            "skipped 6 files that qkv does not read as shapes (4 .md, 1 not a regular file, 1 subfolder)");
  // A shape beside the class folders belongs to none: counted too.
  write_text_file(root + "/five.off", tetra_off);
  EXPECT_EQ(load_modelnet40(root, o).skipped,
            "skipped 7 files that qkv does not read as shapes (4 .md, 1 not a regular file, 1 outside a class "
            "folder, 1 subfolder)");
}

// Ten tetrahedra per class in `dir/<class>/` (flat) or `dir/<split>/<class>/`.
void write_tetra_folder(const std::string& dir, int count) {
  for (int i = 0; i < count; ++i)
    write_text_file(
        dir + "/t" + std::to_string(i) + ".obj",
        "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 " + std::to_string(1 + i) + "\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n");
}

TEST(ModelNetTree, AFlatFolderIsSplitPerClassTheSameWayForTheSameSeed) {
  const auto root = fresh_dir("formats_flat");
  write_tetra_folder(root + "/cone", 10);
  write_tetra_folder(root + "/spike", 5);
  ModelNetLoadOptions o;
  o.points_per_shape = 32;
  o.seed = 7;
  const auto a = load_modelnet40(root, o);
  EXPECT_EQ(a.layout, "flat");
  EXPECT_EQ(a.test.size(), 2 + 1);  // 20 % of 10 and of 5, rounded
  EXPECT_EQ(a.train.size(), 8 + 4);
  EXPECT_EQ(a.train.class_names, (std::vector<std::string>{"cone", "spike"}));
  const auto b = load_modelnet40(root, o);
  EXPECT_EQ(a.test.sources, b.test.sources);
  o.seed = 8;
  o.test_fraction = 0.5;
  const auto c = load_modelnet40(root, o);
  EXPECT_EQ(c.test.size(), 5 + 3);  // half of 10, and of 5 rounded half away from zero
  write_tetra_folder(root, 2);      // beside the class folders, of no class: counted, the split unchanged
  const auto d = load_modelnet40(root, o);
  EXPECT_EQ(d.skipped, "skipped 2 files that qkv does not read as shapes (2 outside a class folder)");
  EXPECT_EQ(d.test.sources, c.test.sources);
  write_tetra_folder(root + "/lonely", 1);
  expect_format_error(root + "/lonely", "needs at least 2 per class", [&] { load_modelnet40(root, o); });
}

TEST(ModelNetTree, ASplitFolderReadsTrainAndTestClasses) {
  const auto root = fresh_dir("formats_split");
  write_tetra_folder(root + "/train/cone", 3);
  write_tetra_folder(root + "/train/spike", 2);
  write_tetra_folder(root + "/test/cone", 1);
  write_tetra_folder(root + "/test/spike", 1);
  ModelNetLoadOptions o;
  o.points_per_shape = 32;
  const auto data = load_modelnet40(root, o);
  EXPECT_EQ(data.layout, "split");
  EXPECT_EQ(data.train.size(), 5);
  EXPECT_EQ(data.test.size(), 2);
  write_tetra_folder(root + "/train", 1);  // beside train/'s class folders: no class's
  EXPECT_EQ(data.skipped, "");
  EXPECT_EQ(load_modelnet40(root, o).skipped,
            "skipped 1 file that qkv does not read as shapes (1 outside a class folder)");
  o.strict = true;
  expect_format_error(root + "/train/t0.obj", "not read as a shape (outside a class folder;",
                      [&] { load_modelnet40(root, o); });
  o.strict = false;
  write_tetra_folder(root + "/test/blob", 1);
  expect_format_error(root + "/test/blob", "a test class that train/ does not have", [&] { load_modelnet40(root, o); });
}

TEST(ModelNetTree, StrictRefusesTheFirstOtherFileByName) {
  const auto root = fresh_dir("formats_strict");
  write_tetra_folder(root + "/cone", 4);
  write_tetra_folder(root + "/spike", 4);
  write_text_file(root + "/spike/readme.md", "about the spikes");
  ModelNetLoadOptions o;
  o.points_per_shape = 16;
  EXPECT_EQ(load_modelnet40(root, o).skipped, "skipped 1 file that qkv does not read as shapes (1 .md)");
  o.strict = true;
  expect_format_error(root + "/spike/readme.md", "in strict mode", [&] { load_modelnet40(root, o); });
}

TEST(ModelNetTree, ANamedLayoutIsReadAsSuchOrRefusedSayingWhatIsMissing) {
  const auto root = fresh_dir("formats_named_layout");
  write_tetra_folder(root + "/cone", 4);
  write_tetra_folder(root + "/spike", 4);
  // A class tree whose class folders also hold train/ and test/: auto takes
  // the ModelNet40 layout, "flat" reads the files beside them.
  write_tetra_folder(root + "/cone/train", 2);
  write_tetra_folder(root + "/cone/test", 1);
  write_tetra_folder(root + "/spike/train", 2);
  write_tetra_folder(root + "/spike/test", 1);
  ModelNetLoadOptions o;
  o.points_per_shape = 16;
  const auto detected = load_modelnet40(root, o);
  EXPECT_EQ(detected.layout, "ModelNet40");
  EXPECT_EQ(detected.train.size(), 4);
  o.layout = "flat";
  const auto flat = load_modelnet40(root, o);
  EXPECT_EQ(flat.layout, "flat");
  EXPECT_EQ(flat.train.size() + flat.test.size(), 8);
  o.layout = "split";
  expect_format_error(root + "/train", "missing folder (the split layout", [&] { load_modelnet40(root, o); });
  o.layout = "hdf5";
  expect_format_error(root, "it looks like the ModelNet40 layout", [&] { load_modelnet40(root, o); });
  o.layout = "resampled";
  expect_format_error(root, "not a modelnet40_normal_resampled folder", [&] { load_modelnet40(root, o); });
  o.layout = "tree";
  expect_usage_error([&] { load_modelnet40(root, o); }, "expected one of auto, modelnet, split, flat");
  o.layout = "modelnet";
  const auto empty = fresh_dir("formats_named_layout_empty");
  std::filesystem::create_directories(empty);
  expect_format_error(empty, "no class folders", [&] { load_modelnet40(empty, o); });
}

}  // namespace
}  // namespace qkv::testing

TEST(ShapeFileExtensions, TheKindsTogetherAreEveryExtensionReadShapeFileReads) {
  std::vector<std::string> kinds, all;
  for (const char* e : qkv::pointcloud::kMeshFileExtensions) kinds.push_back(e);
  for (const char* e : qkv::pointcloud::kPointFileExtensions) kinds.push_back(e);
  for (const char* e : qkv::pointcloud::kShapeFileExtensions) all.push_back(e);
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(kinds, all);
  EXPECT_EQ(qkv::pointcloud::shape_file_kinds_text(),
            "a mesh (.off .ply .obj .stl) or a point cloud (.ply .pcd .txt .xyz .csv)");
  EXPECT_EQ(qkv::pointcloud::shape_file_kinds_text(true),
            "a mesh (.off .ply .obj .stl) or a point cloud (.ply .pcd .xyz .csv)");
}
