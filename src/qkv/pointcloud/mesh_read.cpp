#include "qkv/pointcloud/mesh_read.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string_view>
#include <vector>

#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/parse_errors.h"
#include "qkv/core/text.h"

namespace qkv::pointcloud {
namespace {

using parse::fail;
using parse::fail_at;
using parse::show;

// Walks a text buffer line by line, counting lines from 1 and dropping '\r'.
class Lines {
 public:
  // A UTF-8 byte order mark (Windows tools write one) is skipped: consumed() still counts its bytes.
  Lines(std::string_view text, int64_t first_line = 1)
      : rest_(without_byte_order_mark(text)), size_(text.size()), line_(first_line - 1) {}

  // The next line with '#' comments (if strip_comments) and surrounding blanks
  // removed that is not empty; false at the end of the text.
  bool next_nonblank(std::string_view& out, bool strip_comments) {
    while (!rest_.empty()) {
      const size_t eol = rest_.find('\n');
      std::string_view line = rest_.substr(0, eol);
      rest_ = eol == std::string_view::npos ? std::string_view() : rest_.substr(eol + 1);
      ++line_;
      if (strip_comments) line = line.substr(0, line.find('#'));
      line = trim(line);
      if (!line.empty()) {
        out = line;
        return true;
      }
    }
    return false;
  }
  int64_t line() const { return line_; }
  // Bytes of the text consumed so far: where the next line starts.
  size_t consumed() const { return size_ - rest_.size(); }

 private:
  std::string_view rest_;
  size_t size_;
  int64_t line_;
};

// The tokens of one line, separated by whitespace (and by commas too when
// `commas`), one at a time: a face line may list millions of corners, and a
// vector of them would take eight times the line's bytes again.
class Tokens {
 public:
  explicit Tokens(std::string_view line, bool commas = false) : rest_(line), commas_(commas) {}
  bool next(std::string_view& out) {
    size_t i = 0;
    while (i < rest_.size() && is_separator(rest_[i])) ++i;
    const size_t start = i;
    while (i < rest_.size() && !is_separator(rest_[i])) ++i;
    out = rest_.substr(start, i - start);
    rest_ = rest_.substr(i);
    return !out.empty();
  }
  // How many tokens are left (read through, not kept).
  int64_t count_left() const {
    Tokens copy = *this;
    std::string_view t;
    int64_t n = 0;
    while (copy.next(t)) ++n;
    return n;
  }

 private:
  bool is_separator(char c) const { return std::isspace(static_cast<unsigned char>(c)) || (commas_ && c == ','); }
  std::string_view rest_;
  bool commas_;
};

// Splits on whitespace, and on commas too when `commas`: Tokens, kept.
void split(std::string_view line, std::vector<std::string_view>& tokens, bool commas = false) {
  tokens.clear();
  Tokens t(line, commas);
  for (std::string_view token; t.next(token);) tokens.push_back(token);
}

bool parse_int(std::string_view tok, int64_t& out) {
  if (!tok.empty() && tok[0] == '+') tok.remove_prefix(1);
  if (tok.empty()) return false;
  const auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), out);
  return ec == std::errc() && ptr == tok.data() + tok.size();
}

// Why a value read as double is no float coordinate: 1e300 is finite, and
// too large for the float32 that clouds are stored in.
std::string not_a_float(double v) {
  return std::isfinite(v) ? "is beyond float32's range (magnitude above 3.4e38)" : "is not finite";
}

// A coordinate or normal component: numeric, and finite once stored as float.
double finite_value(const std::string& path, int64_t line, std::string_view tok) {
  double v = 0;
  if (!parse_decimal(tok, v)) fail_at(path, line, "non-numeric value " + show(tok));
  if (!std::isfinite(static_cast<float>(v))) fail_at(path, line, "value " + show(tok) + " " + not_a_float(v));
  return v;
}

float coordinate(const std::string& path, int64_t line, std::string_view tok) {
  return static_cast<float>(finite_value(path, line, tok));
}

// Positions relative to Mesh::origin, which keeps a georeferenced scan's
// detail (UTM metres: float32 steps of 0.5 at 4.5e6). Readers push each
// vertex as this returns it, and call finish() once all are read: the exact
// values are kept aside (ExactPositions, mesh.h) until then, when the origin
// is taken from their bounding box and every vertex is made again relative
// to it.
class RelativePositions {
 public:
  explicit RelativePositions(Mesh& mesh) : mesh_(mesh) {}
  Vec3 operator()(double x, double y, double z) {
    // As many as the reader reserved for the mesh (a header's count): a
    // vector doubling past it had held twice the exact positions at its peak.
    if (exact_.size() == 0) exact_.reserve(mesh_.vertices.capacity());
    exact_.push({x, y, z});
    return {static_cast<float>(x), static_cast<float>(y), static_cast<float>(z)};
  }
  // Values read in file order (x, then y, then z), so that the first bad one is named.
  Vec3 operator()(const std::string& path, int64_t line, std::string_view x, std::string_view y, std::string_view z) {
    const double vx = finite_value(path, line, x);
    const double vy = finite_value(path, line, y);
    const double vz = finite_value(path, line, z);
    return (*this)(vx, vy, vz);
  }
  void finish() {
    if (exact_.size() != mesh_.vertices.size() || exact_.size() == 0) return;
    mesh_.origin = exact_.origin();
    if (!mesh_.has_origin()) return;  // the floats pushed are the ones to keep
    for (size_t i = 0; i < exact_.size(); ++i) mesh_.vertices[i] = exact_.relative(i, mesh_.origin);
    exact_ = ExactPositions();
  }

 private:
  Mesh& mesh_;
  ExactPositions exact_;
};

void check_face_indices(const std::string& path, const Mesh& mesh) {
  const auto n = static_cast<int64_t>(mesh.vertices.size());
  for (size_t f = 0; f < mesh.faces.size(); ++f)
    for (int64_t i : mesh.faces[f])
      if (i < 0 || i >= n)
        fail(path, "face index " + std::to_string(i) + " is out of range (" + std::to_string(n) + " vertices)");
}

// A polygon fanned into triangles as its corners arrive (corner 0, the
// previous corner, this corner), holding none of them: every reader's fan.
class FanBuilder {
 public:
  explicit FanBuilder(Mesh& mesh) : mesh_(mesh) {}
  void corner(int64_t index) {
    if (corners_ == 0) first_ = index;
    if (corners_ >= 2) mesh_.faces.push_back({first_, previous_, index});
    previous_ = index;
    ++corners_;
  }
  int64_t corners() const { return corners_; }

 private:
  Mesh& mesh_;
  int64_t first_ = 0, previous_ = 0, corners_ = 0;
};

// A polygon whose corners are already in a vector (PLY, STL), fanned.
void fan(Mesh& mesh, const std::vector<int64_t>& polygon) {
  FanBuilder triangles(mesh);
  for (const int64_t corner : polygon) triangles.corner(corner);
}

// Triangles are reserved once, for exactly what the face lines make: a
// polygon of k corners fans into k - 2 triangles of 24 bytes from as little
// as 2 bytes a corner in the file, and a vector left to grow by doubling
// would hold up to three times that at once.
void reserve_triangles(Mesh& mesh, int64_t triangles) {
  if (triangles > 0) mesh.faces.reserve(mesh.faces.size() + static_cast<size_t>(triangles));
}

// ---------------------------------------------------------------------------- OFF

// What an OFF file's keyword says its vertex lines hold beyond x y z, in
// Geomview's order "x y z [nx ny nz] [colour] [s t]": ST (texture
// coordinates), C (a colour: 1, 3 or 4 values, as writers differ) and N
// (a normal) before "OFF", each at most once, in that order.
struct OffVertexLayout {
  bool texture = false, colour = false, normal = false;
  int64_t fixed_values() const { return 3 + (normal ? 3 : 0) + (texture ? 2 : 0); }
};

