#include "qkv/pointcloud/mesh_write.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"

namespace qkv::pointcloud {
namespace {

// Everything a reader would choke on, checked before a byte is written.
void validate(const std::string& path, const Mesh& mesh) {
  const auto n = static_cast<int64_t>(mesh.vertices.size());
  auto check_finite = [&](const std::vector<Vec3>& values, const char* what) {
    for (size_t i = 0; i < values.size(); ++i)
      for (float c : values[i])
        if (!std::isfinite(c))
          throw DataError(path + ": cannot write a mesh with a non-finite " + what + " (" + what + " " +
                          std::to_string(i) + ")");
  };
  check_finite(mesh.vertices, "vertex coordinate");
  if (!mesh.normals.empty() && static_cast<int64_t>(mesh.normals.size()) != n)
    throw DataError(path + ": " + std::to_string(mesh.normals.size()) + " normals for " + std::to_string(n) +
                    " vertices");
  check_finite(mesh.normals, "normal");
  if (!mesh.colors.empty() && static_cast<int64_t>(mesh.colors.size()) != n)
    throw DataError(path + ": " + std::to_string(mesh.colors.size()) + " colors for " + std::to_string(n) +
                    " vertices");
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (int64_t v : mesh.faces[f])
      if (v < 0 || v >= n)
        throw DataError(path + ": face " + std::to_string(f) + " refers to vertex " + std::to_string(v) + " of " +
                        std::to_string(n));
  for (const auto& prop : mesh.vertex_properties) {
    static const char* const kTaken[] = {"x", "y", "z", "nx", "ny", "nz", "red", "green", "blue"};
    const bool bad_name = prop.name.empty() || prop.name.find_first_of(" \t\r\n") != std::string::npos ||
                          std::find(std::begin(kTaken), std::end(kTaken), prop.name) != std::end(kTaken) ||
                          std::count_if(mesh.vertex_properties.begin(), mesh.vertex_properties.end(),
                                        [&](const VertexProperty& q) { return q.name == prop.name; }) > 1;
    if (bad_name) throw DataError(path + ": cannot write a vertex property named '" + prop.name + "'");
    if (static_cast<int64_t>(prop.values.size()) != n)
      throw DataError(path + ": " + std::to_string(prop.values.size()) + " values of '" + prop.name + "' for " +
                      std::to_string(n) + " vertices");
    for (size_t i = 0; i < prop.values.size(); ++i) {
      const double v = prop.values[i];
      const bool fits = prop.integer ? v == std::floor(v) && v >= std::numeric_limits<int32_t>::min() &&
                                           v <= std::numeric_limits<int32_t>::max()
                                     : std::isfinite(static_cast<float>(v));
      if (!fits)
        throw DataError(path + ": vertex " + std::to_string(i) + "'s '" + prop.name + "' (" + std::to_string(v) +
                        ") is not a finite " + (prop.integer ? "32-bit integer" : "float"));
    }
  }
  // PLY stores indices as int.
  if (n > std::numeric_limits<int32_t>::max())
    throw DataError(path + ": " + std::to_string(n) + " vertices is more than a 32-bit index can address");
}

// The shortest decimal that reads back to exactly this float, so that
// write -> read is lossless and the same mesh always gives the same bytes.
void append_float(std::string& out, float value) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

void append_int(std::string& out, int64_t value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

void append_vec3(std::string& out, const Vec3& v) {
  append_float(out, v[0]);
  out += ' ';
  append_float(out, v[1]);
  out += ' ';
  append_float(out, v[2]);
}

// A vertex's position in the file's own coordinates (Mesh::origin added):
// the shortest decimal of the double when the mesh has an origin, else of
// the float.
void append_position(std::string& out, const Mesh& mesh, size_t i) {
  if (!mesh.has_origin()) return append_vec3(out, mesh.vertices[i]);
  for (size_t c = 0; c < 3; ++c) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, double{mesh.vertices[i][c]} + mesh.origin[c]);
    out.append(buf, r.ptr);
    if (c < 2) out += ' ';
  }
}

// Binary PLY is little-endian whatever the host: bytes are assembled from
// the value's bit pattern, not copied in host order.
void append_le32(std::string& out, uint32_t bits) {
  for (int shift = 0; shift < 32; shift += 8) out += static_cast<char>((bits >> shift) & 0xFFu);
}

void append_le_float(std::string& out, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  append_le32(out, bits);
}

void append_le_double(std::string& out, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  for (int shift = 0; shift < 64; shift += 8) out += static_cast<char>((bits >> shift) & 0xFFu);
}

// "3 a b c": a triangle as OFF and ascii PLY both write it.
void append_face_line(std::string& out, const std::array<int64_t, 3>& face) {
  out += '3';
  for (int64_t i : face) {
    out += ' ';
    append_int(out, i);
  }
  out += '\n';
}

}  // namespace

