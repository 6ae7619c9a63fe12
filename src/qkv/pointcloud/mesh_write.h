#pragma once
// Writers for the two mesh formats the readers take: OFF (ModelNet's format)
// and PLY. Each file is built whole in memory and written atomically, so a
// crash leaves either the previous file or the complete new one.
//
// Both refuse, with a DataError naming the path, a mesh that no reader should
// be handed: a NaN or infinite coordinate or normal, a face index outside the
// vertex list, or normals/colors whose count differs from the vertex count.
#include <cstddef>
#include <string>

#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

// OFF: "OFF", the counts, one "x y z" line per vertex, one "3 a b c" line per
// triangle. Geometry only: normals and colors are not written (use PLY).
// Numbers are written in the shortest form that reads back to the same float
// (to the same double vertex + origin, for a mesh with an origin).
void write_off(const std::string& path, const Mesh& mesh);

// PLY, ASCII or binary little-endian: vertex x y z (float; double, vertex +
// origin, for a mesh with an origin: a scan far from 0), nx ny nz (float)
// when the mesh has normals, red green blue (uchar) when it has colors, one
// `int`/`float` property per vertex_properties entry (a DataError for a
// name that is empty, has spaces or repeats a standard one, a wrong count, or
// a value the type cannot hold), and a
// face element with a `vertex_indices` list (uchar count, int indices) unless
// the mesh is a bare point cloud.
void write_ply(const std::string& path, const Mesh& mesh, bool binary = false);

// PLY as qkv's commands write their outputs (seg predict, vnt attention):
// ASCII, readable in an editor, for the clouds a model sees (1-2 k points);
// binary from kBinaryPlyFromVertices vertices (our choice), ~3x smaller and
// much faster to parse.
constexpr size_t kBinaryPlyFromVertices = 100000;
void write_ply_sized(const std::string& path, const Mesh& mesh);

}  // namespace qkv::pointcloud