// The keyword's layout and the rest of the magic line (counts some ModelNet40
// files fuse onto it: "OFF490 518 0").
std::string_view read_off_keyword(const std::string& path, std::string_view line, OffVertexLayout& layout) {
  std::string_view rest = line;
  auto take = [&](std::string_view prefix) {
    if (!starts_with(rest, prefix)) return false;
    rest.remove_prefix(prefix.size());
    return true;
  };
  layout.texture = take("ST");
  layout.colour = take("C");
  layout.normal = take("N");
  if (take("4") || take("n"))
    fail(path, "4-D and n-D OFF vertices (" + show(line.substr(0, line.find_first_of(" \t"))) + ") are not read");
  if (!take("OFF"))
    fail(path, "bad magic: expected 'OFF' (or COFF, NOFF, STOFF...) on the first line, found " + show(line));
  rest = trim(rest);
  if (starts_with(rest, "BINARY")) fail(path, "binary OFF is not read (an ascii OFF is)");
  return rest;
}

Mesh parse_off(const std::string& path, std::string_view text) {
  Lines lines(text);
  std::string_view line;
  if (!lines.next_nonblank(line, true)) fail(path, "empty file (expected 'OFF')");
  OffVertexLayout layout;
  std::string_view counts_line = read_off_keyword(path, line, layout);
  if (counts_line.empty() && !lines.next_nonblank(counts_line, true))
    fail(path, "truncated: no counts line after 'OFF'");
  std::vector<std::string_view> tok;
  split(counts_line, tok);
  int64_t n_vertices = -1, n_faces = -1, n_edges = 0;
  if ((tok.size() != 2 && tok.size() != 3) || !parse_int(tok[0], n_vertices) || !parse_int(tok[1], n_faces) ||
      (tok.size() == 3 && !parse_int(tok[2], n_edges)) || n_vertices < 0 || n_faces < 0)
    fail_at(path, lines.line(), "bad counts line " + show(counts_line) + ": expected 'vertices faces edges'");
  if (n_vertices == 0) fail(path, "no vertices (empty cloud)");
  // Reserved for at most what the rest of the file can hold (the shortest
  // vertex line is "0 0 0\n", the shortest face "3 0 1 2\n"); a header
  // declaring more fails in the loops below, saying where the file ends.
  const auto available = static_cast<int64_t>(text.size() - lines.consumed());

  Mesh mesh;
  RelativePositions position(mesh);
  mesh.vertices.reserve(static_cast<size_t>(std::min(n_vertices, available / 6 + 1)));
  if (layout.normal) mesh.normals.reserve(mesh.vertices.capacity());
  for (int64_t i = 0; i < n_vertices; ++i) {
    if (!lines.next_nonblank(line, true))
      fail(path, "truncated: the header says " + std::to_string(n_vertices) + " vertices, the file ends after " +
                     std::to_string(i));
    split(line, tok);
    const auto values = static_cast<int64_t>(tok.size());
    const int64_t colour_values = values - layout.fixed_values();
    if (layout.colour ? colour_values != 1 && colour_values != 3 && colour_values != 4 : colour_values != 0)
      fail_at(path, lines.line(),
              "vertex has " + std::to_string(values) + " values, expected " + std::to_string(layout.fixed_values()) +
                  (layout.colour ? " and a colour of 1, 3 or 4" : "") + " (" +
                  (layout.normal ? "x y z nx ny nz" : "x y z") + (layout.colour ? " colour" : "") +
                  (layout.texture ? " s t" : "") + ")");
    const int64_t l = lines.line();
    mesh.vertices.push_back(position(path, l, tok[0], tok[1], tok[2]));
    if (layout.normal)
      mesh.normals.push_back({coordinate(path, l, tok[3]), coordinate(path, l, tok[4]), coordinate(path, l, tok[5])});
  }
  {
    // The triangles the face lines declare (k - 2 each, k no more than the
    // line lists), counted before any is stored.
    Lines ahead = lines;
    int64_t triangles = 0;
    for (int64_t f = 0; f < n_faces && ahead.next_nonblank(line, true); ++f) {
      Tokens t(line);
      std::string_view first;
      int64_t k = 0;
      if (t.next(first) && parse_int(first, k) && k >= 3) triangles += std::min(k, t.count_left()) - 2;
    }
    reserve_triangles(mesh, triangles);
  }
  for (int64_t f = 0; f < n_faces; ++f) {
    if (!lines.next_nonblank(line, true))
      fail(path, "truncated: the header says " + std::to_string(n_faces) + " faces, the file ends after " +
                     std::to_string(f));
    Tokens t(line);
    std::string_view item;
    t.next(item);
    int64_t k = 0;
    if (!parse_int(item, k))
      fail_at(path, lines.line(),
              "face vertex count " + show(item) + " is not an integer (wrong vertex count in the header?)");
    if (k < 3) fail_at(path, lines.line(), "face has " + std::to_string(k) + " vertices, need at least 3");
    FanBuilder polygon(mesh);
    for (int64_t j = 1; j <= k; ++j) {  // values after the k indices are a face colour: ignored
      if (!t.next(item))
        fail_at(path, lines.line(), "face says " + std::to_string(k) + " vertices but lists " + std::to_string(j - 1));
      int64_t index = 0;
      if (!parse_int(item, index)) fail_at(path, lines.line(), "face index " + show(item) + " is not an integer");
      if (index < 0 || index >= n_vertices)
        fail_at(
            path, lines.line(),
            "face index " + std::to_string(index) + " is out of range (" + std::to_string(n_vertices) + " vertices)");
      polygon.corner(index);
    }
  }
  if (lines.next_nonblank(line, true))
    fail_at(path, lines.line(),
            "wrong counts: data after the " + std::to_string(n_vertices) + " vertices and " + std::to_string(n_faces) +
                " faces the header declares");
  position.finish();
  return mesh;
}

// ---------------------------------------------------------------------------- PLY

enum class PlyType { Int8, UInt8, Int16, UInt16, Int32, UInt32, Float32, Float64 };

bool ply_type(std::string_view name, PlyType& out) {
  static const std::pair<std::string_view, PlyType> kTypes[] = {
      {"char", PlyType::Int8},      {"int8", PlyType::Int8},       {"uchar", PlyType::UInt8},
      {"uint8", PlyType::UInt8},    {"short", PlyType::Int16},     {"int16", PlyType::Int16},
      {"ushort", PlyType::UInt16},  {"uint16", PlyType::UInt16},   {"int", PlyType::Int32},
      {"int32", PlyType::Int32},    {"uint", PlyType::UInt32},     {"uint32", PlyType::UInt32},
      {"float", PlyType::Float32},  {"float32", PlyType::Float32}, {"double", PlyType::Float64},
      {"float64", PlyType::Float64}};
  for (const auto& [n, t] : kTypes)
    if (n == name) {
      out = t;
      return true;
    }
  return false;
}

size_t ply_size(PlyType t) {
  switch (t) {
    case PlyType::Int8:
    case PlyType::UInt8: return 1;
    case PlyType::Int16:
    case PlyType::UInt16: return 2;
    case PlyType::Int32:
    case PlyType::UInt32:
    case PlyType::Float32: return 4;
    case PlyType::Float64: return 8;
  }
  return 0;
}

bool ply_is_integer(PlyType t) { return t != PlyType::Float32 && t != PlyType::Float64; }

struct PlyProperty {
  std::string name;
  PlyType type = PlyType::Float32;  // of the items, for a list
  bool is_list = false;
  PlyType count_type = PlyType::UInt8;
};

struct PlyElement {
  std::string name;
  int64_t count = 0;
  std::vector<PlyProperty> properties;
};

// Thrown inside the binary decoder; turned into a message that says which element ran short.
struct PlyOutOfData {};

// A value of type T stored in `big_endian` or little-endian byte order,
// whatever the host's.
template <typename T>
T load_ordered(const char* p, bool big_endian) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  const uint16_t probe = 1;
  const bool host_big = *reinterpret_cast<const unsigned char*>(&probe) == 0;
  if (host_big != big_endian) std::reverse(b, b + sizeof(T));
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}

template <typename T>
double load(const char* p, bool big_endian) {
  return static_cast<double>(load_ordered<T>(p, big_endian));
}

