#pragma once
// From a Mesh to a fixed number of points: area-weighted sampling of a surface,
// or a subset of a bare point cloud. Seeded by the caller and drawn from a
// private std::mt19937_64, so it neither reads nor moves torch's global
// generator and the same (mesh, n, seed) gives the same points on every run.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

// A well-spread 64-bit seed for item `index` of a run seeded with `seed`
// (splitmix64 applied twice), so that neighbouring indices and neighbouring
// seeds give unrelated streams.
uint64_t seed_mix(uint64_t seed, uint64_t index);

// 64-bit FNV-1a of a name or relative path: a seed source that is the same on
// every platform (std::hash is not).
uint64_t fnv1a(const std::string& s);

struct SampledPoints {
  at::Tensor points;   // [n, 3] float32
  at::Tensor normals;  // [n, 3] float32 unit face normals; for a point cloud its own normals, or undefined
  at::Tensor faces;    // [n] int64: the face each point lies on (meshes only; undefined for a point cloud)
  at::Tensor indices;  // [n] int64: the stored point each one is (point clouds only; undefined for a mesh)
};

// A mesh with faces: n points uniform over its surface (a face is picked with
// probability proportional to its area, then a uniform point inside it), each
// with its face's unit normal (orientation from the winding).
// A point cloud (no faces): n of its points, a random subset without
// replacement when it has at least n, otherwise every point once plus random
// repeats, in random order.
// Errors are DataErrors; `source` (usually the file) starts their message when
// given: "chair_0001.off: mesh has zero surface area". n < 0 is a UsageError.
// A point cloud without extent (one point, or every point the same) is
// refused as well.
SampledPoints sample_surface(const Mesh& mesh, int64_t n, uint64_t seed, const std::string& source = "");

// DataError "SOURCE: only 1 point; ..." / "all N points are the same point"
// / "a coordinate is not finite" / "no points".
void check_point_cloud_extent(const std::vector<Vec3>& points, const std::string& source);

}  // namespace qkv::pointcloud
