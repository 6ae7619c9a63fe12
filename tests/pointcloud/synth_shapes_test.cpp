// The built-in synthetic shapes (closed, outward, upright, deterministic),
// the OFF tree `qkv data synth-shapes` writes, and the OFF / PLY writers.
#include "qkv/pointcloud/synth_shapes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/mesh_write.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using namespace qkv::pointcloud;
using qkv::testing::data_error_of;
using qkv::testing::fresh_dir;
using qkv::testing::temp_path;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A reader independent of mesh_read: exactly what write_off is meant to write.
Mesh parse_off(const std::string& text) {
  std::istringstream in(text);
  std::string magic;
  int64_t nv = -1, nf = -1, ne = -1;
  in >> magic >> nv >> nf >> ne;
  EXPECT_EQ(magic, "OFF");
  EXPECT_EQ(ne, 0);
  Mesh m;
  for (int64_t i = 0; i < nv; ++i) {
    std::string x, y, z;  // strtof: the same rounding as the writer's inverse
    in >> x >> y >> z;
    m.vertices.push_back(
        {std::strtof(x.c_str(), nullptr), std::strtof(y.c_str(), nullptr), std::strtof(z.c_str(), nullptr)});
  }
  for (int64_t i = 0; i < nf; ++i) {
    int k = 0;
    std::array<int64_t, 3> f{};
    in >> k >> f[0] >> f[1] >> f[2];
    EXPECT_EQ(k, 3);
    m.faces.push_back(f);
  }
  std::string rest;
  in >> rest;
  EXPECT_TRUE(in.eof() && rest.empty()) << "trailing text: " << rest;
  return m;
}

double triangle_area(const Mesh& m, const std::array<int64_t, 3>& f) {
  const auto& a = m.vertices[f[0]];
  const auto& b = m.vertices[f[1]];
  const auto& c = m.vertices[f[2]];
  const double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  const double w[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
  const double x = u[1] * w[2] - u[2] * w[1], y = u[2] * w[0] - u[0] * w[2], z = u[0] * w[1] - u[1] * w[0];
  return std::sqrt(x * x + y * y + z * z) / 2;
}

// Sum of the signed volumes of the tetrahedra (origin, face): the enclosed
// volume for a closed surface whose faces are counter-clockwise seen from
// outside, negative if it is inside out.
double signed_volume(const Mesh& m) {
  double v = 0;
  for (const auto& f : m.faces) {
    const auto& a = m.vertices[f[0]];
    const auto& b = m.vertices[f[1]];
    const auto& c = m.vertices[f[2]];
    v += (static_cast<double>(a[0]) * (b[1] * c[2] - b[2] * c[1]) -
          a[1] * (static_cast<double>(b[0]) * c[2] - b[2] * c[0]) +
          a[2] * (static_cast<double>(b[0]) * c[1] - b[1] * c[0])) /
         6;
  }
  return v;
}

// Closed and consistently wound: every directed edge occurs once and so does
// its reverse (the neighbouring face runs the shared edge the other way).
// Returns the number of directed edges that break this.
int64_t unpaired_edges(const Mesh& m) {
  std::map<std::pair<int64_t, int64_t>, int> count;
  for (const auto& f : m.faces)
    for (int k = 0; k < 3; ++k) ++count[{f[k], f[(k + 1) % 3]}];
  int64_t bad = 0;
  for (const auto& [edge, n] : count) {
    auto reverse = count.find({edge.second, edge.first});
    if (n != 1 || reverse == count.end() || reverse->second != 1) ++bad;
  }
  return bad;
}

struct Box3 {
  std::array<float, 3> lo{1e30f, 1e30f, 1e30f}, hi{-1e30f, -1e30f, -1e30f};
  float extent(int k) const { return hi[k] - lo[k]; }
};

Box3 bounds(const Mesh& m) {
  Box3 b;
  for (const auto& v : m.vertices)
    for (int k = 0; k < 3; ++k) {
      b.lo[k] = std::min(b.lo[k], v[k]);
      b.hi[k] = std::max(b.hi[k], v[k]);
    }
  return b;
}

Mesh tetrahedron() {
  Mesh m;
  m.vertices = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  m.faces = {{0, 2, 1}, {0, 1, 3}, {0, 3, 2}, {1, 2, 3}};
  return m;
}

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), dir));
  std::sort(files.begin(), files.end());
  return files;
}