void write_off(const std::string& path, const Mesh& mesh) {
  validate(path, mesh);
  std::string out;
  out.reserve(32 + mesh.vertices.size() * 36 + mesh.faces.size() * 20);
  out += "OFF\n";
  append_int(out, static_cast<int64_t>(mesh.vertices.size()));
  out += ' ';
  append_int(out, static_cast<int64_t>(mesh.faces.size()));
  out += " 0\n";
  for (size_t i = 0; i < mesh.vertices.size(); ++i) {
    append_position(out, mesh, i);
    out += '\n';
  }
  for (const auto& f : mesh.faces) append_face_line(out, f);
  write_file_atomic(path, out);
}

void write_ply(const std::string& path, const Mesh& mesh, bool binary) {
  validate(path, mesh);
  const bool normals = mesh.has_normals();
  const bool colors = !mesh.colors.empty();
  std::string out = "ply\n";
  out += binary ? "format binary_little_endian 1.0\n" : "format ascii 1.0\n";
  out += "comment written by qkv\n";
  out += "element vertex " + std::to_string(mesh.vertices.size()) + "\n";
  // Positions far from 0 (Mesh::origin) as double, which keeps their detail.
  const bool wide = mesh.has_origin();
  out += wide ? "property double x\nproperty double y\nproperty double z\n"
              : "property float x\nproperty float y\nproperty float z\n";
  if (normals) out += "property float nx\nproperty float ny\nproperty float nz\n";
  if (colors) out += "property uchar red\nproperty uchar green\nproperty uchar blue\n";
  for (const auto& prop : mesh.vertex_properties)
    out += std::string("property ") + (prop.integer ? "int " : "float ") + prop.name + "\n";
  if (!mesh.faces.empty()) {
    out += "element face " + std::to_string(mesh.faces.size()) + "\n";
    out += "property list uchar int vertex_indices\n";
  }
  out += "end_header\n";

  for (size_t i = 0; i < mesh.vertices.size(); ++i) {
    if (binary) {
      for (size_t c = 0; c < 3; ++c) {
        if (wide)
          append_le_double(out, double{mesh.vertices[i][c]} + mesh.origin[c]);
        else
          append_le_float(out, mesh.vertices[i][c]);
      }
      if (normals)
        for (float c : mesh.normals[i]) append_le_float(out, c);
      if (colors)
        for (uint8_t c : mesh.colors[i]) out += static_cast<char>(c);
      for (const auto& prop : mesh.vertex_properties) {
        if (prop.integer)
          append_le32(out, static_cast<uint32_t>(static_cast<int32_t>(prop.values[i])));
        else
          append_le_float(out, static_cast<float>(prop.values[i]));
      }
    } else {
      append_position(out, mesh, i);
      if (normals) {
        out += ' ';
        append_vec3(out, mesh.normals[i]);
      }
      if (colors)
        for (uint8_t c : mesh.colors[i]) {
          out += ' ';
          append_int(out, c);
        }
      for (const auto& prop : mesh.vertex_properties) {
        out += ' ';
        if (prop.integer)
          append_int(out, static_cast<int64_t>(prop.values[i]));
        else
          append_float(out, static_cast<float>(prop.values[i]));
      }
      out += '\n';
    }
  }
  for (const auto& f : mesh.faces) {
    if (binary) {
      out += static_cast<char>(3);
      for (int64_t i : f) append_le32(out, static_cast<uint32_t>(i));
    } else {
      append_face_line(out, f);
    }
  }
  write_file_atomic(path, out);
}

void write_ply_sized(const std::string& path, const Mesh& mesh) {
  write_ply(path, mesh, mesh.vertices.size() >= kBinaryPlyFromVertices);
}

}  // namespace qkv::pointcloud
