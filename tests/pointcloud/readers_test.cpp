// Shape file readers and surface sampling, on small files written byte by byte here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/sampling.h"
#include "support/test_files.h"

using namespace qkv;
using namespace qkv::pointcloud;
using qkv::testing::data_error_of;
using qkv::testing::expect_data_error;
using qkv::testing::temp_path;
namespace fs = std::filesystem;

namespace {

std::string write(const std::string& name, const std::string& contents) {
  const auto path = temp_path(name);
  write_file_atomic(path, contents);
  return path;
}

template <typename T>
void put(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// A DataError, on one line, that names the file and says `what`.
void expect_error(const std::function<void()>& f, const std::string& path, const std::string& what) {
  const auto message = data_error_of(f);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << "expected '" << what << "' in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

using Face = std::array<int64_t, 3>;

// A square (one quad) and a triangle above it; the triangle line carries a colour.
const char* kOffBody =
    "0 0 0\n"
    "1 0 0\n"
    "1 1 0\n"
    "0 1 0   # a comment after a vertex\n"
    "0.5 0.5 1.5e0\n"
    "4 0 1 2 3\n"
    "3 0 1 4 255 0 0\n";

void expect_square_and_roof(const Mesh& m) {
  ASSERT_EQ(m.vertices.size(), 5u);
  EXPECT_EQ(m.vertices[4], (Vec3{0.5f, 0.5f, 1.5f}));
  EXPECT_EQ(m.vertices[2], (Vec3{1.f, 1.f, 0.f}));
  ASSERT_EQ(m.faces.size(), 3u);
  EXPECT_EQ(m.faces[0], (Face{0, 1, 2}));  // the quad, fanned
  EXPECT_EQ(m.faces[1], (Face{0, 2, 3}));
  EXPECT_EQ(m.faces[2], (Face{0, 1, 4}));
  EXPECT_FALSE(m.has_normals());
}

Mesh unit_cube() {
  Mesh m;
  for (int i = 0; i < 8; ++i)
    m.vertices.push_back({(i & 1) ? 0.5f : -0.5f, (i & 2) ? 0.5f : -0.5f, (i & 4) ? 0.5f : -0.5f});
  // Two triangles per side; the winding does not matter to these tests.
  const int quads[6][4] = {{0, 1, 3, 2}, {4, 5, 7, 6}, {0, 1, 5, 4}, {2, 3, 7, 6}, {0, 2, 6, 4}, {1, 3, 7, 5}};
  for (const auto& q : quads) {
    m.faces.push_back({q[0], q[1], q[2]});
    m.faces.push_back({q[0], q[2], q[3]});
  }
  return m;
}

}  // namespace

TEST(ReadOff, PolygonsAreFannedAndCommentsSkipped) {
  const auto path = write("square.off", std::string("OFF\n# made by hand\n\n5 2 0\n") + kOffBody);
  expect_square_and_roof(read_off(path));
  expect_square_and_roof(read_shape_file(path));
}

TEST(ReadOff, FusedHeaderAsInModelNet40) {
  const auto path = write("fused.off", std::string("OFF5 2 0\n") + kOffBody);
  expect_square_and_roof(read_off(path));
}

TEST(ReadOff, CrlfLineEndings) {
  const auto path = write("crlf.off", "OFF\r\n3 1 0\r\n0 0 0\r\n1 0 0\r\n0 1 0\r\n3 0 1 2\r\n");
  const auto m = read_off(path);
  EXPECT_EQ(m.vertices.size(), 3u);
  EXPECT_EQ(m.faces.size(), 1u);
}

TEST(ReadShapeFile, AByteOrderMarkAsWindowsToolsWriteItIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string triangle = "0 0 0\n1 0 0\n0 1 0\n";
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"bom.off", bom + "OFF\n3 1 0\n" + triangle + "3 0 1 2\n"},
           {"bom.obj", bom + "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"},
           {"bom.ply", bom +
                           "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                           "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n" +
                           triangle + "3 0 1 2\n"},
           {"bom.stl", bom + "solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n"
                             "endloop\nendfacet\nendsolid t\n"},
           {"bom.pcd", bom +
                           "VERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 3\nHEIGHT 1\n"
                           "POINTS 3\nDATA ascii\n" +
                           triangle},
           {"bom.xyz", bom + triangle}}) {
    const auto mesh = read_shape_file(write(name, text));
    ASSERT_EQ(mesh.vertices.size(), 3u) << name;
    EXPECT_EQ(mesh.vertices[1], (Vec3{1, 0, 0})) << name;
  }
}

