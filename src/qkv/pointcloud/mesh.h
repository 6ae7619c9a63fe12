#pragma once
// A triangle mesh or a bare point cloud in plain std containers: what readers
// return, what the procedural shape generator builds and what writers take.
// Tensors come later (sampling), so that mesh code needs no LibTorch.
#include <array>
#include <cstdint>
#include <vector>

namespace qkv::pointcloud {

using Vec3 = std::array<float, 3>;

struct Mesh {
  std::vector<Vec3> vertices;
  std::vector<Vec3> normals;                   // per vertex; empty when the file has none
  std::vector<std::array<int64_t, 3>> faces;   // triangles (polygons are fanned); empty for a point cloud
  std::vector<std::array<uint8_t, 3>> colors;  // per vertex RGB; empty unless written for display
  // Per face: the part it belongs to (the synthetic part-segmentation shapes);
  // empty when the mesh has no part labels, else one per face.
  std::vector<int32_t> face_parts;

  bool has_normals() const { return !normals.empty(); }
  bool is_point_cloud() const { return faces.empty(); }
};

}  // namespace qkv::pointcloud