double decode(PlyType t, const char*& p, const char* end, bool big_endian) {
  const size_t n = ply_size(t);
  if (static_cast<size_t>(end - p) < n) throw PlyOutOfData{};
  double v = 0;
  switch (t) {
    case PlyType::Int8: v = load<int8_t>(p, big_endian); break;
    case PlyType::UInt8: v = load<uint8_t>(p, big_endian); break;
    case PlyType::Int16: v = load<int16_t>(p, big_endian); break;
    case PlyType::UInt16: v = load<uint16_t>(p, big_endian); break;
    case PlyType::Int32: v = load<int32_t>(p, big_endian); break;
    case PlyType::UInt32: v = load<uint32_t>(p, big_endian); break;
    case PlyType::Float32: v = load<float>(p, big_endian); break;
    case PlyType::Float64: v = load<double>(p, big_endian); break;
  }
  p += n;
  return v;
}

// Where the vertex and face data we keep sit inside their elements.
struct PlyLayout {
  int x = -1, y = -1, z = -1, nx = -1, ny = -1, nz = -1, red = -1, green = -1, blue = -1;
  int face_list = -1;
  int strip_list = -1;                // the 'tristrips' element's vertex_indices (Stanford's older scans)
  int64_t strip_restart = -1;         // what ends a strip: -1, or the largest value of an unsigned index type
  std::vector<PlyType> vertex_types;  // of each vertex property, in order
  std::vector<int> extra;             // every other scalar vertex property: Mesh::vertex_properties, in order
  bool has_normals() const { return nx >= 0 && ny >= 0 && nz >= 0; }
  // The list property read of an element: a face's or a strip's vertex indices; -1 for any other element.
  int kept_list(const std::string& element) const {
    return element == "face" ? face_list : element == "tristrips" ? strip_list : -1;
  }
  bool has_colors() const { return red >= 0 && green >= 0 && blue >= 0; }
};

// Receives one element item's values as doubles (list values flattened after their count).
class PlySink {
 public:
  PlySink(const std::string& path, const PlyLayout& layout, Mesh& mesh)
      : path_(path), layout_(layout), mesh_(mesh), position_(mesh) {}

  void vertex(const std::vector<double>& v, int64_t line) {
    const auto index = mesh_.vertices.size();  // 0-based, as PLY counts its elements
    auto finite = [&](int i, const char* what) {
      const auto f = static_cast<float>(v[static_cast<size_t>(i)]);
      if (!std::isfinite(f)) {
        const std::string message =
            "vertex " + std::to_string(index) + " has a " + what + " that " + not_a_float(v[static_cast<size_t>(i)]);
        if (line > 0) fail_at(path_, line, message);
        fail(path_, message);
      }
      return f;
    };
    for (const int i : {layout_.x, layout_.y, layout_.z}) finite(i, "coordinate");
    mesh_.vertices.push_back(position_(v[static_cast<size_t>(layout_.x)], v[static_cast<size_t>(layout_.y)],
                                       v[static_cast<size_t>(layout_.z)]));
    if (layout_.has_normals())
      mesh_.normals.push_back(
          {finite(layout_.nx, "normal"), finite(layout_.ny, "normal"), finite(layout_.nz, "normal")});
    if (layout_.has_colors()) {
      const std::array<int, 3> channels{layout_.red, layout_.green, layout_.blue};
      std::array<double, 3> rgb{};
      for (size_t c = 0; c < 3; ++c) {
        rgb[c] = v[static_cast<size_t>(channels[c])];
        if (rgb[c] > colour_high_[c]) colour_high_[c] = rgb[c];
      }
      colours_.push_back(rgb);
    }
    for (size_t k = 0; k < layout_.extra.size(); ++k)
      mesh_.vertex_properties[k].values.push_back(v[static_cast<size_t>(layout_.extra[k])]);
  }

  void face(const std::vector<int64_t>& polygon, int64_t line) {
    if (polygon.size() < 3) {
      const std::string what = "face " + std::to_string(faces_seen_) + " has " + std::to_string(polygon.size()) +
                               " vertices, need at least 3";
      if (line > 0) fail_at(path_, line, what);
      fail(path_, what);
    }
    ++faces_seen_;
    // A polygon's triangles are known before they are made: room for them at
    // once, so that one face of millions of corners does not grow the vector
    // by doubling (geometric growth is kept for many small faces).
    const size_t need = mesh_.faces.size() + polygon.size() - 2;
    if (need > mesh_.faces.capacity()) mesh_.faces.reserve(std::max(need, 2 * mesh_.faces.capacity()));
    fan(mesh_, polygon);
  }

  // The vertex indices of one item of the element layout_.kept_list names.
  void indices(const std::string& element, const std::vector<int64_t>& list, int64_t line) {
    if (element == "face")
      face(list, line);
    else
      strips(list);
  }

  // Triangle strips, layout_.strip_restart (-1) between strips: each run of three is a triangle,
  // every other one flipped so that all face the same way; the degenerate
  // ones that stitch strips together (a repeated index) are left out.
  void strips(const std::vector<int64_t>& indices) {
    size_t begin = 0;
    while (begin < indices.size()) {
      size_t end = begin;
      while (end < indices.size() && indices[end] != layout_.strip_restart) ++end;
      for (size_t i = begin; i + 2 < end; ++i) {
        int64_t a = indices[i], b = indices[i + 1];
        const int64_t c = indices[i + 2];
        if ((i - begin) % 2 == 1) std::swap(a, b);
        if (a != b && b != c && a != c) mesh_.faces.push_back({a, b, c});
      }
      begin = end + 1;
    }
  }

  // Once every vertex is read: positions relative to their origin, and the
  // colours as bytes. A colour's range is told by its type and its largest
  // value, as writers differ: bytes as they are; floats in 0..1 (Open3D)
  // times 255, floats above 1 taken as 0..255; 16 or 32 bits within 0..255
  // taken as bytes, else scaled from 0..65535 (or 0..2^32-1) to 0..255.
  void finish() {
    position_.finish();
    if (colours_.empty()) return;
    const std::array<int, 3> channels{layout_.red, layout_.green, layout_.blue};
    std::array<double, 3> scale{};
    for (size_t c = 0; c < 3; ++c) {
      const PlyType type = layout_.vertex_types[static_cast<size_t>(channels[c])];
      const double high = colour_high_[c];
      scale[c] = !ply_is_integer(type) ? (high <= 1.0 ? 255.0 : 1.0)
                 : high <= 255.0       ? 1.0
                 : high <= 65535.0     ? 255.0 / 65535.0
                                       : 255.0 / 4294967295.0;
    }
    mesh_.colors.reserve(colours_.size());
    for (const auto& rgb : colours_) {
      std::array<uint8_t, 3> bytes{};
      for (size_t c = 0; c < 3; ++c) {
        const double value = rgb[c] * scale[c];
        bytes[c] = value >= 0.0 ? static_cast<uint8_t>(std::lround(std::min(value, 255.0))) : uint8_t{0};  // NaN too
      }
      mesh_.colors.push_back(bytes);
    }
    std::vector<std::array<double, 3>>().swap(colours_);
  }

 private:
  const std::string& path_;
  const PlyLayout& layout_;
  Mesh& mesh_;
  RelativePositions position_;
  std::vector<std::array<double, 3>> colours_;  // as read, until finish() knows their range
  std::array<double, 3> colour_high_{0, 0, 0};
  int64_t faces_seen_ = 0;
};

