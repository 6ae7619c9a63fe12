#pragma once
// Readers for the shape files point-cloud data sets and 3-D tools write: OFF
// (ModelNet40), PLY (ascii, binary of either byte order), Wavefront OBJ, STL
// (ascii and binary), PCL's PCD (ascii and binary) and plain point text
// (.txt / .xyz / .csv). Small readers of qkv's own rather than a library of
// 40 formats (assimp): each is a few dozen lines that check every size
// against the file before allocating, and each has a fuzz target.
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

// PLY, format ascii, binary_little_endian or binary_big_endian. Vertex x, y, z of any scalar type,
// nx, ny, nz if all three are there, red, green, blue if all three are there;
// faces from the list property vertex_indices (or vertex_index) with any count
// and index types, fanned into triangles. Other properties and elements are
// skipped.
Mesh read_ply(const std::string& path);

// One point per line: "x y z" or "x y z nx ny nz", separated by commas and/or
// whitespace; every line has the same number of columns. Blank lines and lines
// starting with '#' are skipped. max_points > 0 stops after that many points
// (the ModelNet40 resampled files hold 10000 and callers keep the first 1024 or
// 2048); lines past it are not checked.
Mesh read_point_text(const std::string& path, int64_t max_points = 0);

// Wavefront OBJ: v and f lines (corners "i", "i/t", "i//n", "i/t/n"; negative
// indices count back from the last vertex; polygons fanned); the rest skipped.
Mesh read_obj(const std::string& path);

// STL, binary (recognised by its exact size) or ASCII; each triangle keeps its
// own three vertices.
Mesh read_stl(const std::string& path);

// PCD point clouds, DATA ascii or binary: x y z and normal_x normal_y normal_z
// when present; NaN points (an organized cloud's holes) are dropped.
Mesh read_pcd(const std::string& path);

// The extensions read_shape_file reads, lower case with the dot: meshes and
// point clouds (a PLY file holds either; .txt .xyz .csv are x y z [nx ny nz]
// lines), and all of them. Help texts and messages name them from here.
inline constexpr const char* kMeshFileExtensions[] = {".off", ".ply", ".obj", ".stl"};
inline constexpr const char* kPointFileExtensions[] = {".ply", ".pcd", ".txt", ".xyz", ".csv"};
inline constexpr const char* kShapeFileExtensions[] = {".off", ".ply", ".obj", ".stl", ".pcd", ".txt", ".xyz", ".csv"};
bool is_shape_file_extension(const std::string& ext);  // case-insensitive
std::string shape_file_extensions_text();              // ".off, .ply, ... or .csv"
// "a mesh (.off .ply .obj .stl) or a point cloud (.ply .pcd .txt .xyz .csv)",
// as a help text says it; `without_txt` leaves .txt out (a folder's .txt
// files are skipped: they are READMEs and lists more often than points).
std::string shape_file_kinds_text(bool without_txt = false);

// By extension, case-insensitive (kShapeFileExtensions); anything else is a
// UsageError naming the file and the extensions understood.
Mesh read_shape_file(const std::string& path);

}  // namespace qkv::pointcloud