using qkv::testing::usage_error_of;

}  // namespace

// ---------------------------------------------------------------------------
// The shapes

TEST(SynthShapes, AtLeastFourteenDistinctClassesIncludingTheAskedFor) {
  const auto classes = synth_shape_classes();
  EXPECT_GE(classes.size(), 14u);
  EXPECT_EQ(std::set<std::string>(classes.begin(), classes.end()).size(), classes.size());
  for (const char* needed : {"box", "cylinder", "cone", "torus", "sphere", "pyramid", "capsule", "mug", "table",
                             "chair", "lamp", "airplane"})
    EXPECT_NE(std::find(classes.begin(), classes.end(), needed), classes.end()) << needed;
  for (const auto& c : classes) EXPECT_FALSE(synth_shape_description(c).empty()) << c;
}

TEST(SynthShapes, EveryClassIsAValidClosedOutwardUprightMesh) {
  for (const auto& cls : synth_shape_classes())
    for (uint64_t seed : {0ull, 1ull, 2ull, 7ull, 12345ull, 0xFFFFFFFFFFFFFFFFull}) {
      SCOPED_TRACE(cls + " seed " + std::to_string(seed));
      const Mesh m = make_synth_shape(cls, seed);
      ASSERT_FALSE(m.faces.empty());
      EXPECT_GE(m.faces.size(), 300u);
      EXPECT_LE(m.faces.size(), 8000u);
      EXPECT_TRUE(m.normals.empty() && m.colors.empty());
      for (const auto& v : m.vertices)
        for (float c : v) ASSERT_TRUE(std::isfinite(c));
      const auto n = static_cast<int64_t>(m.vertices.size());
      for (const auto& f : m.faces)
        for (int64_t i : f) ASSERT_TRUE(i >= 0 && i < n) << i;

      size_t degenerate = 0;
      for (const auto& f : m.faces) degenerate += triangle_area(m, f) < 1e-9;
      EXPECT_LE(degenerate, m.faces.size() / 1000) << "zero-area triangles";

      // Canonical pose: standing on y = 0, centred on the y axis, largest extent 1.
      const Box3 b = bounds(m);
      EXPECT_NEAR(b.lo[1], 0, 1e-5);
      EXPECT_GT(b.extent(1), 0.1);
      EXPECT_NEAR(std::max({b.extent(0), b.extent(1), b.extent(2)}), 1, 1e-5);
      EXPECT_NEAR(b.lo[0] + b.hi[0], 0, 1e-5);
      EXPECT_NEAR(b.lo[2] + b.hi[2], 0, 1e-5);

      EXPECT_EQ(unpaired_edges(m), 0) << "not closed, or inconsistently wound";
      EXPECT_GT(signed_volume(m), 1e-3) << "inside out";
    }
}

// The checks above must be able to fail: an inside-out or open mesh is caught.
TEST(SynthShapes, TheClosednessAndWindingChecksCatchBrokenMeshes) {
  Mesh m = tetrahedron();
  EXPECT_EQ(unpaired_edges(m), 0);
  EXPECT_NEAR(signed_volume(m), 1.0 / 6, 1e-9);
  Mesh flipped = m;
  std::swap(flipped.faces[0][1], flipped.faces[0][2]);
  EXPECT_GT(unpaired_edges(flipped), 0);
  Mesh inside_out = m;
  for (auto& f : inside_out.faces) std::swap(f[1], f[2]);
  EXPECT_LT(signed_volume(inside_out), 0);
  Mesh open = m;
  open.faces.pop_back();
  EXPECT_GT(unpaired_edges(open), 0);
}

TEST(SynthShapes, SameSeedSameMeshOtherSeedOtherMesh) {
  for (const auto& cls : synth_shape_classes()) {
    SCOPED_TRACE(cls);
    const Mesh a = make_synth_shape(cls, 42), b = make_synth_shape(cls, 42), c = make_synth_shape(cls, 43);
    EXPECT_EQ(a.vertices, b.vertices);
    EXPECT_EQ(a.faces, b.faces);
    EXPECT_NE(a.vertices, c.vertices);
  }
}