Mesh parse_ply(const std::string& path, const std::string& text) {
  // The header is text up to and including the "end_header" line.
  Lines lines(text);
  std::string_view line;
  if (!lines.next_nonblank(line, false) || line != "ply")
    fail(path, "bad magic: expected 'ply' on the first line, found " + show(text.substr(0, text.find('\n'))));
  std::string format;
  std::vector<PlyElement> elements;
  std::vector<std::string_view> tok;
  bool ended = false;
  while (lines.next_nonblank(line, false)) {
    split(line, tok);
    const auto key = tok[0];
    if (key == "end_header") {
      ended = true;
      break;
    }
    if (key == "comment" || key == "obj_info") continue;
    if (key == "format") {
      if (tok.size() != 3) fail_at(path, lines.line(), "bad format line " + show(line));
      format = std::string(tok[1]);
      if (format != "ascii" && format != "binary_little_endian" && format != "binary_big_endian")
        fail_at(path, lines.line(), "unknown PLY format " + show(tok[1]));
    } else if (key == "element") {
      PlyElement e;
      if (tok.size() != 3 || !parse_int(tok[2], e.count) || e.count < 0)
        fail_at(path, lines.line(), "bad element line " + show(line));
      e.name = std::string(tok[1]);
      // The layout of what we keep is found per element name: a second
      // 'vertex' or 'face' would be read with the first one's property
      // indices (found by fuzzing: a read past the item's values).
      for (const auto& seen : elements)
        if (seen.name == e.name && (e.name == "vertex" || e.name == "face" || e.name == "tristrips"))
          fail_at(path, lines.line(), "element '" + e.name + "' declared twice");
      elements.push_back(std::move(e));
    } else if (key == "property") {
      if (elements.empty()) fail_at(path, lines.line(), "property before any element");
      PlyProperty p;
      if (tok.size() == 5 && tok[1] == "list") {
        p.is_list = true;
        if (!ply_type(tok[2], p.count_type) || !ply_type(tok[3], p.type) || !ply_is_integer(p.count_type))
          fail_at(path, lines.line(), "bad list property " + show(line));
        p.name = std::string(tok[4]);
      } else if (tok.size() == 3) {
        if (!ply_type(tok[1], p.type)) fail_at(path, lines.line(), "unknown property type " + show(tok[1]));
        p.name = std::string(tok[2]);
      } else {
        fail_at(path, lines.line(), "bad property line " + show(line));
      }
      // Our choice: a name means one property (the last of two x's was read, silently).
      for (const auto& seen : elements.back().properties)
        if (seen.name == p.name)
          fail_at(path, lines.line(),
                  "property '" + p.name + "' of element '" + elements.back().name + "' declared twice");
      elements.back().properties.push_back(std::move(p));
    } else {
      fail_at(path, lines.line(), "unknown header line " + show(line));
    }
  }
  if (!ended) fail(path, "truncated header: no 'end_header' line");
  if (format.empty()) fail(path, "the header has no 'format' line");
  const int64_t header_lines = lines.line();
  const size_t header_end = lines.consumed();

  // Locate what we keep.
  PlyLayout layout;
  const PlyElement* vertex_element = nullptr;
  for (const auto& e : elements) {
    if (e.name == "vertex") {
      vertex_element = &e;
      for (size_t i = 0; i < e.properties.size(); ++i) {
        const auto& p = e.properties[i];
        if (p.is_list) continue;
        int* slot = p.name == "x"   ? &layout.x
                    : p.name == "y" ? &layout.y
                    : p.name == "z" ? &layout.z
                    // normal_x ...: PCL's PLY writer's names, as its PCD files have them
                    : p.name == "nx" || p.name == "normal_x" ? &layout.nx
                    : p.name == "ny" || p.name == "normal_y" ? &layout.ny
                    : p.name == "nz" || p.name == "normal_z" ? &layout.nz
                    : p.name == "red"                        ? &layout.red
                    : p.name == "green"                      ? &layout.green
                    : p.name == "blue"                       ? &layout.blue
                                                             : nullptr;
        if (slot && *slot < 0)
          *slot = static_cast<int>(i);
        else  // a second property of one name (nx and normal_x) is kept as it is
          layout.extra.push_back(static_cast<int>(i));
      }
    } else if (e.name == "face" || e.name == "tristrips") {
      // The element's list of vertex indices (vertex_indices, or vertex_index as some writers name it).
      int list = -1;
      for (size_t i = 0; i < e.properties.size(); ++i) {
        const auto& p = e.properties[i];
        if (p.is_list && (p.name == "vertex_indices" || p.name == "vertex_index")) {
          if (!ply_is_integer(p.type)) fail(path, e.name + " property '" + p.name + "' must hold integers");
          list = static_cast<int>(i);
        }
      }
      if (list < 0 && e.count > 0) fail(path, e.name + " element has no 'vertex_indices' list property");
      if (e.name == "face") {
        layout.face_list = list;
      } else if (list >= 0) {
        layout.strip_list = list;
        // -1 stored in an unsigned type is its largest value.
        const PlyType type = e.properties[static_cast<size_t>(list)].type;
        layout.strip_restart = type == PlyType::UInt8    ? 0xff
                               : type == PlyType::UInt16 ? 0xffff
                               : type == PlyType::UInt32 ? 0xffffffffLL
                                                         : -1;
      }
    }
  }
  if (!vertex_element) fail(path, "no 'vertex' element in the header");
  if (layout.x < 0 || layout.y < 0 || layout.z < 0) fail(path, "the vertex element lacks an x, y or z property");
  for (const auto& property : vertex_element->properties) layout.vertex_types.push_back(property.type);
  if (vertex_element->count == 0) fail(path, "no vertices (empty cloud)");
  // Every declared item must fit in what follows the header before any of
  // them is reserved: an ascii item takes at least a digit and a separator
  // per property, a binary one the bytes of its fixed properties and list counts.
  {
    const auto available = static_cast<int64_t>(text.size() - header_end);
    int64_t total = 0;
    for (const auto& e : elements) {
      int64_t min_item = 0;
      if (format == "ascii") {
        min_item = 2 * std::max<int64_t>(1, static_cast<int64_t>(e.properties.size()));
      } else {
        for (const auto& prop : e.properties)
          min_item += static_cast<int64_t>(ply_size(prop.is_list ? prop.count_type : prop.type));
      }
      // Items without properties take no bytes: their count alone would set
      // how long reading loops (2^63 items: forever).
      if (e.properties.empty() && e.count > 0)
        fail(path, "element '" + e.name + "' declares " + std::to_string(e.count) + " items but no properties");
      int64_t bytes = 0;
      if (!checked_mul(e.count, min_item, bytes) || !checked_add(total, bytes, total) || total - 1 > available)
        fail(path, "truncated: the header declares " + std::to_string(e.count) + " '" + e.name +
                       "' items, more than the " + std::to_string(available) + " bytes after it can hold");
    }
  }

  Mesh mesh;
  mesh.vertices.reserve(static_cast<size_t>(vertex_element->count));
  for (const int i : layout.extra) {
    const auto& p = vertex_element->properties[static_cast<size_t>(i)];
    mesh.vertex_properties.push_back({p.name, ply_is_integer(p.type), {}});
    mesh.vertex_properties.back().values.reserve(static_cast<size_t>(vertex_element->count));
  }
  PlySink sink(path, layout, mesh);
  std::vector<double> values;
  std::vector<int64_t> polygon;

  if (format == "ascii") {
    Lines body(std::string_view(text).substr(header_end), header_lines + 1);
    for (const auto& e : elements) {
      const bool is_vertex = &e == vertex_element;
      const int kept = layout.kept_list(e.name);
      for (int64_t item = 0; item < e.count; ++item) {
        if (!body.next_nonblank(line, false))
          fail(path, "truncated: element '" + e.name + "' should have " + std::to_string(e.count) +
                         " items, the file ends after " + std::to_string(item));
        split(line, tok);
        size_t t = 0;
        values.clear();
        polygon.clear();
        auto next_token = [&] {
          if (t >= tok.size())
            fail_at(path, body.line(), "too few values for element '" + e.name + "' (wrong counts in the header?)");
          return tok[t++];
        };
        // Integers stay int64: a round trip through double is undefined
        // behaviour for values near INT64_MAX.
        auto next_int = [&] {
          const auto s = next_token();
          int64_t i = 0;
          if (!parse_int(s, i)) fail_at(path, body.line(), "expected an integer, found " + show(s));
          return i;
        };
        auto next_value = [&](bool integer) {
          if (integer) return static_cast<double>(next_int());
          const auto s = next_token();
          double d = 0;
          if (!parse_decimal(s, d)) fail_at(path, body.line(), "non-numeric value " + show(s));
          return d;
        };
        for (size_t pi = 0; pi < e.properties.size(); ++pi) {
          const auto& p = e.properties[pi];
          if (!p.is_list) {
            values.push_back(next_value(ply_is_integer(p.type)));
            continue;
          }
          const int64_t n = next_int();
          if (n < 0) fail_at(path, body.line(), "negative list length");
          const bool keep = static_cast<int>(pi) == kept;
          values.push_back(0);
          for (int64_t j = 0; j < n; ++j) {
            if (keep)
              polygon.push_back(next_int());  // face lists hold integers (checked with the header)
            else
              next_value(ply_is_integer(p.type));
          }
        }
        if (t != tok.size())
          fail_at(path, body.line(),
                  "element '" + e.name + "' has " + std::to_string(tok.size()) +
                      " values, more than the header declares (wrong counts?)");
        if (is_vertex) sink.vertex(values, body.line());
        if (kept >= 0) sink.indices(e.name, polygon, body.line());
      }
    }
    if (body.next_nonblank(line, false))
      fail_at(path, body.line(), "wrong counts: data after the last element the header declares");
  } else {
    const bool big_endian = format == "binary_big_endian";
    const char* p = text.data() + header_end;
    const char* end = text.data() + text.size();
    for (const auto& e : elements) {
      const bool is_vertex = &e == vertex_element;
      const int kept = layout.kept_list(e.name);
      bool fixed = true;
      size_t row = 0;
      for (const auto& prop : e.properties) {
        fixed = fixed && !prop.is_list;
        row += ply_size(prop.type);
      }
      int64_t item = 0;
      try {
        if (!is_vertex && kept < 0 && fixed) {
          // Skipped by size, without decoding; the product was checked above.
          const auto need = static_cast<size_t>(e.count) * row;
          if (static_cast<size_t>(end - p) < need) {
            item = row ? static_cast<int64_t>(static_cast<size_t>(end - p) / row) : 0;
            throw PlyOutOfData{};
          }
          p += need;
          continue;
        }
        for (; item < e.count; ++item) {
          values.clear();
          polygon.clear();
          for (size_t pi = 0; pi < e.properties.size(); ++pi) {
            const auto& prop = e.properties[pi];
            if (!prop.is_list) {
              values.push_back(decode(prop.type, p, end, big_endian));
              continue;
            }
            const auto n = static_cast<int64_t>(decode(prop.count_type, p, end, big_endian));
            if (n < 0) fail(path, "negative list length in element '" + e.name + "' item " + std::to_string(item));
            const bool keep = static_cast<int>(pi) == kept;
            values.push_back(0);
            if (!keep) {
              const size_t skip = static_cast<size_t>(n) * ply_size(prop.type);
              if (static_cast<size_t>(end - p) < skip) throw PlyOutOfData{};
              p += skip;
              continue;
            }
            for (int64_t j = 0; j < n; ++j)
              polygon.push_back(static_cast<int64_t>(decode(prop.type, p, end, big_endian)));
          }
          if (is_vertex) sink.vertex(values, 0);
          if (kept >= 0) sink.indices(e.name, polygon, 0);
        }
      } catch (const PlyOutOfData&) {
        fail(path, "truncated: element '" + e.name + "' should have " + std::to_string(e.count) +
                       " items, the data ends after " + std::to_string(item));
      }
    }
    if (p != end)
      fail(path, "wrong counts: " + std::to_string(end - p) + " bytes after the last element the header declares");
  }
  check_face_indices(path, mesh);
  sink.finish();
  return mesh;
}