TEST(ReadOff, TheKeywordSaysWhatEachVertexLineHolds) {
  // Geomview's order: x y z [nx ny nz] [colour of 1, 3 or 4] [s t].
  const std::string face = "3 0 1 2\n";
  const auto noff = read_off(write("n.off", "NOFF\n3 1 0\n0 0 0 0 0 1\n1 0 0 0 0 1\n0 1 0 0 0 -1\n" + face));
  ASSERT_EQ(noff.normals.size(), 3u);
  EXPECT_EQ(noff.vertices[1], (Vec3{1, 0, 0}));
  EXPECT_EQ(noff.normals[2], (Vec3{0, 0, -1}));
  EXPECT_EQ(noff.faces.size(), 1u);
  // COFF as MeshLab writes it (RGBA bytes), three colour values, and one.
  const auto coff = read_off(write("c.off", "COFF\n3 1 0\n0 0 0 255 0 0 255\n1 0 0 0.5 0.5 0.5\n0 1 0 7\n" + face));
  EXPECT_EQ(coff.vertices[2], (Vec3{0, 1, 0}));
  EXPECT_FALSE(coff.has_normals());
  const auto all = read_off(write("stcn.off",
                                  "STCNOFF3 1 0\n0 0 0 0 0 1 9 9 9 0.1 0.2\n1 0 0 0 0 1 9 9 9 9 0.3 0.4\n"
                                  "0 2 0 0 1 0 9 0.5 0.6\n" +
                                      face));
  EXPECT_EQ(all.vertices[2], (Vec3{0, 2, 0}));
  EXPECT_EQ(all.normals[2], (Vec3{0, 1, 0}));
}