// Random proportions: the bounding box's shape changes from seed to seed
// (each class has some ratio that varies by more than 5%).
TEST(SynthShapes, ProportionsVaryWithTheSeed) {
  for (const auto& cls : synth_shape_classes()) {
    SCOPED_TRACE(cls);
    std::array<float, 3> lo{1e9f, 1e9f, 1e9f}, hi{-1e9f, -1e9f, -1e9f};
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const Box3 b = bounds(make_synth_shape(cls, seed));
      for (int k = 0; k < 3; ++k) {
        lo[k] = std::min(lo[k], b.extent(k));
        hi[k] = std::max(hi[k], b.extent(k));
      }
    }
    EXPECT_GT(std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}), 0.05);
  }
}

TEST(SynthShapes, UnknownClassIsAUsageErrorListingTheKnownOnes) {
  const std::string message = usage_error_of([] { make_synth_shape("teapot", 0); });
  EXPECT_NE(message.find("teapot"), std::string::npos) << message;
  EXPECT_NE(message.find("airplane"), std::string::npos) << message;
  EXPECT_NE(usage_error_of([] { synth_shape_description("teapot"); }), "(no UsageError)");
}

TEST(SynthShapes, PerFileSeedsDependOnSeedClassAndIndex) {
  const uint64_t s = synth_shape_seed(0, "box", 1);
  EXPECT_EQ(s, synth_shape_seed(0, "box", 1));
  EXPECT_NE(s, synth_shape_seed(1, "box", 1));
  EXPECT_NE(s, synth_shape_seed(0, "cone", 1));
  EXPECT_NE(s, synth_shape_seed(0, "box", 2));
}

// ---------------------------------------------------------------------------
// The OFF tree

TEST(SynthShapesTree, WritesModelNetLayoutCountsAndReadme) {
  const std::string dir = fresh_dir("synth_tree");
  SynthShapesOptions o;
  o.train_per_class = 3;
  o.test_per_class = 2;
  o.seed = 5;
  o.classes = {"mug", "box"};
  const auto summary = write_synth_shapes(dir, o);
  EXPECT_EQ(summary.train_files, 6);
  EXPECT_EQ(summary.test_files, 4);
  EXPECT_EQ(summary.files(), 10);
  EXPECT_EQ(summary.classes, (std::vector<std::string>{"mug", "box"}));

  const std::vector<fs::path> expected{"README.txt",
                                       "box/test/box_0004.off",
                                       "box/test/box_0005.off",
                                       "box/train/box_0001.off",
                                       "box/train/box_0002.off",
                                       "box/train/box_0003.off",
                                       "mug/test/mug_0004.off",
                                       "mug/test/mug_0005.off",
                                       "mug/train/mug_0001.off",
                                       "mug/train/mug_0002.off",
                                       "mug/train/mug_0003.off"};
  EXPECT_EQ(files_under(dir), expected);

  // Each file is exactly the mesh of its derived seed, read back losslessly.
  for (const char* cls : {"mug", "box"})
    for (int64_t index = 1; index <= 5; ++index) {
      char name[64];
      std::snprintf(name, sizeof name, "%s/%s/%s_%04lld.off", cls, index <= 3 ? "train" : "test", cls,
                    static_cast<long long>(index));
      SCOPED_TRACE(name);
      const Mesh expect = make_synth_shape(cls, synth_shape_seed(5, cls, index));
      const Mesh got = parse_off(slurp(fs::path(dir) / name));
      EXPECT_EQ(got.vertices, expect.vertices);
      EXPECT_EQ(got.faces, expect.faces);
    }

  const std::string readme = slurp(fs::path(dir) / "README.txt");
  for (const char* needle : {"qkv data synth-shapes", "seed: 5\n", "train per class: 3\n", "test per class: 2\n",
                             "files: 10\n", "mug:", "box:"})
    EXPECT_NE(readme.find(needle), std::string::npos) << needle << " in\n" << readme;
  fs::remove_all(dir);
}