// ---------------------------------------------------------------------------- point text

// Which columns of a point text file hold what: x y z, and the normal's
// nx ny nz when there (-1 when not).
struct PointColumns {
  std::array<int64_t, 3> position{-1, -1, -1};
  std::array<int64_t, 3> normal{-1, -1, -1};
  int64_t count = 0;  // columns every line has
};

// A header line names the columns, as CloudCompare, Open3D and spreadsheets
// write them ("x,y,z,intensity", "//X Y Z Nx Ny Nz", "\"x\",\"y\",\"z\""):
// x, y and z are found by name, case aside, and the normal's nx ny nz (or
// normal_x normal_y normal_z) when all three are there; other columns are
// skipped. Our choice: a name means one column, so a repeated one is refused.
PointColumns header_columns(const std::string& path, int64_t line, std::string_view header,
                            const std::vector<std::string_view>& names) {
  PointColumns columns;
  columns.count = static_cast<int64_t>(names.size());
  auto assign = [&](std::array<int64_t, 3>& slot, int axis, int64_t column, std::string_view name) {
    if (slot[axis] >= 0) fail_at(path, line, "header names column " + show(name) + " twice");
    slot[axis] = column;
  };
  for (int64_t c = 0; c < columns.count; ++c) {
    std::string_view raw = names[c];
    if (raw.substr(0, 2) == "//") raw.remove_prefix(2);
    if (raw.size() >= 2 && (raw.front() == '"' || raw.front() == '\'') && raw.back() == raw.front())
      raw = raw.substr(1, raw.size() - 2);
    const std::string name = lower(raw);
    for (int axis = 0; axis < 3; ++axis) {
      const std::string letter(1, static_cast<char>('x' + axis));
      if (name == letter) assign(columns.position, axis, c, names[c]);
      if (name == "n" + letter || name == "normal_" + letter) assign(columns.normal, axis, c, names[c]);
    }
  }
  std::vector<std::string> missing;
  for (int axis = 0; axis < 3; ++axis)
    if (columns.position[axis] < 0) missing.emplace_back(1, static_cast<char>('x' + axis));
  if (!missing.empty())
    fail_at(path, line, "the header line " + show(header) + " names no " + join_alternatives(missing) + " column");
  const auto normals = std::count(columns.normal.begin(), columns.normal.end(), -1);
  if (normals != 0 && normals != 3) fail_at(path, line, "the header names some of nx, ny, nz but not all three");
  return columns;
}

// A decimal comma: one comma between digits, no point ("1,5"). A line whose
// blank-separated fields are all such numbers is a European spreadsheet's
// export with tabs or spaces between fields; split on its commas too, three
// coordinates became six columns, read as x y z and a colour, silently.
bool has_decimal_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  split(line, fields, false);
  auto decimal_comma = [](std::string_view f) {
    const auto comma = f.find(',');
    return comma != std::string_view::npos && f.find(',', comma + 1) == std::string_view::npos &&
           f.find('.') == std::string_view::npos && comma > 0 && comma + 1 < f.size() &&
           std::isdigit(static_cast<unsigned char>(f[comma - 1])) &&
           std::isdigit(static_cast<unsigned char>(f[comma + 1]));
  };
  return fields.size() >= 2 && std::all_of(fields.begin(), fields.end(), decimal_comma);
}

Mesh parse_point_text(const std::string& path, std::string_view text, int64_t max_points) {
  Lines lines(text);
  std::string_view line;
  std::vector<std::string_view> tok;
  Mesh mesh;
  RelativePositions position(mesh);
  PointColumns columns;
  int64_t first_line = 0;
  bool from_header = false, unit_normals = true;
  while ((max_points <= 0 || static_cast<int64_t>(mesh.vertices.size()) < max_points) &&
         lines.next_nonblank(line, false)) {
    if (line[0] == '#') continue;
    if (mesh.vertices.empty() && has_decimal_commas(line))  // the first data line, after a header or not
      fail_at(path, lines.line(),
              "the numbers have decimal commas (" + show(line.substr(0, 40)) +
                  "): save the file with decimal points, and commas or blanks between values");
    split(line, tok, true);
    if (columns.count == 0) {
      first_line = lines.line();
      // A European spreadsheet's CSV: ';' between fields, ',' in numbers.
      if (line.find(';') != std::string_view::npos)
        fail_at(path, first_line,
                "';' separates nothing here: save the file with commas or blanks between values and decimal points");
      double ignored = 0;
      // A header holds no number: a data line with a typo ("1 2 3a") is
      // named as a bad value, not taken for column names.
      from_header = std::none_of(tok.begin(), tok.end(), [&](std::string_view t) { return parse_decimal(t, ignored); });
      if (from_header) {
        columns = header_columns(path, first_line, line, tok);
        continue;
      }
      if (tok.size() != 3 && tok.size() != 6)
        fail_at(path, lines.line(),
                std::to_string(tok.size()) +
                    " columns, expected 3 (x y z) or 6 (x y z nx ny nz), or a header line naming them");
      columns.count = static_cast<int64_t>(tok.size());
      columns.position = {0, 1, 2};
      if (columns.count == 6) columns.normal = {3, 4, 5};
    } else if (static_cast<int64_t>(tok.size()) != columns.count) {
      fail_at(path, lines.line(),
              std::to_string(tok.size()) + " columns, but " + (from_header ? "the header on line " : "line ") +
                  std::to_string(first_line) + " has " + std::to_string(columns.count));
    }
    const int64_t l = lines.line();
    auto value = [&](int64_t column) { return coordinate(path, l, tok[static_cast<size_t>(column)]); };
    const auto& p = columns.position;
    mesh.vertices.push_back(position(path, l, tok[static_cast<size_t>(p[0])], tok[static_cast<size_t>(p[1])],
                                     tok[static_cast<size_t>(p[2])]));
    if (const auto& n = columns.normal; n[0] >= 0) {
      const Vec3 normal{value(n[0]), value(n[1]), value(n[2])};
      unit_normals = unit_normals && is_unit_or_zero_normal(normal[0], normal[1], normal[2]);
      mesh.normals.push_back(normal);
    }
  }
  if (mesh.vertices.empty()) fail(path, "no points (empty cloud)");
  // Six columns without a header are x y z nx ny nz when every row's last
  // three are a unit vector (length within 5 %, or the zeros of a point
  // without one); otherwise they are a colour ("x y z r g b", as CloudCompare
  // and most scanners write it, in 0..255 or Open3D's 0..1) and skipped. Our
  // choice, so that a colour is never a normal. A header line says which.
  if (!from_header && !unit_normals) std::vector<Vec3>().swap(mesh.normals);
  position.finish();
  return mesh;
}