TEST(ReadOff, MalformedFilesNameTheFile) {
  const std::string tri = "0 0 0\n1 0 0\n0 1 0\n";
  struct Case {
    const char* name;
    std::string text;
    const char* what;
  };
  const Case cases[] = {
      {"bad_magic.off", "PLY\n3 1 0\n" + tri + "3 0 1 2\n", "bad magic"},
      {"trunc_v.off", "OFF\n4 1 0\n" + tri, "truncated"},
      {"trunc_f.off", "OFF\n3 2 0\n" + tri + "3 0 1 2\n", "truncated"},
      {"extra.off", "OFF\n3 1 0\n" + tri + "3 0 1 2\n3 0 1 2\n", "wrong counts"},
      {"bad_counts.off", "OFF\n3 x 0\n" + tri, "bad counts line"},
      {"nan.off", "OFF\n3 1 0\n0 0 0\nnan 0 0\n0 1 0\n3 0 1 2\n", "not finite"},
      {"inf.off", "OFF\n3 1 0\n0 0 0\ninf 0 0\n0 1 0\n3 0 1 2\n", "not finite"},
      // Finite, and beyond what float32 (and 1e999 what double) can hold: not "not finite".
      {"huge.off", "OFF\n3 1 0\n0 0 0\n1e300 0 0\n0 1 0\n3 0 1 2\n", "value '1e300' is beyond float32's range"},
      {"huger.off", "OFF\n3 1 0\n0 0 0\n-1e999 0 0\n0 1 0\n3 0 1 2\n", "value '-1e999' is beyond float32's range"},
      {"token.off", "OFF\n3 1 0\n0 0 0\n1.0abc 0 0\n0 1 0\n3 0 1 2\n", "non-numeric"},
      {"columns.off", "OFF\n3 1 0\n0 0 0\n1 0\n0 1 0\n3 0 1 2\n", "expected 3"},
      {"range.off", "OFF\n3 1 0\n" + tri + "3 0 1 3\n", "out of range"},
      {"negative.off", "OFF\n3 1 0\n" + tri + "3 0 -1 2\n", "out of range"},
      {"short_face.off", "OFF\n3 1 0\n" + tri + "4 0 1 2\n", "face says 4 vertices"},
      {"empty.off", "OFF\n0 0 0\n", "empty cloud"},
      {"nothing.off", "", "empty file"},
      {"noff_short.off", "NOFF\n3 1 0\n0 0 0 0 0 1\n1 0 0\n0 1 0 0 0 1\n3 0 1 2\n", "expected 6"},
      {"coff_two.off", "COFF\n3 1 0\n" + tri + "3 0 1 2\n", "a colour of 1, 3 or 4"},
      {"order.off", "NCOFF\n3 1 0\n" + tri + "3 0 1 2\n", "bad magic"},
      {"four_d.off", "4OFF\n3 1 0\n" + tri + "3 0 1 2\n", "4-D and n-D"},
      {"binary.off", "OFF BINARY\n", "binary OFF"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = write(c.name, c.text);
    expect_error([&] { read_off(path); }, path, c.what);
  }
  const auto missing = temp_path("does_not_exist.off");
  expect_error([&] { read_off(missing); }, missing, "no such file");
  expect_error([&] { read_shape_file(missing); }, missing, "no such file");
}

TEST(ReadPly, AsciiWithNormalsExtraPropertiesAndElements) {
  const auto path = write("ascii.ply",
                          "ply\n"
                          "format ascii 1.0\n"
                          "comment written by hand\n"
                          "element vertex 4\n"
                          "property double x\n"
                          "property float confidence\n"
                          "property double y\n"
                          "property int z\n"
                          "property float nx\n"
                          "property float ny\n"
                          "property float nz\n"
                          "element edge 1\n"
                          "property int vertex1\n"
                          "property int vertex2\n"
                          "element face 1\n"
                          "property list uchar int vertex_indices\n"
                          "property uchar flags\n"
                          "end_header\n"
                          "0 0.9 0 0 0 0 1\n"
                          "1 0.9 0 0 0 0 1\n"
                          "1 0.9 1 2 0 0 1\n"
                          "0 0.9 1 0 0 0 1\n"
                          "0 1\n"
                          "4 0 1 2 3 7\n");
  const auto m = read_ply(path);
  ASSERT_EQ(m.vertices.size(), 4u);
  EXPECT_EQ(m.vertices[2], (Vec3{1, 1, 2}));
  ASSERT_TRUE(m.has_normals());
  EXPECT_EQ(m.normals[3], (Vec3{0, 0, 1}));
  ASSERT_EQ(m.faces.size(), 2u);
  EXPECT_EQ(m.faces[1], (Face{0, 2, 3}));
  EXPECT_EQ(read_shape_file(path).vertices.size(), 4u);
}

TEST(ReadPly, AsciiVertexIndexNameAndPointCloud) {
  const auto path = write("vindex.ply",
                          "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                          "property float z\nelement face 1\nproperty list ushort uint vertex_index\nend_header\n"
                          "0 0 0\n1 0 0\n0 1 0\n3 2 1 0\n");
  const auto m = read_ply(path);
  ASSERT_EQ(m.faces.size(), 1u);
  EXPECT_EQ(m.faces[0], (Face{2, 1, 0}));

  const auto cloud = write("cloud.ply",
                           "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                           "property float z\nend_header\n1 2 3\n4 5 6\n");
  const auto c = read_ply(cloud);
  EXPECT_TRUE(c.is_point_cloud());
  EXPECT_EQ(c.vertices[1], (Vec3{4, 5, 6}));

  // PCL's PLY writer names the normal normal_x normal_y normal_z (they had been extra properties).
  const auto pcl = read_ply(write("pcl_normals.ply",
                                  "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                                  "property float z\nproperty float normal_x\nproperty float normal_y\n"
                                  "property float normal_z\nproperty float curvature\nend_header\n"
                                  "1 2 3 0 0 1 0.5\n4 5 6 1 0 0 0.25\n"));
  ASSERT_TRUE(pcl.has_normals());
  EXPECT_EQ(pcl.normals[1], (Vec3{1, 0, 0}));
  ASSERT_EQ(pcl.vertex_properties.size(), 1u);
  EXPECT_EQ(pcl.vertex_properties[0].name, "curvature");
}

TEST(ReadPly, TriangleStripsAreTrianglesFacingOneWay) {
  // A square as one strip, then a strip of one degenerate triangle (how strips are stitched).
  const std::string header =
      "element vertex 4\nproperty float x\nproperty float y\nproperty float z\nelement tristrips 1\n"
      "property list int int vertex_indices\nend_header\n";
  const auto ascii = read_ply(
      write("strips.ply", "ply\nformat ascii 1.0\n" + header + "0 0 0\n1 0 0\n0 1 0\n1 1 0\n8 0 1 2 3 -1 1 1 3\n"));
  ASSERT_EQ(ascii.faces.size(), 2u);
  EXPECT_EQ(ascii.faces[0], (Face{0, 1, 2}));
  EXPECT_EQ(ascii.faces[1], (Face{2, 1, 3}));  // flipped: both face +z
  std::string binary = "ply\nformat binary_little_endian 1.0\n" + header;
  for (const float v : {0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 0.f, 1.f, 0.f, 1.f, 1.f, 0.f})
    binary.append(reinterpret_cast<const char*>(&v), 4);
  for (const int32_t i : {8, 0, 1, 2, 3, -1, 1, 1, 3}) binary.append(reinterpret_cast<const char*>(&i), 4);
  EXPECT_EQ(read_ply(write("strips_binary.ply", binary)).faces, ascii.faces);
  // -1 written in an unsigned index type is its largest value: a restart too.
  const auto unsigned_strips =
      read_ply(write("strips_uint.ply",
                     "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\n"
                     "property float z\nelement tristrips 1\nproperty list uchar uint vertex_indices\nend_header\n"
                     "0 0 0\n1 0 0\n0 1 0\n1 1 0\n8 0 1 2 3 4294967295 1 1 3\n"));
  EXPECT_EQ(unsigned_strips.faces, ascii.faces);
  // An index past the vertices is refused as a face's is.
  EXPECT_THROW(
      read_ply(write("strips_bad.ply", "ply\nformat ascii 1.0\n" + header + "0 0 0\n1 0 0\n0 1 0\n1 1 0\n3 0 1 9\n")),
      DataError);
}

namespace {

// Binary little endian: x float, y double, z short, a skipped uchar, colours;
// an "edge" element of fixed size and a "meta" element with a list, both
// skipped; faces with uint8 counts, uint32 indices and a trailing property.
std::string binary_ply(bool truncate) {
  std::string b =
      "ply\n"
      "format binary_little_endian 1.0\n"
      "element vertex 4\n"
      "property float x\n"
      "property double y\n"
      "property short z\n"
      "property uchar quality\n"
      "property uchar red\n"
      "property uchar green\n"
      "property uchar blue\n"
      "element edge 2\n"
      "property int vertex1\n"
      "property int vertex2\n"
      "element meta 1\n"
      "property list uchar float values\n"
      "element face 2\n"
      "property list uint8 uint32 vertex_indices\n"
      "property uchar material\n"
      "end_header\n";
  const float xs[4] = {0, 1, 1, 0};
  const double ys[4] = {0, 0, 1, 1};
  const int16_t zs[4] = {0, 0, 0, -3};
  for (int i = 0; i < 4; ++i) {
    put(b, xs[i]);
    put(b, ys[i]);
    put(b, zs[i]);
    put<uint8_t>(b, 9);
    put<uint8_t>(b, static_cast<uint8_t>(10 * i));
    put<uint8_t>(b, 20);
    put<uint8_t>(b, 30);
  }
  for (int i = 0; i < 4; ++i) put<int32_t>(b, i);
  put<uint8_t>(b, 2);
  put<float>(b, 1.5f);
  put<float>(b, 2.5f);
  put<uint8_t>(b, 4);  // a quad
  for (uint32_t i : {0u, 1u, 2u, 3u}) put(b, i);
  put<uint8_t>(b, 1);
  put<uint8_t>(b, 3);
  for (uint32_t i : {3u, 2u, 1u}) put(b, i);
  put<uint8_t>(b, 1);
  if (truncate) b.resize(b.size() - 6);
  return b;
}

}  // namespace

TEST(ReadPly, BinaryLittleEndianAnyTypes) {
  const auto path = write("binary.ply", binary_ply(false));
  const auto m = read_ply(path);
  ASSERT_EQ(m.vertices.size(), 4u);
  EXPECT_EQ(m.vertices[2], (Vec3{1, 1, 0}));
  EXPECT_EQ(m.vertices[3], (Vec3{0, 1, -3}));
  EXPECT_FALSE(m.has_normals());
  ASSERT_EQ(m.colors.size(), 4u);
  EXPECT_EQ(m.colors[3], (std::array<uint8_t, 3>{30, 20, 30}));
  ASSERT_EQ(m.faces.size(), 3u);
  EXPECT_EQ(m.faces[0], (Face{0, 1, 2}));
  EXPECT_EQ(m.faces[1], (Face{0, 2, 3}));
  EXPECT_EQ(m.faces[2], (Face{3, 2, 1}));
}

TEST(ReadPly, MalformedFilesNameTheFile) {
  const std::string head =
      "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
      "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n";
  struct Case {
    const char* name;
    std::string bytes;
    const char* what;
  };
  std::string nan_binary =
      "ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty float x\n"
      "property float y\nproperty float z\nend_header\n";
  put<float>(nan_binary, 0.f);
  put<float>(nan_binary, std::nanf(""));
  put<float>(nan_binary, 0.f);
  const Case cases[] = {
      {"magic.ply", "plx\nformat ascii 1.0\nend_header\n", "bad magic"},
      {"trunc_binary.ply", binary_ply(true), "truncated"},
      {"trunc_ascii.ply", head + "0 0 0\n1 0 0\n", "truncated"},
      {"range.ply", head + "0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n", "out of range"},
      {"nan.ply", head + "0 0 0\nnan 0 0\n0 1 0\n3 0 1 2\n", "not finite"},
      {"nan_binary.ply", nan_binary, "not finite"},
      {"columns.ply", head + "0 0 0\n1 0 0 7\n0 1 0\n3 0 1 2\n", "more than the header declares"},
      {"few.ply", head + "0 0 0\n1 0\n0 1 0\n3 0 1 2\n", "too few values"},
      {"token.ply", head + "0 0 0\n1 zero 0\n0 1 0\n3 0 1 2\n", "non-numeric"},
      {"extra.ply", head + "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n3 0 1 2\n", "wrong counts"},
      {"empty.ply",
       "ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\nproperty float y\n"
       "property float z\nend_header\n",
       "empty cloud"},
      {"header.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\n", "no 'end_header'"},
      {"no_z.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nend_header\n1 2\n",
       "x, y or z"},
      {"twice.ply",
       "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float x\nproperty float y\n"
       "property float z\nend_header\n0 9 1 2\n",
       "line 5: property 'x' of element 'vertex' declared twice"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = write(c.name, c.bytes);
    expect_error([&] { read_ply(path); }, path, c.what);
  }
}

TEST(ReadPointText, CommasSpacesAndNormals) {
  const auto csv = write("cloud.txt", "0.1,0.2,0.3,0,0,1\n-1,-2,-3,1,0,0\n\n4.5e-1,5,6,0,1,0\n");
  const auto a = read_point_text(csv);
  ASSERT_EQ(a.vertices.size(), 3u);
  EXPECT_EQ(a.vertices[2], (Vec3{0.45f, 5, 6}));
  ASSERT_TRUE(a.has_normals());
  EXPECT_EQ(a.normals[1], (Vec3{1, 0, 0}));
  EXPECT_EQ(read_point_text(csv, 2).vertices.size(), 2u);  // stops early

  const auto xyz = write("cloud.xyz", "# x y z\n1 2 3\n  4\t5 6\n7, 8, 9\n");
  const auto b = read_shape_file(xyz);
  ASSERT_EQ(b.vertices.size(), 3u);
  EXPECT_EQ(b.vertices[1], (Vec3{4, 5, 6}));
  EXPECT_EQ(b.vertices[2], (Vec3{7, 8, 9}));
  EXPECT_FALSE(b.has_normals());
  EXPECT_TRUE(b.is_point_cloud());
}

TEST(ReadPointText, AValueTooSmallForADoubleIsZero) {
  // from_chars says "out of range" for 1e-400 as for 1e400; it was refused as "not finite".
  const auto a = read_point_text(write("tiny.xyz", "1 2 1e-400\n4 5 -0.0000e-999\n"));
  ASSERT_EQ(a.vertices.size(), 2u);
  EXPECT_EQ(a.vertices[0], (Vec3{1, 2, 0}));
  EXPECT_EQ(a.vertices[1], (Vec3{4, 5, 0}));
}

TEST(ReadPointText, AHeaderLineNamesTheColumns) {
  // As spreadsheets (with their byte-order mark), CloudCompare ("//X") and
  // Open3D write them: x y z found by name, other columns skipped.
  const auto csv = write("scan.csv", "\xEF\xBB\xBFintensity,\"X\",y,z\r\n0.5,1,2,3\r\n0.7,4,5,6\r\n");
  const auto a = read_point_text(csv);
  ASSERT_EQ(a.vertices.size(), 2u);
  EXPECT_EQ(a.vertices[1], (Vec3{4, 5, 6}));
  EXPECT_FALSE(a.has_normals());

  const auto txt = write("scan.txt", "//X Y Z R G B Nx Ny Nz\n1 2 3 255 0 0 0 0 1\n4 5 6 0 0 0 1 0 0\n");
  const auto b = read_point_text(txt, 1);
  ASSERT_EQ(b.vertices.size(), 1u);  // the header is not a point
  EXPECT_EQ(b.vertices[0], (Vec3{1, 2, 3}));
  ASSERT_TRUE(b.has_normals());
  EXPECT_EQ(b.normals[0], (Vec3{0, 0, 1}));
  EXPECT_EQ(read_point_text(write("n.csv", "normal_x,normal_y,normal_z,x,y,z\n0,1,0,7,8,9\n")).normals[0],
            (Vec3{0, 1, 0}));
}

TEST(ReadPointText, SixColumnsThatAreNotUnitNormalsAreAColourAndSkipped) {
  // "x y z r g b" without a header, as CloudCompare writes it.
  const auto rgb = read_point_text(write("rgb.xyz", "1 2 3 200 100 50\n4 5 6 0 0 0\n"));
  EXPECT_EQ(rgb.vertices[1], (Vec3{4, 5, 6}));
  EXPECT_FALSE(rgb.has_normals());
  const auto normals = read_point_text(write("n.xyz", "1 2 3 0 0 1\n4 5 6 0.6 0.8 0\n7 8 9 0 0 0\n"));
  EXPECT_TRUE(normals.has_normals());
  // Open3D's colours, in 0..1: lengths below 1.5, but not a unit vector.
  const auto unit_rgb = read_point_text(write("rgb01.xyz", "0 0 0 0.5 0.5 0.5\n1 0 0 0.2 0.3 0.4\n0 1 0 1 0 0\n"));
  EXPECT_EQ(unit_rgb.vertices.size(), 3u);
  EXPECT_FALSE(unit_rgb.has_normals());
}

TEST(ReadPointText, DecimalCommasAreRefusedNotSplitIntoColumns) {
  // Tabs or blanks between fields and commas in the numbers: split on its
  // commas, each line was six columns, x y z taken from 1, 5 and 2.
  for (const char* sep : {"\t", " "}) {
    const auto path =
        write("de.xyz", std::string("1,5") + sep + "2,25" + sep + "3,125\n4,5" + sep + "5,25" + sep + "6,125\n");
    expect_data_error([&] { read_point_text(path); }, "de.xyz", "line 1: the numbers have decimal commas");
  }
  // After a header line too (six names would have read them as x y z and a normal).
  expect_data_error([&] { read_point_text(write("deh.xyz", "x y z\n1,5 2,5 3,5\n")); }, "deh.xyz",
                    "line 2: the numbers have decimal commas");
  // Commas between values, with or without blanks, are columns as before.
  EXPECT_EQ(read_point_text(write("c.csv", "1.5, 2.25, 3.125\n")).vertices[0], (Vec3{1.5f, 2.25f, 3.125f}));
  EXPECT_EQ(read_point_text(write("i.csv", "1,5,2\n")).vertices[0], (Vec3{1, 5, 2}));
}

TEST(ReadShapeFile, AScanFarFromZeroKeepsItsDetailRelativeToItsOrigin) {
  // UTM metres: float32 steps 0.5 at 4.5e6; the positions relative to the
  // origin (the first point's, rounded to multiples of 1024) keep millimetres.
  const std::string points = "500000.125 4500000.001 101.5\n500000.375 4500000.002 101.25\n";
  const std::array<double, 3> origin{499712, 4500480, 0};
  auto expect_detail = [&](const Mesh& m) {
    EXPECT_EQ(m.origin, origin);
    ASSERT_EQ(m.vertices.size(), 2u);
    EXPECT_NEAR(m.vertices[0][0] + origin[0], 500000.125, 1e-6);
    EXPECT_NEAR(m.vertices[1][1] + origin[1], 4500000.002, 1e-4);
    EXPECT_NEAR(m.vertices[1][2] + origin[2], 101.25, 1e-6);
  };
  expect_detail(read_shape_file(write("utm.xyz", points)));
  expect_detail(read_shape_file(write("utm.ply",
                                      "ply\nformat ascii 1.0\nelement vertex 2\nproperty double x\n"
                                      "property double y\nproperty double z\nend_header\n" +
                                          points)));
  expect_detail(read_shape_file(write("utm.off", "OFF\n2 0 0\n" + points)));
  expect_detail(read_shape_file(write("utm.obj", "v 500000.125 4500000.001 101.5\nv 500000.375 4500000.002 101.25\n")));
  expect_detail(read_shape_file(write("utm.pcd",
                                      "FIELDS x y z\nSIZE 8 8 8\nTYPE F F F\nCOUNT 1 1 1\nPOINTS 2\n"
                                      "DATA ascii\n" +
                                          points)));
  // A shape near 0 keeps origin 0 and the floats it had, and so does one
  // that spans from 0 to far away (an outlier first or last).
  EXPECT_FALSE(read_shape_file(write("near.xyz", "511 -511 3\n")).has_origin());
  const auto spans = read_shape_file(write("spans.xyz", "1e7 0 0\n0.001 0.002 0.003\n1.001 2.002 3.003\n"));
  EXPECT_FALSE(spans.has_origin());
  EXPECT_EQ(spans.vertices[1], (Vec3{0.001f, 0.002f, 0.003f}));
  // Coordinates near the float limit on both sides stay finite.
  const auto wide = read_shape_file(write("wide.xyz", "3e38 0 0\n-3e38 0 0\n0 1 0\n"));
  for (const auto& v : wide.vertices) EXPECT_TRUE(std::isfinite(v[0]));
  // Written back (a labelled scan), the PLY holds the file's own coordinates as double.
  Mesh far = read_shape_file(write("far.xyz", points));
  for (const bool binary : {false, true}) {
    SCOPED_TRACE(binary);
    const auto out = temp_path(binary ? "far_binary.ply" : "far_ascii.ply");
    write_ply(out, far, binary);
    const auto back = read_ply(out);
    expect_detail(back);
  }
}

TEST(ReadPly, ColoursOfAnyTypeAreBytes) {
  // Bytes as they are, floats in [0, 1] (Open3D) times 255, 16 bits scaled down.
  const auto m = read_ply(write("colours.ply",
                                "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                                "property float z\nproperty float red\nproperty ushort green\nproperty uchar blue\n"
                                "end_header\n0 0 0 1.0 65535 7\n1 0 0 0.5 257 255\n"));
  ASSERT_EQ(m.colors.size(), 2u);
  EXPECT_EQ(m.colors[0], (std::array<uint8_t, 3>{255, 255, 7}));
  EXPECT_EQ(m.colors[1], (std::array<uint8_t, 3>{128, 1, 255}));
  // Floats and 32-bit integers holding 0..255 are bytes already.
  const auto bytes = read_ply(write("colours255.ply",
                                    "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                                    "property float z\nproperty float red\nproperty int green\nproperty short blue\n"
                                    "end_header\n0 0 0 200 30 255\n1 0 0 0.5 0 12\n"));
  EXPECT_EQ(bytes.colors[0], (std::array<uint8_t, 3>{200, 30, 255}));
  EXPECT_EQ(bytes.colors[1], (std::array<uint8_t, 3>{1, 0, 12}));
}

TEST(ReadPly, ANonFiniteNormalIsNamedWithItsVertex) {
  const auto path = write("nan_normal.ply",
                          "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
                          "property float z\nproperty float nx\nproperty float ny\nproperty float nz\n"
                          "end_header\n0 0 0 0 0 1\n1 0 0 nan 0 1\n");
  expect_error([&] { read_ply(path); }, path, "vertex 1 has a normal that is not finite");
}

TEST(ReadPointText, MalformedFilesNameTheFile) {
  struct Case {
    const char* name;
    const char* text;
    const char* what;
  };
  const Case cases[] = {
      {"four.txt", "1 2 3 4\n", "4 columns"},
      {"mixed.txt", "1 2 3\n1 2 3 0 0 1\n", "line 1 has 3"},
      {"nan.txt", "1 2 3\nNaN 2 3\n", "not finite"},
      {"huge.txt", "1 2 3\n1e39 2 3\n", "line 2: value '1e39' is beyond float32's range"},
      {"word.txt", "1 2 3\n1 two 3\n", "non-numeric"},
      {"empty.txt", "\n\n", "empty cloud"},
      {"typo.txt", "1 2 3a\n", "non-numeric"},
      {"semicolons.csv", "1;2;3\n", "';' separates nothing here"},
      {"no_z.csv", "x,y,intensity\n1,2,3\n", "names no z column"},
      {"twice.csv", "x,y,z,X\n1,2,3,4\n", "names column 'X' twice"},
      {"half_normal.csv", "x,y,z,nx,ny\n1,2,3,0,0\n", "not all three"},
      {"short_row.csv", "x,y,z,i\n1,2,3\n", "the header on line 1 has 4"},
      {"header_only.csv", "x,y,z\n", "empty cloud"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = write(c.name, c.text);
    expect_error([&] { read_point_text(path); }, path, c.what);
  }
}

TEST(ReadShapeFile, AFolderIsNamedAsOneWhateverItsName) {
  const auto dir = temp_path("a_folder");
  fs::create_directories(dir);
  expect_error([&] { read_shape_file(dir); }, dir, "is a folder, not a file");
}

TEST(ReadShapeFile, UnknownExtensionIsAUsageError) {
  const auto path = write("shape.glb", "glTF");
  try {
    read_shape_file(path);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  EXPECT_EQ(read_shape_file(write("UPPER.OFF", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")).faces.size(), 1u);
}

TEST(Sampling, PointsLieOnTheCubeWithUnitAxisNormals) {
  const auto s = sample_surface(unit_cube(), 3000, 7);
  ASSERT_EQ(s.points.sizes(), (std::vector<int64_t>{3000, 3}));
  ASSERT_EQ(s.points.scalar_type(), torch::kFloat);
  ASSERT_EQ(s.normals.sizes(), s.points.sizes());
  const auto p = s.points.accessor<float, 2>();
  const auto n = s.normals.accessor<float, 2>();
  for (int64_t i = 0; i < 3000; ++i) {
    int on_side = -1;
    for (int k = 0; k < 3; ++k) {
      EXPECT_LE(std::abs(p[i][k]), 0.5f + 1e-6f);
      if (std::abs(std::abs(p[i][k]) - 0.5f) < 1e-5f) on_side = k;
    }
    ASSERT_GE(on_side, 0) << "point " << i << " is not on the cube";
    EXPECT_NEAR(std::abs(n[i][on_side]), 1.0f, 1e-6f);  // the face normal is that side's axis
  }
  // Every side is hit about equally: its sixth of the area.
  const auto counts = (s.points.abs() > 0.5f - 1e-5f).to(torch::kLong).sum(0);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(counts[k].item<double>() / 3000, 1.0 / 3, 0.05);
}

TEST(Sampling, FacesArePickedByArea) {
  Mesh m;  // triangles of area 0.5 (near the origin) and 1.5 (at x >= 10), plus one of zero area
  m.vertices = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {10, 0, 0}, {13, 0, 0}, {10, 1, 0}, {20, 0, 0}, {21, 0, 0}};
  m.faces = {{0, 1, 2}, {6, 7, 7}, {3, 4, 5}};
  const int64_t n = 40000;
  const auto s = sample_surface(m, n, 1);
  const auto x = s.points.select(1, 0);
  const double far = (x >= 5).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(far, 0.75, 0.012);
  EXPECT_EQ((x >= 19).sum().item<int64_t>(), 0);  // the degenerate face is never picked
  // Uniform inside a triangle: the mean is its centroid.
  const auto near = s.points.index({x < 5});
  EXPECT_NEAR(near.select(1, 0).mean().item<double>(), 1.0 / 3, 0.01);
  EXPECT_NEAR(near.select(1, 1).mean().item<double>(), 1.0 / 3, 0.01);
}

TEST(Sampling, DeterministicBySeed) {
  const auto cube = unit_cube();
  const auto a = sample_surface(cube, 500, 42);
  const auto b = sample_surface(cube, 500, 42);
  const auto c = sample_surface(cube, 500, 43);
  EXPECT_TRUE(torch::equal(a.points, b.points));
  EXPECT_TRUE(torch::equal(a.normals, b.normals));
  EXPECT_FALSE(torch::equal(a.points, c.points));
  // Torch's global generator is neither read nor moved.
  torch::manual_seed(3);
  const auto before = torch::rand({4});
  torch::manual_seed(3);
  sample_surface(cube, 100, 1);
  EXPECT_TRUE(torch::equal(torch::rand({4}), before));
  EXPECT_NE(seed_mix(0, 1), seed_mix(0, 2));
  EXPECT_NE(seed_mix(1, 0), seed_mix(0, 1));
}

TEST(Sampling, PointCloudSubsetOrRepeats) {
  Mesh cloud;
  for (int i = 0; i < 10; ++i) {
    cloud.vertices.push_back({static_cast<float>(i), 0, 0});
    cloud.normals.push_back({0, static_cast<float>(i), 0});
  }
  const auto few = sample_surface(cloud, 6, 3);
  ASSERT_EQ(few.points.sizes(), (std::vector<int64_t>{6, 3}));
  ASSERT_TRUE(few.normals.defined());
  std::set<int> seen;
  for (int64_t i = 0; i < 6; ++i) {
    const auto x = few.points[i][0].item<float>();
    EXPECT_EQ(few.normals[i][1].item<float>(), x);  // the point's own normal follows it
    seen.insert(static_cast<int>(x));
  }
  EXPECT_EQ(seen.size(), 6u);  // without replacement
  const auto many = sample_surface(cloud, 25, 3);
  std::set<int> all;
  for (int64_t i = 0; i < 25; ++i) all.insert(static_cast<int>(many.points[i][0].item<float>()));
  EXPECT_EQ(all.size(), 10u);  // every point at least once
  cloud.normals.clear();
  EXPECT_FALSE(sample_surface(cloud, 4, 3).normals.defined());
}

TEST(Sampling, DegenerateMeshNamesTheSource) {
  Mesh flat;
  flat.vertices = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}};
  flat.faces = {{0, 1, 2}};
  expect_error([&] { sample_surface(flat, 10, 0, "flat.off"); }, "flat.off", "zero surface area");
  EXPECT_NE(data_error_of([&] { sample_surface(flat, 10, 0); }).find("zero surface area"), std::string::npos);
  flat.faces = {{0, 1, 3}};
  expect_error([&] { sample_surface(flat, 10, 0, "bad.off"); }, "bad.off", "refers to vertex 3");
}
