#pragma once
// A triangle mesh or a bare point cloud in plain std containers: what readers
// return, what the procedural shape generator builds and what writers take.
// Tensors come later (sampling), so that mesh code needs no LibTorch.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::pointcloud {

using Vec3 = std::array<float, 3>;

// A named value per vertex beyond position, normal and colour (a part label,
// an attention weight), so that a viewer (MeshLab, Open3D, CloudCompare) can
// colour by it with its own colour map. PLY only: written as `int NAME` when
// `integer`, else `float NAME`; the PLY reader returns every extra scalar
// vertex property this way.
struct VertexProperty {
  std::string name;
  bool integer = false;
  std::vector<double> values;  // one per vertex
};

struct Mesh {
  std::vector<Vec3> vertices;
  std::vector<Vec3> normals;                   // per vertex; empty when the file has none
  std::vector<std::array<int64_t, 3>> faces;   // triangles (polygons are fanned); empty for a point cloud
  std::vector<std::array<uint8_t, 3>> colors;  // per vertex RGB; empty unless written for display
  // Per face: the part it belongs to (the synthetic part-segmentation shapes);
  // empty when the mesh has no part labels, else one per face.
  std::vector<int32_t> face_parts;
  std::vector<VertexProperty> vertex_properties;
  // Where `vertices` are measured from: the file's coordinates are vertices +
  // origin. A georeferenced scan (UTM metres in the millions) would lose its
  // detail as float32 (steps of 0.5 at 4.5e6), so readers keep it relative
  // to an origin near its centre; (0, 0, 0) for a shape near 0.
  std::array<double, 3> origin{0, 0, 0};

  bool has_normals() const { return !normals.empty(); }
  bool has_origin() const { return origin[0] != 0 || origin[1] != 0 || origin[2] != 0; }
  bool is_point_cloud() const { return faces.empty(); }
};

// The origin positions are held relative to (Mesh::origin), from their
// bounding box [low, high] per axis: the box's centre rounded to a multiple
// of 1024 where the box lies farther from 0 than its own size, else 0 (our
// choice: a shape near 0, or one that spans from 0 to far away, keeps
// exactly the floats it had). Every reader and cloud qkv labels uses it.
inline std::array<double, 3> origin_of_box(const std::array<double, 3>& low, const std::array<double, 3>& high) {
  std::array<double, 3> origin{0, 0, 0};
  for (size_t c = 0; c < 3; ++c) {
    const double centre = low[c] / 2 + high[c] / 2;
    origin[c] = std::abs(centre) > high[c] - low[c] ? std::nearbyint(centre / 1024.0) * 1024.0 : 0.0;
  }
  return origin;
}

// Positions as a reader reads them, kept exactly (double) until all are
// read, when origin() is taken from their bounding box and relative(i) gives
// each as float32 relative to it. Every reader of positions uses it.
class ExactPositions {
 public:
  void push(const std::array<double, 3>& v) {
    for (size_t c = 0; c < 3; ++c) {
      low_[c] = std::min(low_[c], v[c]);
      high_[c] = std::max(high_[c], v[c]);
    }
    exact_.push_back(v);
  }
  void reserve(size_t n) { exact_.reserve(n); }
  size_t size() const { return exact_.size(); }
  std::array<double, 3> origin() const {
    return exact_.empty() ? std::array<double, 3>{0, 0, 0} : origin_of_box(low_, high_);
  }
  Vec3 relative(size_t i, const std::array<double, 3>& origin) const {
    const auto& v = exact_[i];
    return {static_cast<float>(v[0] - origin[0]), static_cast<float>(v[1] - origin[1]),
            static_cast<float>(v[2] - origin[2])};
  }

 private:
  std::vector<std::array<double, 3>> exact_;
  std::array<double, 3> low_{HUGE_VAL, HUGE_VAL, HUGE_VAL}, high_{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
};

// Whether a normal read from a file is a unit vector (its squared length
// within 0.1 of 1, i.e. the length within 5 %) or the zeros a point without
// one gets: how readers tell a normal from a colour in 0..1 (our choice).
inline bool is_unit_or_zero_normal(double x, double y, double z) {
  const double length2 = x * x + y * y + z * z;
  return length2 == 0 || std::abs(length2 - 1) <= 0.1;
}

}  // namespace qkv::pointcloud