// ---------------------------------------------------------------------------- OBJ

// Wavefront OBJ: "v x y z [w | r g b]" vertices, "f" faces of any number of
// corners "i", "i/t", "i//n" or "i/t/n", 1-based, negative = counted back
// from the last vertex so far. Texture coordinates, normals (per corner, not
// per vertex), groups, materials, lines and free-form statements carry no
// geometry qkv samples and are skipped.
Mesh parse_obj(const std::string& path, std::string_view text) {
  Lines lines(text);
  std::string_view line;
  std::vector<std::string_view> tok;
  Mesh mesh;
  RelativePositions position(mesh);
  {
    // The triangles the "f" lines make (corners - 2 each), counted before any is stored.
    Lines ahead = lines;
    int64_t triangles = 0;
    while (ahead.next_nonblank(line, true)) {
      Tokens t(line);
      std::string_view key;
      if (t.next(key) && key == "f") triangles += std::max<int64_t>(t.count_left() - 2, 0);
    }
    reserve_triangles(mesh, triangles);
  }
  // The largest forward reference, as the file writes it, and its line:
  // checked once every vertex is known.
  int64_t largest_index = 0, largest_line = 0;
  while (lines.next_nonblank(line, true)) {
    const int64_t l = lines.line();
    Tokens t(line);
    std::string_view statement;
    t.next(statement);
    if (statement == "f") {  // streamed: a face may have millions of corners
      FanBuilder polygon(mesh);
      std::string_view item;
      while (t.next(item)) {
        const auto corner = item.substr(0, item.find('/'));
        int64_t i = 0;
        if (!parse_int(corner, i) || i == 0) fail_at(path, l, "bad vertex index " + show(item));
        const auto defined = static_cast<int64_t>(mesh.vertices.size());
        if (i < 0) {
          if (-i > defined)
            fail_at(path, l,
                    "relative index " + std::to_string(i) + " reaches before the first vertex (" +
                        std::to_string(defined) + " so far)");
          i = defined + i;
        } else {
          if (i > largest_index) largest_index = i, largest_line = l;
          i -= 1;  // forward references are checked at the end
        }
        polygon.corner(i);
      }
      if (polygon.corners() < 3)
        fail_at(path, l, "a face has " + std::to_string(polygon.corners()) + " corners, need at least 3");
      continue;
    }
    if (statement == "v") {
      split(line, tok);
      if (tok.size() != 4 && tok.size() != 5 && tok.size() != 7 && tok.size() != 8)
        fail_at(path, l,
                "a vertex has " + std::to_string(tok.size() - 1) + " values, expected x y z, x y z w or x y z r g b");
      mesh.vertices.push_back(position(path, l, tok[1], tok[2], tok[3]));
    } else if (statement.size() > 16 || !std::all_of(statement.begin(), statement.end(), [](char c) {
                 return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
               })) {
      fail_at(path, l, "not an OBJ statement: " + show(line));
    }
  }
  if (mesh.vertices.empty()) fail(path, "no vertices ('v' lines)");
  if (largest_index > static_cast<int64_t>(mesh.vertices.size()))
    fail_at(path, largest_line,
            "vertex index " + std::to_string(largest_index) + " is out of range (" +
                std::to_string(mesh.vertices.size()) + " vertices)");
  position.finish();
  return mesh;
}

// ---------------------------------------------------------------------------- STL

// Binary STL is an 80-byte header, a uint32 triangle count and 50 bytes per
// triangle (a normal, three corners as float32 little endian, a uint16); a
// file whose size is exactly that is binary (some begin with "solid" too),
// one that starts with "solid" is ASCII. Corners are not shared in STL:
// each triangle gets its own three vertices.
Mesh parse_stl(const std::string& path, const std::string& text) {
  Mesh mesh;
  RelativePositions position(mesh);  // ASCII: binary STL holds float32 already, as its file does
  if (text.size() >= 84) {
    const auto count = static_cast<int64_t>(load_ordered<uint32_t>(text.data() + 80, false));
    int64_t bytes = 0;
    if (checked_mul(count, int64_t{50}, bytes) && checked_add(bytes, int64_t{84}, bytes) &&
        bytes == static_cast<int64_t>(text.size())) {
      if (count == 0) fail(path, "binary STL with no triangles");
      mesh.vertices.reserve(static_cast<size_t>(count) * 3);
      for (int64_t t = 0; t < count; ++t) {
        const char* p = text.data() + 84 + t * 50 + 12;  // past the facet normal
        for (int64_t c = 0; c < 3; ++c) {
          Vec3 v;
          for (int k = 0; k < 3; ++k) {
            v[static_cast<size_t>(k)] = load_ordered<float>(p + 4 * (3 * c + k), false);
            if (!std::isfinite(v[static_cast<size_t>(k)]))
              fail(path, "triangle " + std::to_string(t) + " has a coordinate that is not finite");
          }
          mesh.vertices.push_back(v);
        }
        mesh.faces.push_back({3 * t, 3 * t + 1, 3 * t + 2});
      }
      return mesh;
    }
  }
  // What a binary STL of the count its header gives would be: a binary file
  // whose 80-byte header starts "solid" (some exporters write that) and whose
  // size is off is named as such, not as an ASCII one without facets.
  auto not_binary = [&] {
    if (text.size() < 84) return std::string("binary STL: shorter than its 84-byte header");
    // Text after the header is an ASCII file's: its "count" would be letters.
    const auto after = std::string_view(text).substr(80, 1024);
    if (std::none_of(after.begin(), after.end(), [](char c) {
          const auto b = static_cast<unsigned char>(c);
          return b < 0x09 || (b > 0x0d && b < 0x20);
        }))
      return std::string("binary STL (the file is text)");
    const auto count = static_cast<int64_t>(load_ordered<uint32_t>(text.data() + 80, false));
    return "binary STL: 84 + 50 x " + std::to_string(count) + " triangles = " + std::to_string(84 + 50 * count) +
           " bytes, the file has " + std::to_string(text.size());
  };
  // Keywords in any case: older CAD tools write "SOLID", "FACET NORMAL".
  if (lower(without_byte_order_mark(text).substr(0, 5)) != "solid")
    fail(path, "neither ASCII STL (starting 'solid') nor " + not_binary());
  Lines lines(text);
  std::string_view line;
  std::vector<std::string_view> tok;
  std::vector<int64_t> polygon;
  bool in_loop = false;
  while (lines.next_nonblank(line, false)) {
    split(line, tok);
    const std::string key = lower(tok[0]);
    const int64_t l = lines.line();
    if (key == "vertex") {
      if (!in_loop) fail_at(path, l, "'vertex' outside an 'outer loop'");
      if (tok.size() != 4) fail_at(path, l, "a vertex needs x y z, found " + show(line));
      polygon.push_back(static_cast<int64_t>(mesh.vertices.size()));
      mesh.vertices.push_back(position(path, l, tok[1], tok[2], tok[3]));
    } else if (key == "outer") {
      if (in_loop) fail_at(path, l, "'outer loop' inside another");
      in_loop = true;
      polygon.clear();
    } else if (key == "endloop") {
      if (!in_loop) fail_at(path, l, "'endloop' without 'outer loop'");
      if (polygon.size() < 3) fail_at(path, l, "a facet has " + std::to_string(polygon.size()) + " vertices, need 3");
      fan(mesh, polygon);
      in_loop = false;
    } else if (key != "solid" && key != "facet" && key != "endfacet" && key != "endsolid") {
      fail_at(path, l, "not an ASCII STL line: " + show(line));
    }
  }
  if (in_loop) fail(path, "truncated: the last facet has no 'endloop'");
  if (mesh.faces.empty()) fail(path, "neither ASCII STL (no facets) nor " + not_binary());
  position.finish();
  return mesh;
}