TEST(SynthShapesTree, SameSeedByteIdenticalFilesOtherSeedOtherFiles) {
  const std::string a = fresh_dir("synth_a"), b = fresh_dir("synth_b"), c = fresh_dir("synth_c"),
                    d = fresh_dir("synth_d");
  SynthShapesOptions o;
  o.train_per_class = 2;
  o.test_per_class = 1;
  o.seed = 9;
  o.classes = {"chair", "torus"};
  write_synth_shapes(a, o);
  write_synth_shapes(b, o);
  // Adding a class leaves the others' files unchanged.
  SynthShapesOptions more = o;
  more.classes = {"airplane", "chair", "torus"};
  write_synth_shapes(d, more);
  o.seed = 10;
  write_synth_shapes(c, o);
  for (const auto& rel : files_under(a)) {
    SCOPED_TRACE(rel.string());
    EXPECT_EQ(slurp(fs::path(a) / rel), slurp(fs::path(b) / rel));
    if (rel.extension() == ".off") {
      EXPECT_NE(slurp(fs::path(a) / rel), slurp(fs::path(c) / rel));
      EXPECT_EQ(slurp(fs::path(a) / rel), slurp(fs::path(d) / rel));
    }
  }
  for (const auto& dir : {a, b, c, d}) fs::remove_all(dir);
}

TEST(SynthShapesTree, BadOptionsAreUsageErrorsNamingTheOption) {
  const std::string dir = fresh_dir("synth_bad");
  auto with = [&](auto change) {
    SynthShapesOptions o;
    o.train_per_class = 1;
    o.test_per_class = 1;
    change(o);
    return usage_error_of([&] { write_synth_shapes(dir, o); });
  };
  EXPECT_NE(with([](auto& o) { o.train_per_class = -1; }).find("train_per_class"), std::string::npos);
  EXPECT_NE(with([](auto& o) { o.test_per_class = -2; }).find("test_per_class"), std::string::npos);
  EXPECT_NE(with([](auto& o) { o.train_per_class = o.test_per_class = 0; }).find("nothing to write"),
            std::string::npos);
  const std::string unknown = with([](auto& o) { o.classes = {"box", "teapot"}; });
  EXPECT_NE(unknown.find("classes: unknown synthetic shape class 'teapot'"), std::string::npos) << unknown;
  EXPECT_NE(with([](auto& o) { o.classes = {"box", "box"}; }).find("listed twice"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir)) << "nothing is written before the options are checked";
}

// ---------------------------------------------------------------------------
// The writers

TEST(MeshWrite, OffRoundTripsExactly) {
  Mesh m = tetrahedron();
  m.vertices.push_back({0.1f, -3.4e38f, 1e-7f});
  m.vertices.push_back({std::nextafter(1.0f, 2.0f), -0.0f, 123456.789f});
  m.faces.push_back({4, 5, 0});
  const std::string path = temp_path("roundtrip.off");
  write_off(path, m);
  const std::string text = slurp(path);
  EXPECT_EQ(text.rfind("OFF\n6 5 0\n0 0 0\n", 0), 0u) << text;
  EXPECT_NE(text.find("\n3 0 2 1\n"), std::string::npos) << text;
  const Mesh back = parse_off(text);
  EXPECT_EQ(back.vertices, m.vertices);
  EXPECT_EQ(back.faces, m.faces);
  // And the project's own reader agrees.
  const Mesh read = read_off(path);
  EXPECT_EQ(read.vertices, m.vertices);
  EXPECT_EQ(read.faces, m.faces);
}

TEST(MeshWrite, OffOfASynthShapeReadsBackWithReadOff) {
  const Mesh m = make_synth_shape("lamp", 3);
  const std::string path = temp_path("lamp.off");
  write_off(path, m);
  const Mesh read = read_off(path);
  EXPECT_EQ(read.vertices, m.vertices);
  EXPECT_EQ(read.faces, m.faces);
}

