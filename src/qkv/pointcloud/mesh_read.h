#pragma once
// Readers for the shape files point-cloud data sets ship in: OFF (ModelNet40),
// PLY (ascii and binary little endian) and plain point text (.txt / .xyz).
// Every malformation throws qkv::DataError with one line that names the file
// and what is wrong; nothing is ever silently repaired.
#include <cstdint>
#include <string>

#include "qkv/pointcloud/mesh.h"

namespace qkv::pointcloud {

// OFF: "OFF" then "nV nF nE" (or both fused on one line, "OFF490 518 0", as in
// part of ModelNet40), nV lines "x y z", nF lines "k i1 .. ik [colour]".
// '#' starts a comment. Polygons are fanned into triangles (i1, ij, ij+1).
Mesh read_off(const std::string& path);

// PLY, format ascii or binary_little_endian. Vertex x, y, z of any scalar type,
// nx, ny, nz if all three are there, red, green, blue if all three are there;
// faces from the list property vertex_indices (or vertex_index) with any count
// and index types, fanned into triangles. Other properties and elements are
// skipped. binary_big_endian is refused with a message saying so.
Mesh read_ply(const std::string& path);

// One point per line: "x y z" or "x y z nx ny nz", separated by commas and/or
// whitespace; every line has the same number of columns. Blank lines and lines
// starting with '#' are skipped. max_points > 0 stops after that many points
// (the ModelNet40 resampled files hold 10000 and callers keep the first 1024 or
// 2048); lines past it are not checked.
Mesh read_point_text(const std::string& path, int64_t max_points = 0);

// By extension, case-insensitive: .off, .ply, .txt, .xyz; anything else is a
// UsageError naming the file and the extensions understood.
Mesh read_shape_file(const std::string& path);

}  // namespace qkv::pointcloud