// ---------------------------------------------------------------------------- PCD

// Point Cloud Library's PCD, DATA ascii or binary (binary_compressed is
// refused, naming it): the fields x, y, z and, when all three are there,
// normal_x, normal_y, normal_z; every other field is skipped. Points whose
// x, y or z is NaN (how an organized cloud marks a pixel without a point)
// are dropped, as PCL's removeNaNFromPointCloud does; a NaN normal (PCL's
// normal estimation gives one to a point with too few neighbours) is read as
// the zeros of a point without one (our choice: the point is kept); an
// infinite value is an error.
Mesh parse_pcd(const std::string& path, const std::string& text) {
  struct Field {
    std::string name;
    int64_t size = 4, count = 1;
    char type = 'F';
    int64_t offset = 0;  // bytes into a binary point; value index into an ascii line
  };
  std::vector<Field> fields;
  std::vector<std::string_view> tok;
  int64_t points = -1, width = -1, height = 1;
  std::string data;
  Lines lines(text);
  std::string_view line;
  auto count_of = [&](std::string_view t, int64_t l, const char* what) {
    int64_t v = 0;
    if (!parse_int(t, v) || v < 0) fail_at(path, l, std::string("bad ") + what + " " + show(t));
    return v;
  };
  while (data.empty() && lines.next_nonblank(line, true)) {
    split(line, tok);
    const auto key = tok[0];
    const int64_t l = lines.line();
    auto per_field = [&](auto&& set) {
      if (tok.size() - 1 != fields.size())
        fail_at(path, l,
                std::string(key) + " lists " + std::to_string(tok.size() - 1) + " values for " +
                    std::to_string(fields.size()) + " fields");
      for (size_t i = 0; i < fields.size(); ++i) set(fields[i], tok[i + 1]);
    };
    if (key == "VERSION" || key == "VIEWPOINT") continue;
    if (key == "FIELDS" || key == "COLUMNS") {
      fields.clear();
      for (size_t i = 1; i < tok.size(); ++i) fields.push_back({std::string(tok[i])});
    } else if (key == "SIZE") {
      per_field([&](Field& f, std::string_view t) {
        f.size = count_of(t, l, "SIZE");
        if (f.size != 1 && f.size != 2 && f.size != 4 && f.size != 8)
          fail_at(path, l, "SIZE " + show(t) + ": 1, 2, 4 or 8");
      });
    } else if (key == "TYPE") {
      per_field([&](Field& f, std::string_view t) {
        if (t != "F" && t != "I" && t != "U") fail_at(path, l, "TYPE " + show(t) + ": F, I or U");
        f.type = t[0];
      });
    } else if (key == "COUNT") {
      per_field([&](Field& f, std::string_view t) {
        f.count = count_of(t, l, "COUNT");
        if (f.count < 1 || f.count > 1 << 20) fail_at(path, l, "COUNT " + show(t) + " out of range");
      });
    } else if (key == "WIDTH" && tok.size() == 2) {
      width = count_of(tok[1], l, "WIDTH");
    } else if (key == "HEIGHT" && tok.size() == 2) {
      height = count_of(tok[1], l, "HEIGHT");
    } else if (key == "POINTS" && tok.size() == 2) {
      points = count_of(tok[1], l, "POINTS");
    } else if (key == "DATA" && tok.size() == 2) {
      data = std::string(tok[1]);
      if (data == "binary_compressed")
        fail_at(path, l, "DATA binary_compressed (LZF) is not read; save the cloud as binary or ascii");
      if (data != "ascii" && data != "binary") fail_at(path, l, "unknown DATA " + show(tok[1]));
    } else {
      fail_at(path, l, "not a PCD header line: " + show(line));
    }
  }
  if (data.empty()) fail(path, "no DATA line: not a PCD file, or a truncated header");
  if (points < 0) {
    if (width < 0) fail(path, "the header gives neither POINTS nor WIDTH");
    if (!checked_mul(width, height, points)) fail(path, "WIDTH x HEIGHT overflows");
  } else if (int64_t cells = 0; width >= 0 && (!checked_mul(width, height, cells) || cells != points)) {
    // PCL's own reader refuses it too: which count is the cloud's?
    fail(path, "wrong counts: WIDTH " + std::to_string(width) + " x HEIGHT " + std::to_string(height) +
                   " is not POINTS " + std::to_string(points));
  }
  int x = -1, y = -1, z = -1, nx = -1, ny = -1, nz = -1, rgb = -1;
  std::vector<int> scalars;  // the other fields of COUNT 1: Mesh::vertex_properties, in order
  int64_t point_bytes = 0, values = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    auto& f = fields[i];
    f.offset = data == "binary" ? point_bytes : values;
    int64_t bytes = 0;
    if (!checked_mul(f.size, f.count, bytes) || !checked_add(point_bytes, bytes, point_bytes) ||
        !checked_add(values, f.count, values))
      fail(path, "the fields' sizes overflow");
    if (f.count != 1) continue;
    int* slot = f.name == "x"                                                                      ? &x
                : f.name == "y"                                                                    ? &y
                : f.name == "z"                                                                    ? &z
                : f.name == "normal_x"                                                             ? &nx
                : f.name == "normal_y"                                                             ? &ny
                : f.name == "normal_z"                                                             ? &nz
                : (f.name == "rgb" || f.name == "rgba") && f.size == 4 && f.type != 'I' && rgb < 0 ? &rgb
                                                                                                   : nullptr;
    const bool readable = f.type != 'F' || f.size == 4 || f.size == 8;  // an F of SIZE 1 or 2 has no C type
    if (slot && (slot == &rgb || readable || data == "ascii")) {
      if (*slot < 0) *slot = static_cast<int>(i);
    } else if (slot) {
      fail(path, "field '" + f.name + "' is F of SIZE " + std::to_string(f.size));
    } else if (readable) {
      scalars.push_back(static_cast<int>(i));
    }
  }
  if (x < 0 || y < 0 || z < 0) fail(path, "no x, y and z fields (of COUNT 1)");
  const bool normals = nx >= 0 && ny >= 0 && nz >= 0;
  if (!normals) {  // a lone normal component is a scalar like any other
    for (const int i : {nx, ny, nz})
      if (i >= 0) scalars.push_back(i);
    std::sort(scalars.begin(), scalars.end());
  }
  Mesh mesh;
  RelativePositions position(mesh);
  for (const int i : scalars) {
    const auto& f = fields[static_cast<size_t>(i)];
    mesh.vertex_properties.push_back({f.name, f.type != 'F', {}});
  }
  // The fields read per point: x, y, z, the normal's three (when whole), the colour (when there), the scalars.
  std::vector<int> wanted = {x, y, z};
  if (normals) wanted.insert(wanted.end(), {nx, ny, nz});
  const size_t colour_at = wanted.size();
  if (rgb >= 0) wanted.push_back(rgb);
  const size_t scalars_at = wanted.size();
  wanted.insert(wanted.end(), scalars.begin(), scalars.end());
  std::vector<double> v(wanted.size());
  uint32_t colour = 0;  // the colour's bits, 0xAARRGGBB
  int64_t dropped = 0;
  auto add = [&](int64_t where, bool is_line) {
    auto bad = [&](const std::string& what) {
      if (is_line) fail_at(path, where, what);
      fail(path, "point " + std::to_string(where) + ": " + what);
    };
    if (std::isnan(v[0]) || std::isnan(v[1]) || std::isnan(v[2])) {
      ++dropped;
      return;
    }
    for (int c = 0; c < 3; ++c)
      if (!std::isfinite(static_cast<float>(v[static_cast<size_t>(c)]))) bad("a coordinate is not finite");
    mesh.vertices.push_back(position(v[0], v[1], v[2]));
    if (normals) {
      Vec3 n{static_cast<float>(v[3]), static_cast<float>(v[4]), static_cast<float>(v[5])};
      if (std::isnan(n[0]) || std::isnan(n[1]) || std::isnan(n[2])) n = {0, 0, 0};
      if (!std::isfinite(n[0]) || !std::isfinite(n[1]) || !std::isfinite(n[2])) bad("a normal is not finite");
      mesh.normals.push_back(n);
    }
    if (rgb >= 0)
      mesh.colors.push_back(
          {static_cast<uint8_t>(colour >> 16), static_cast<uint8_t>(colour >> 8), static_cast<uint8_t>(colour)});
    for (size_t k = scalars_at; k < wanted.size(); ++k) mesh.vertex_properties[k - scalars_at].values.push_back(v[k]);
  };
  const size_t body = lines.consumed();
  const auto available = static_cast<int64_t>(text.size() - body);
  int64_t need = 0;
  if (!checked_mul(points, data == "binary" ? point_bytes : 2 * values, need) || need > available)
    fail(path, "truncated: the header declares " + std::to_string(points) + " points, more than the " +
                   std::to_string(available) + " bytes after it can hold");
  mesh.vertices.reserve(static_cast<size_t>(points));
  if (data == "binary") {
    for (int64_t i = 0; i < points; ++i) {
      const char* p = text.data() + body + i * point_bytes;
      for (size_t k = 0; k < wanted.size(); ++k) {
        const auto& f = fields[static_cast<size_t>(wanted[k])];
        const char* q = p + f.offset;
        if (k == colour_at && rgb >= 0) {  // the bits as they are, whatever the TYPE says
          colour = load<uint32_t>(q, false);
          continue;
        }
        double& out = v[k];
        if (f.type == 'F')
          out = f.size == 8 ? load<double>(q, false) : load<float>(q, false);
        else if (f.type == 'I')
          out = f.size == 1   ? load<int8_t>(q, false)
                : f.size == 2 ? load<int16_t>(q, false)
                : f.size == 4 ? load<int32_t>(q, false)
                              : static_cast<double>(load<int64_t>(q, false));
        else
          out = f.size == 1   ? load<uint8_t>(q, false)
                : f.size == 2 ? load<uint16_t>(q, false)
                : f.size == 4 ? load<uint32_t>(q, false)
                              : static_cast<double>(load<uint64_t>(q, false));
      }
      add(i, false);
    }
    // A line end or blanks after the points (a hand-written exporter's) are
    // no data; anything else is points the header does not count.
    const auto rest = std::string_view(text).substr(body + static_cast<size_t>(need));
    if (!trim(rest).empty())
      fail(path, "wrong counts: " + std::to_string(rest.size()) + " bytes after the " + std::to_string(points) +
                     " points the header declares");
  } else {
    Lines rows(std::string_view(text).substr(body), lines.line() + 1);
    for (int64_t i = 0; i < points; ++i) {
      if (!rows.next_nonblank(line, false))
        fail(path,
             "truncated: " + std::to_string(points) + " points declared, the file ends after " + std::to_string(i));
      split(line, tok);
      if (static_cast<int64_t>(tok.size()) != values)
        fail_at(path, rows.line(), std::to_string(tok.size()) + " values, the fields take " + std::to_string(values));
      for (size_t k = 0; k < wanted.size(); ++k) {
        const auto& f = fields[static_cast<size_t>(wanted[k])];
        const auto t = tok[static_cast<size_t>(f.offset)];
        double& out = v[k];
        if (lower(std::string(t)) == "nan")
          out = NAN;
        else if (!parse_decimal(t, out))
          fail_at(path, rows.line(), "non-numeric value " + show(t));
        if (k == colour_at && rgb >= 0) {
          // A U rgb is the packed integer. So is an F rgb in text since PCL
          // 1.7 (its ASCII writer: "despite the float type, store the rgb
          // field as uint32", an opaque colour's float being a NaN); older
          // writers printed the float whose bits pack the colour, which is
          // never written as digits alone (but 0, the same colour either way).
          const bool integer_text = !t.empty() && t.find_first_not_of("0123456789") == std::string_view::npos;
          if (f.type == 'F' && !integer_text) {
            const auto as_float = static_cast<float>(out);
            std::memcpy(&colour, &as_float, sizeof colour);
          } else {
            if (!(out >= 0 && out <= 4294967295.0))
              fail_at(path, rows.line(), "rgb " + show(t) + " is not a packed colour");
            colour = static_cast<uint32_t>(out);
          }
        }
      }
      add(rows.line(), true);
    }
    if (rows.next_nonblank(line, true))
      fail_at(path, rows.line(),
              "wrong counts: data after the " + std::to_string(points) + " points the header declares");
  }
  if (mesh.vertices.empty())
    fail(path, dropped > 0 ? "no points: all " + std::to_string(dropped) + " are NaN" : "no points (empty cloud)");
  position.finish();
  return mesh;
}

}  // namespace