TEST(MeshWrite, RefusesNonFiniteValuesAndBadIndicesNamingTheFile) {
  const std::string path = temp_path("refused.off");
  fs::remove(path);
  Mesh nan = tetrahedron();
  nan.vertices[2][1] = std::numeric_limits<float>::quiet_NaN();
  std::string message = data_error_of([&] { write_off(path, nan); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("non-finite"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(path)) << "nothing is written";

  Mesh inf = tetrahedron();
  inf.vertices[0][0] = std::numeric_limits<float>::infinity();
  EXPECT_NE(data_error_of([&] { write_ply(path, inf); }).find(path), std::string::npos);

  Mesh bad_index = tetrahedron();
  bad_index.faces[1][2] = 4;
  message = data_error_of([&] { write_off(path, bad_index); });
  EXPECT_NE(message.find("vertex 4"), std::string::npos) << message;
  bad_index.faces[1][2] = -1;
  EXPECT_NE(data_error_of([&] { write_ply(path, bad_index, true); }).find(path), std::string::npos);

  Mesh bad_normals = tetrahedron();
  bad_normals.normals = {{0, 0, 1}};
  EXPECT_NE(data_error_of([&] { write_ply(path, bad_normals); }).find("normals"), std::string::npos);
  bad_normals.normals.assign(4, {0, std::numeric_limits<float>::quiet_NaN(), 1});
  EXPECT_NE(data_error_of([&] { write_ply(path, bad_normals); }).find("normal"), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
}

TEST(MeshWrite, PlyAsciiAndBinaryCarryNormalsColorsAndFaces) {
  Mesh m = tetrahedron();
  m.vertices[1] = {0.25f, -1.5f, 3e-5f};
  m.normals = {{0, 0, 1}, {0, 1, 0}, {1, 0, 0}, {0.6f, 0.8f, 0}};
  m.colors = {{255, 0, 7}, {1, 2, 3}, {0, 0, 0}, {10, 20, 30}};

  const std::string ascii = temp_path("mesh_ascii.ply");
  write_ply(ascii, m);
  const std::string text = slurp(ascii);
  EXPECT_EQ(text.rfind("ply\nformat ascii 1.0\n", 0), 0u) << text;
  for (const char* line :
       {"element vertex 4\n", "property float nx\n", "property uchar red\n", "element face 4\n",
        "property list uchar int vertex_indices\n", "end_header\n", "\n0.25 -1.5 3e-05 0 1 0 1 2 3\n", "\n3 0 2 1\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;

  const std::string binary = temp_path("mesh_binary.ply");
  write_ply(binary, m, true);
  const std::string bytes = slurp(binary);
  const std::string end = "end_header\n";
  const size_t body = bytes.find(end) + end.size();
  EXPECT_NE(bytes.find("format binary_little_endian 1.0\n"), std::string::npos);
  // 4 vertices of 6 floats and 3 bytes, 4 faces of 1 byte and 3 ints.
  ASSERT_EQ(bytes.size() - body, 4u * (24 + 3) + 4u * (1 + 12));
  auto le_float = [&](size_t at) {
    uint32_t bits = 0;
    for (int k = 3; k >= 0; --k) bits = (bits << 8) | static_cast<unsigned char>(bytes[at + k]);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  EXPECT_EQ(le_float(body + 27), 0.25f);                            // second vertex x
  EXPECT_EQ(le_float(body + 27 + 4), -1.5f);                        // y
  EXPECT_EQ(static_cast<unsigned char>(bytes[body + 27 + 24]), 1);  // its red
  const size_t faces = body + 4 * 27;
  EXPECT_EQ(bytes[faces], 3);
  EXPECT_EQ(static_cast<unsigned char>(bytes[faces + 1 + 4]), 2);  // first face, second index

  // The project's reader agrees on both.
  for (const auto& path : {ascii, binary}) {
    SCOPED_TRACE(path);
    const Mesh read = read_ply(path);
    EXPECT_EQ(read.vertices, m.vertices);
    EXPECT_EQ(read.normals, m.normals);
    EXPECT_EQ(read.colors, m.colors);
    EXPECT_EQ(read.faces, m.faces);
  }
}

// Scalar vertex properties (a part label, an attention weight) survive write
// -> read in both encodings, exactly (ints) and as the float written; a
// property a reader could not use is refused before anything is written.
TEST(MeshWrite, PlyScalarPropertiesReadBack) {
  Mesh cloud;
  cloud.vertices = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  cloud.colors = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  cloud.vertex_properties = {{"label", true, {47, 48, -2147483648.0}}, {"attention", false, {0.5, 0.25, 1e-7}}};
  for (const bool binary : {false, true}) {
    SCOPED_TRACE(binary);
    const std::string path = temp_path(binary ? "scalars_bin.ply" : "scalars.ply");
    write_ply(path, cloud, binary);
    const std::string text = slurp(path);
    EXPECT_NE(text.find("property uchar blue\nproperty int label\nproperty float attention\n"), std::string::npos);
    const Mesh read = read_ply(path);
    EXPECT_EQ(read.colors, cloud.colors);
    ASSERT_EQ(read.vertex_properties.size(), 2u);
    EXPECT_EQ(read.vertex_properties[0].name, "label");
    EXPECT_TRUE(read.vertex_properties[0].integer);
    EXPECT_EQ(read.vertex_properties[0].values, cloud.vertex_properties[0].values);
    EXPECT_FALSE(read.vertex_properties[1].integer);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(static_cast<float>(read.vertex_properties[1].values[i]),
                static_cast<float>(cloud.vertex_properties[1].values[i]));
  }
  const std::string path = temp_path("bad_scalars.ply");
  Mesh bad = cloud;
  bad.vertex_properties[0].values.pop_back();
  EXPECT_NE(data_error_of([&] { write_ply(path, bad); }).find("2 values of 'label' for 3 vertices"), std::string::npos);
  bad = cloud;
  bad.vertex_properties[0].values[1] = 0.5;
  EXPECT_NE(data_error_of([&] { write_ply(path, bad); }).find("vertex 1's 'label'"), std::string::npos);
  bad = cloud;
  bad.vertex_properties[1].values[2] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(data_error_of([&] { write_ply(path, bad); }).find("'attention'"), std::string::npos);
  for (const char* name : {"red", "two words", "", "label"}) {
    bad = cloud;
    bad.vertex_properties[1].name = name;
    EXPECT_NE(data_error_of([&] { write_ply(path, bad); }).find("vertex property named"), std::string::npos) << name;
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(MeshWrite, PlyOfAPointCloudHasNoFaceElement) {
  Mesh cloud;
  cloud.vertices = {{1, 2, 3}, {4, 5, 6}};
  const std::string path = temp_path("cloud.ply");
  write_ply(path, cloud);
  const std::string text = slurp(path);
  EXPECT_EQ(text.find("element face"), std::string::npos) << text;
  EXPECT_NE(text.find("end_header\n1 2 3\n4 5 6\n"), std::string::npos) << text;
}

// ---------------------------------------------------------------------------
// The command, where the test build has the binary.

#include "support/cli_run.h"
#include "support/paths.h"

TEST(SynthShapesCli, ListWriteRefuseAndBadOptions) {
  using qkv::testing::expect_clean_failure;
  using qkv::testing::run_qkv;
  const auto list = run_qkv("data synth-shapes --list");
  EXPECT_EQ(list.status, 0) << list.output;
  for (const auto& cls : synth_shape_classes()) EXPECT_NE(list.output.find(cls), std::string::npos) << cls;

  const std::string dir = fresh_dir("synth_cli");
  const std::string args =
      "data synth-shapes --out " + dir + " --classes box,torus --train-per-class 2 --test-per-class 1";
  const auto ok = run_qkv(args);
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("2 classes, 6 files"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find(dir), std::string::npos) << ok.output;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "torus" / "test" / "torus_0003.off"));

  expect_clean_failure(run_qkv(args), 2, dir);
  EXPECT_EQ(run_qkv(args + " --overwrite").status, 0);

  const std::string bad = "data synth-shapes --out " + dir + "_bad";
  expect_clean_failure(run_qkv(bad + " --classes teapot"), 2, "teapot");
  expect_clean_failure(run_qkv(bad + " --train-per-class -1"), 2, "--train-per-class");
  expect_clean_failure(run_qkv(bad + " --seed -1"), 2, "--seed");
  expect_clean_failure(run_qkv(bad + " --test-per-class x"), 2, "--test-per-class");
  expect_clean_failure(run_qkv("data synth-shapes"), 2, "--out");
  EXPECT_FALSE(fs::exists(dir + "_bad"));
  fs::remove_all(dir);
}