namespace {

// Every reader's frame: a regular file (no FIFO or device), read whole, and
// parsed with running out of memory reported as `kind` in `path`.
template <typename Parse>
Mesh read_whole(const std::string& path, const char* kind, Parse parse) {
  regular_file_size(path);
  return guard_memory(path, kind, [&] { return parse(read_text_file(path)); });
}

}  // namespace

Mesh read_off(const std::string& path) {
  return read_whole(path, "an OFF mesh", [&](const std::string& text) { return parse_off(path, text); });
}

Mesh read_ply(const std::string& path) {
  return read_whole(path, "a PLY mesh", [&](const std::string& text) { return parse_ply(path, text); });
}

Mesh read_point_text(const std::string& path, int64_t max_points) {
  return read_whole(path, "a point file",
                    [&](const std::string& text) { return parse_point_text(path, text, max_points); });
}

Mesh read_obj(const std::string& path) {
  return read_whole(path, "an OBJ mesh", [&](const std::string& text) { return parse_obj(path, text); });
}

Mesh read_stl(const std::string& path) {
  return read_whole(path, "an STL mesh", [&](const std::string& text) { return parse_stl(path, text); });
}

Mesh read_pcd(const std::string& path) {
  return read_whole(path, "a PCD cloud", [&](const std::string& text) { return parse_pcd(path, text); });
}

bool is_shape_file_extension(const std::string& ext) {
  const auto e = lower(ext);
  for (const char* known : kShapeFileExtensions)
    if (e == known) return true;
  return false;
}

Mesh read_shape_file(const std::string& path) {
  // A folder (or a FIFO, a device) is named as such, whatever its name ends in.
  if (std::error_code ec; std::filesystem::exists(path, ec)) regular_file_size(path);
  const auto ext = lower(std::filesystem::path(path).extension().string());
  if (ext == ".off") return read_off(path);
  if (ext == ".ply") return read_ply(path);
  if (ext == ".obj") return read_obj(path);
  if (ext == ".stl") return read_stl(path);
  if (ext == ".pcd") return read_pcd(path);
  if (ext == ".txt" || ext == ".xyz" || ext == ".csv") return read_point_text(path);
  throw UsageError(path + ": unknown shape file type '" + ext + "': expected " + shape_file_extensions_text());
}

std::string shape_file_kinds_text(bool without_txt) {
  auto joined = [&](const auto& extensions) {
    std::string out;
    for (const char* e : extensions)
      if (!(without_txt && std::string(e) == ".txt")) out += (out.empty() ? "" : " ") + std::string(e);
    return out;
  };
  return "a mesh (" + joined(kMeshFileExtensions) + ") or a point cloud (" + joined(kPointFileExtensions) + ")";
}

std::string shape_file_extensions_text() {
  return join_alternatives({std::begin(kShapeFileExtensions), std::end(kShapeFileExtensions)});
}

}  // namespace qkv::pointcloud
