#include "qkv/pointcloud/synth_shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/splitmix64.h"
#include "qkv/pointcloud/data_files.h"
#include "qkv/pointcloud/mesh_write.h"
#include "qkv/pointcloud/sampling.h"

namespace qkv::pointcloud {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2 * kPi;

// Segments around the axis of a solid of revolution: main bodies, small parts
// (knobs, bulbs, engines), thin rods (legs, poles, rungs).
constexpr int kRound = 48;
constexpr int kSmallRound = 24;
constexpr int kRodRound = 12;

// Part numbering of the classes built from named parts (synth_shape_part_names
// gives the names in this order).
enum AirplanePart : int32_t { kAirplaneBody, kAirplaneWing, kAirplaneTail, kAirplaneEngine };
enum ChairPart : int32_t { kChairBack, kChairSeat, kChairLeg, kChairArm };
enum GuitarPart : int32_t { kGuitarHead, kGuitarNeck, kGuitarBody };
enum LampPart : int32_t { kLampBase, kLampShade, kLampBulb, kLampPole };
enum MugPart : int32_t { kMugHandle, kMugBody };
enum TablePart : int32_t { kTableTop, kTableLeg, kTableSupport };

using D2 = std::array<double, 2>;  // a profile point (r, y)
using D3 = std::array<double, 3>;
using M3 = std::array<D3, 3>;  // rows

// Uniform draws from the shape's own std::mt19937_64. Not through
// std::uniform_real_distribution, whose algorithm each standard library
// chooses: the same seed must give the same files everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform(double lo, double hi) { return lo + (hi - lo) * (static_cast<double>(gen_() >> 11) * 0x1.0p-53); }
  int integer(int lo, int hi) { return lo + static_cast<int>(gen_() % static_cast<uint64_t>(hi - lo + 1)); }
  bool chance(double p) { return uniform(0, 1) < p; }

 private:
  std::mt19937_64 gen_;
};

// ---------------------------------------------------------------------------
// Transforms and merging. Rotations are right-handed about a coordinate axis
// through the origin; parts are built at the origin and then moved in place.

Vec3 to_vec3(const D3& p) { return {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2])}; }

// x -> A x + t. A mirror (det A < 0) would turn the surface inside out, so the
// faces are re-wound to stay outward.
Mesh affine(Mesh m, const M3& a, const D3& t) {
  for (auto& v : m.vertices) {
    const D3 p{v[0], v[1], v[2]};
    D3 q;
    for (int i = 0; i < 3; ++i) q[i] = a[i][0] * p[0] + a[i][1] * p[1] + a[i][2] * p[2] + t[i];
    v = to_vec3(q);
  }
  const double det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
                     a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                     a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
  if (det < 0)
    for (auto& f : m.faces) std::swap(f[1], f[2]);
  return m;
}

Mesh translate(Mesh m, double x, double y, double z) {
  return affine(std::move(m), {{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}}, {x, y, z});
}

Mesh scale(Mesh m, double x, double y, double z) {
  return affine(std::move(m), {{{x, 0, 0}, {0, y, 0}, {0, 0, z}}}, {0, 0, 0});
}

Mesh rotate(Mesh m, int axis, double angle) {
  const double c = std::cos(angle), s = std::sin(angle);
  M3 r;
  if (axis == 0)
    r = {{{1, 0, 0}, {0, c, -s}, {0, s, c}}};
  else if (axis == 1)
    r = {{{c, 0, s}, {0, 1, 0}, {-s, 0, c}}};
  else
    r = {{{c, -s, 0}, {s, c, 0}, {0, 0, 1}}};
  return affine(std::move(m), r, {0, 0, 0});
}
Mesh rotate_x(Mesh m, double angle) { return rotate(std::move(m), 0, angle); }
Mesh rotate_y(Mesh m, double angle) { return rotate(std::move(m), 1, angle); }
Mesh rotate_z(Mesh m, double angle) { return rotate(std::move(m), 2, angle); }

// The parts of a shape are separate closed surfaces in one vertex list; where
// they overlap (a handle in a mug wall, a leg under a top) nothing is cut.
// Part labels travel with the faces; unlabelled faces get -1 once either side
// has labels.
void merge(Mesh& into, const Mesh& part) {
  const auto offset = static_cast<int64_t>(into.vertices.size());
  if (!part.face_parts.empty() && into.face_parts.empty()) into.face_parts.assign(into.faces.size(), -1);
  into.vertices.insert(into.vertices.end(), part.vertices.begin(), part.vertices.end());
  for (const auto& f : part.faces) into.faces.push_back({f[0] + offset, f[1] + offset, f[2] + offset});
  if (!into.face_parts.empty()) {
    if (part.face_parts.empty())
      into.face_parts.resize(into.faces.size(), -1);
    else
      into.face_parts.insert(into.face_parts.end(), part.face_parts.begin(), part.face_parts.end());
  }
}

// Every face of `m` belongs to part `label` (the builder's own part numbering).
Mesh labelled(Mesh m, int32_t label) {
  m.face_parts.assign(m.faces.size(), label);
  return m;
}

Mesh merged(std::initializer_list<Mesh> parts) {
  Mesh m;
  for (const auto& p : parts) merge(m, p);
  return m;
}

// ---------------------------------------------------------------------------
// Solids of revolution: cylinders, cones, spheres, tori, bottles, bowls, lamp
// shades and fuselages are all one profile turned about the y axis.

bool on_axis(const D2& p) { return p[0] <= 1e-9; }

// Do the segments ab and cd cross (touching at a shared end does not count)?
bool segments_cross(const D2& a, const D2& b, const D2& c, const D2& d) {
  auto orient = [](const D2& p, const D2& q, const D2& r) {
    return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]);
  };
  const double d1 = orient(a, b, c), d2 = orient(a, b, d), d3 = orient(c, d, a), d4 = orient(c, d, b);
  return ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0));
}

// A profile must be a simple polygon (closed along the axis, or as a loop)
// traversed counter-clockwise in the (r, y) half-plane, i.e. with the solid on
// its left: that is what makes the revolved faces point outward. A random draw
// that breaks this is a bug in a shape's ranges, caught here rather than
// written out as an inside-out mesh.
void check_profile(const std::vector<D2>& p) {
  const size_t n = p.size();
  double area2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const D2& a = p[i];
    const D2& b = p[(i + 1) % n];
    area2 += a[0] * b[1] - b[0] * a[1];
    if (a[0] < 0) throw std::logic_error("synth_shapes: a profile point has a negative radius");
  }
  if (area2 <= 0) throw std::logic_error("synth_shapes: a profile is not counter-clockwise in (r, y)");
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 2; j < n; ++j) {
      if (i == 0 && j == n - 1) continue;  // neighbours through the closing edge
      if (segments_cross(p[i], p[(i + 1) % n], p[j], p[(j + 1) % n]))
        throw std::logic_error("synth_shapes: a profile crosses itself");
    }
}

// Inserts points so that no profile edge is longer than `step` (never fewer
// pieces than needed): long walls get rings along them, so triangles stay
// reasonably shaped and every part of the surface has vertices.
std::vector<D2> resample(const std::vector<D2>& p, double step, bool loop) {
  std::vector<D2> out;
  const size_t edges = loop ? p.size() : p.size() - 1;
  for (size_t i = 0; i < edges; ++i) {
    const D2& a = p[i];
    const D2& b = p[(i + 1) % p.size()];
    const double len = std::hypot(b[0] - a[0], b[1] - a[1]);
    const int pieces = std::max(1, static_cast<int>(std::ceil(len / step - 1e-9)));
    for (int k = 0; k < pieces; ++k) {
      const double t = static_cast<double>(k) / pieces;
      out.push_back({a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])});
    }
  }
  if (!loop) out.push_back(p.back());
  return out;
}

// Turns a profile of (r, y) points about the y axis through `arc` radians:
// vertex (r cos t, y, r sin t) for t in [0, arc]. Two kinds of profile:
//  - from the axis to the axis (first and last r = 0): a closed solid, its
//    axis points becoming single pole vertices (cylinder, cone, sphere, mug);
//  - a loop that never touches the axis (last point joins the first): a ring
//    (torus, lamp shade). Only a loop may turn through less than a full turn
//    (a handle); its two ends are then closed by fans from the profile's
//    centroid, which suits the convex loops used for that.
Mesh revolve(const std::vector<D2>& profile_in, int segments, double arc = kTwoPi) {
  const bool axis_to_axis = on_axis(profile_in.front()) && on_axis(profile_in.back());
  const bool full = arc >= kTwoPi - 1e-9;
  if (!full && axis_to_axis) throw std::logic_error("synth_shapes: only a loop profile can turn part-way");
  check_profile(profile_in);

  // Rings no further apart than the larger of the spacing around the widest
  // ring and an eighth of the profile's size.
  double r_max = 0, y_min = profile_in[0][1], y_max = y_min;
  for (const auto& q : profile_in) {
    r_max = std::max(r_max, q[0]);
    y_min = std::min(y_min, q[1]);
    y_max = std::max(y_max, q[1]);
  }
  const double step = std::max(kTwoPi * r_max / segments, std::max(r_max, y_max - y_min) / 8);
  const auto profile = resample(profile_in, step, !axis_to_axis);

  const int steps = full ? segments : std::max(2, static_cast<int>(std::ceil(segments * arc / kTwoPi)));
  const int columns = full ? steps : steps + 1;
  Mesh m;
  std::vector<std::vector<int64_t>> index(profile.size());  // [profile point][column] -> vertex
  for (size_t i = 0; i < profile.size(); ++i) {
    const auto [r, y] = profile[i];
    if (on_axis(profile[i])) {
      index[i].assign(columns, static_cast<int64_t>(m.vertices.size()));
      m.vertices.push_back(to_vec3({0, y, 0}));
      continue;
    }
    for (int j = 0; j < columns; ++j) {
      const double t = arc * j / steps;
      index[i].push_back(static_cast<int64_t>(m.vertices.size()));
      m.vertices.push_back(to_vec3({r * std::cos(t), y, r * std::sin(t)}));
    }
  }
  // Quad (a, b, c, d): a, b along the profile, d, c one step further round.
  // (b - a) x (d - a) points away from the solid for a counter-clockwise
  // profile; at a pole the quad is a triangle.
  const size_t n = profile.size();
  const size_t spans = axis_to_axis ? n - 1 : n;
  for (size_t i = 0; i < spans; ++i) {
    const auto& lo = index[i];
    const auto& hi = index[(i + 1) % n];
    for (int j = 0; j < steps; ++j) {
      const int k = full ? (j + 1) % steps : j + 1;
      const int64_t a = lo[j], b = hi[j], c = hi[k], d = lo[k];
      if (b != c) m.faces.push_back({a, b, c});
      if (a != d) m.faces.push_back({a, c, d});
    }
  }
  if (!full) {
    D2 centre{0, 0};
    for (const auto& q : profile) centre = {centre[0] + q[0] / n, centre[1] + q[1] / n};
    const auto c0 = static_cast<int64_t>(m.vertices.size());
    m.vertices.push_back(to_vec3({centre[0], centre[1], 0}));
    const auto c1 = static_cast<int64_t>(m.vertices.size());
    m.vertices.push_back(to_vec3({centre[0] * std::cos(arc), centre[1], centre[0] * std::sin(arc)}));
    for (size_t i = 0; i < n; ++i) {
      const size_t i1 = (i + 1) % n;
      m.faces.push_back({c0, index[i1][0], index[i][0]});                      // faces back, -t
      m.faces.push_back({c1, index[i][columns - 1], index[i1][columns - 1]});  // faces on, +t
    }
  }
  return m;
}

// Closed cylinder (r0 == r1), frustum or cone (r1 == 0) standing on y = 0.
Mesh frustum(double r0, double r1, double height, int segments = kRound) {
  if (r1 <= 0) return revolve({{0, 0}, {r0, 0}, {0, height}}, segments);
  return revolve({{0, 0}, {r0, 0}, {r1, height}, {0, height}}, segments);
}

// Ellipsoid with semi-axes (rx, ry, rz), centred on the origin: a revolved
// half circle, stretched.
Mesh ellipsoid(double rx, double ry, double rz, int segments = kRound) {
  const int rings = segments / 2;
  std::vector<D2> profile;
  for (int k = 0; k <= rings; ++k) {
    const double phi = kPi * k / rings;
    profile.push_back({k == 0 || k == rings ? 0.0 : std::sin(phi), -std::cos(phi)});
  }
  return scale(revolve(profile, segments), rx, ry, rz);
}

// A circle of radius `minor` around the point (major, 0) of the (r, y) plane,
// counter-clockwise: the loop profile of a torus.
std::vector<D2> circle_loop(double major, double minor, int points = 16) {
  std::vector<D2> loop;
  for (int k = 0; k < points; ++k) {
    const double t = kTwoPi * k / points;
    loop.push_back({major + minor * std::cos(t), minor * std::sin(t)});
  }
  return loop;
}

// Torus lying in the xz plane around the y axis; with arc < 2 pi a capped
// segment of it starting on +x and turning towards +z.
Mesh torus(double major, double minor, double arc = kTwoPi, int segments = kRound) {
  return revolve(circle_loop(major, minor), segments, arc);
}

// A round rod (closed cylinder) of radius r from point a to point b: a
// cylinder along y, tilted from y by its polar angle, turned to its azimuth.
Mesh rod(const D3& a, const D3& b, double r, int segments = kRodRound) {
  const D3 d{b[0] - a[0], b[1] - a[1], b[2] - a[2]};
  const double len = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  const double polar = std::acos(std::clamp(d[1] / len, -1.0, 1.0));
  const double azimuth = std::atan2(d[2], d[0]);
  // rotate_z(-polar) takes +y to (sin polar, cos polar, 0); rotate_y(-azimuth)
  // then turns that towards +z by the azimuth.
  Mesh m = rotate_y(rotate_z(frustum(r, r, len, segments), -polar), -azimuth);
  return translate(std::move(m), a[0], a[1], a[2]);
}

// ---------------------------------------------------------------------------
// Hexahedra: boxes and their deformed cousins (tapered legs, swept wings,
// tilted chair backs) from 8 corners. Corner index bits: 1 = the +x end,
// 2 = the +y end, 4 = the +z end, so c[0] is (-,-,-) and c[7] is (+,+,+).
// Each face is a grid, each corner trilinearly interpolated; grid points are
// shared between faces, so the surface is closed. The corners must keep that
// handedness (no mirrored layout), which keeps the faces outward.

Mesh hexahedron(const std::array<D3, 8>& c) {
  auto corner_distance = [&](int i, int j) {
    double s = 0;
    for (int k = 0; k < 3; ++k) s += (c[i][k] - c[j][k]) * (c[i][k] - c[j][k]);
    return std::sqrt(s);
  };
  // Cells along each parameter axis, from the longest edge in that direction:
  // up to 6 along the longest, at least 1.
  std::array<double, 3> len{0, 0, 0};
  for (int axis = 0; axis < 3; ++axis)
    for (int i = 0; i < 8; ++i)
      if (!(i & (1 << axis))) len[axis] = std::max(len[axis], corner_distance(i, i | (1 << axis)));
  const double longest = std::max({len[0], len[1], len[2]});
  constexpr int kMaxCells = 6;
  std::array<int, 3> cells;
  for (int k = 0; k < 3; ++k)
    cells[k] = std::clamp(static_cast<int>(std::ceil(len[k] / longest * kMaxCells - 1e-9)), 1, kMaxCells);

  Mesh m;
  std::unordered_map<int64_t, int64_t> ids;
  auto vertex = [&](const std::array<int, 3>& g) {
    const int64_t key = (static_cast<int64_t>(g[0]) * (kMaxCells + 1) + g[1]) * (kMaxCells + 1) + g[2];
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    const double u = static_cast<double>(g[0]) / cells[0], v = static_cast<double>(g[1]) / cells[1],
                 w = static_cast<double>(g[2]) / cells[2];
    D3 p{0, 0, 0};
    for (int bits = 0; bits < 8; ++bits) {
      const double weight = ((bits & 1) ? u : 1 - u) * ((bits & 2) ? v : 1 - v) * ((bits & 4) ? w : 1 - w);
      for (int k = 0; k < 3; ++k) p[k] += weight * c[bits][k];
    }
    const auto id = static_cast<int64_t>(m.vertices.size());
    m.vertices.push_back(to_vec3(p));
    ids.emplace(key, id);
    return id;
  };
  // Per face: the fixed axis and end, then in-face axes a, b with
  // e_a x e_b pointing out of the box.
  struct Side {
    int axis, end, a, b;
  };
  const Side sides[6] = {{0, 0, 2, 1}, {0, 1, 1, 2}, {1, 0, 0, 2}, {1, 1, 2, 0}, {2, 0, 1, 0}, {2, 1, 0, 1}};
  for (const auto& side : sides) {
    for (int s = 0; s < cells[side.a]; ++s)
      for (int t = 0; t < cells[side.b]; ++t) {
        auto grid = [&](int ds, int dt) {
          std::array<int, 3> g{};
          g[side.axis] = side.end * cells[side.axis];
          g[side.a] = s + ds;
          g[side.b] = t + dt;
          return vertex(g);
        };
        const int64_t p00 = grid(0, 0), p10 = grid(1, 0), p11 = grid(1, 1), p01 = grid(0, 1);
        m.faces.push_back({p00, p10, p11});
        m.faces.push_back({p00, p11, p01});
      }
  }
  return m;
}

// Axis-aligned box from its minimum and maximum corners.
Mesh box(const D3& lo, const D3& hi) {
  std::array<D3, 8> c;
  for (int bits = 0; bits < 8; ++bits)
    c[bits] = {(bits & 1) ? hi[0] : lo[0], (bits & 2) ? hi[1] : lo[1], (bits & 4) ? hi[2] : lo[2]};
  return hexahedron(c);
}

// Axis-aligned box by its centre and full sizes.
Mesh centred_box(double cx, double cy, double cz, double sx, double sy, double sz) {
  return box({cx - sx / 2, cy - sy / 2, cz - sz / 2}, {cx + sx / 2, cy + sy / 2, cz + sz / 2});
}

// A leg from the floor to height h at (x, z): square or round, its choice
// drawn once per shape so that all legs of a piece of furniture match.
Mesh leg(double x, double z, double h, double thickness, bool round) {
  if (round) return rod({x, 0, z}, {x, h, z}, thickness / 2);
  return centred_box(x, h / 2, z, thickness, h, thickness);
}

// Smooth (cosine) interpolation through (t, value) knots sorted by t.
double smooth_curve(const std::vector<D2>& knots, double t) {
  if (t <= knots.front()[0]) return knots.front()[1];
  for (size_t i = 1; i < knots.size(); ++i)
    if (t <= knots[i][0]) {
      const double s = (t - knots[i - 1][0]) / (knots[i][0] - knots[i - 1][0]);
      const double w = (1 - std::cos(kPi * s)) / 2;
      return knots[i - 1][1] + w * (knots[i][1] - knots[i - 1][1]);
    }
  return knots.back()[1];
}

// ---------------------------------------------------------------------------
// The classes. Sizes are in arbitrary units (the result is rescaled); the
// ranges of the ratios that define a class are what matters, and each says
// which neighbouring class it keeps clear of.

// Solid box, every side at least half the longest: never a plate or a rod.
Mesh make_box(Rng& rng) {
  return box({0, 0, 0}, {rng.uniform(0.5, 1.0), rng.uniform(0.5, 1.0), rng.uniform(0.5, 1.0)});
}

// Solid cylinder, height / radius in [1.6, 5]: taller than any bowl (< 0.75)
// and flat-capped unlike the capsule.
Mesh make_cylinder(Rng& rng) {
  const double r = 0.5;
  return frustum(r, r, r * rng.uniform(1.6, 5.0));
}

// Solid cone, height / base radius in [1.5, 3.5].
Mesh make_cone(Rng& rng) {
  const double r = 0.5;
  return frustum(r, 0, r * rng.uniform(1.5, 3.5));
}

// Ring lying flat, major / minor radius in [2.2, 4.5].
Mesh make_torus(Rng& rng) {
  const double major = 0.5;
  return torus(major, major / rng.uniform(2.2, 4.5));
}

// Sphere squashed by at most 12% along each axis: never as long as a capsule.
Mesh make_sphere(Rng& rng) {
  return ellipsoid(0.5 * rng.uniform(0.88, 1.12), 0.5 * rng.uniform(0.88, 1.12), 0.5 * rng.uniform(0.88, 1.12));
}

// Square pyramid: a cone with four segments, turned so that its base edges
// run along x and z; height / base side in [0.6, 1.4], base aspect up to 1.25.
Mesh make_pyramid(Rng& rng) {
  const double side = 1.0;
  const double half_diagonal = side / std::sqrt(2.0);
  Mesh m = rotate_y(frustum(half_diagonal, 0, side * rng.uniform(0.6, 1.4), 4), kPi / 4);
  return scale(std::move(m), rng.uniform(0.8, 1.0), 1, rng.uniform(0.8, 1.0));
}

// Upright capsule (cylinder with hemispherical ends), total height / diameter
// in [1.6, 3]: rounder ends than the cylinder, longer than the sphere.
Mesh make_capsule(Rng& rng) {
  const double r = 0.5;
  const double height = 2 * r * rng.uniform(1.6, 3.0);
  std::vector<D2> profile;
  const int quarter = 8;
  for (int k = 0; k <= quarter; ++k) {  // bottom cap, from the pole out
    const double phi = kPi / 2 * k / quarter;
    profile.push_back({k == 0 ? 0.0 : r * std::sin(phi), r - r * std::cos(phi)});
  }
  for (int k = quarter; k >= 0; --k) {  // top cap, back to the pole
    const double phi = kPi / 2 * k / quarter;
    profile.push_back({k == 0 ? 0.0 : r * std::sin(phi), height - r + r * std::cos(phi)});
  }
  return revolve(profile, kRound);
}

// Hollow cylinder with a bottom and a C-shaped handle on +x: height / radius
// in [1.6, 2.6], wall, handle size and height vary.
Mesh make_mug(Rng& rng) {
  const double r = 0.5;
  const double height = r * rng.uniform(1.6, 2.6);
  const double wall = r * rng.uniform(0.06, 0.1);
  const double bottom = wall * rng.uniform(1.0, 1.6);
  Mesh m = labelled(revolve({{0, 0}, {r, 0}, {r, height}, {r - wall, height}, {r - wall, bottom}, {0, bottom}}, kRound),
                    kMugBody);
  // The handle: a tube along an arc of a circle in the xy plane, centred a
  // little inside the wall so that both ends sink into it.
  const double tube = r * rng.uniform(0.07, 0.11);
  const double bend = height * rng.uniform(0.25, 0.36);
  const double centre_x = r - bend * rng.uniform(0.15, 0.35);
  const double centre_y = height * rng.uniform(0.45, 0.55);
  const double half_arc = std::acos(std::clamp((r - wall / 2 - centre_x) / bend, -1.0, 1.0));
  // torus() starts on +x and turns towards +z: centre the arc on +x, then
  // stand it up in the xy plane.
  Mesh handle = rotate_x(rotate_y(torus(bend, tube, 2 * half_arc, kRound), half_arc), kPi / 2);
  merge(m, labelled(translate(std::move(handle), centre_x, centre_y, 0), kMugHandle));
  return m;
}

// Rectangular top on four legs, wider than tall (height / width in [0.55,
// 0.8]) and wider than deep; legs square or round, optional apron.
Mesh make_table(Rng& rng) {
  const double width = 1.0;
  const double depth = width * rng.uniform(0.5, 0.9);
  const double height = width * rng.uniform(0.55, 0.8);
  const double top = rng.uniform(0.03, 0.06);
  const double leg_t = rng.uniform(0.04, 0.08);
  const double inset = rng.uniform(0.02, 0.1);
  const bool round = rng.chance(0.5);
  const bool apron = rng.chance(0.5);
  Mesh m = labelled(centred_box(0, height - top / 2, 0, width, top, depth), kTableTop);
  const double lx = width / 2 - inset - leg_t / 2, lz = depth / 2 - inset - leg_t / 2;
  for (int sx : {-1, 1})
    for (int sz : {-1, 1}) merge(m, labelled(leg(sx * lx, sz * lz, height - top, leg_t, round), kTableLeg));
  if (apron) {
    const double ah = rng.uniform(0.06, 0.1), at = 0.02, ay = height - top - ah / 2;
    for (int s : {-1, 1}) {
      merge(m, labelled(centred_box(0, ay, s * (lz + leg_t / 2 - at / 2), 2 * lx, ah, at), kTableSupport));
      merge(m, labelled(centred_box(s * (lx + leg_t / 2 - at / 2), ay, 0, at, ah, 2 * lz), kTableSupport));
    }
  }
  return m;
}

// Seat on four legs with a back on the -z edge rising well above the seat
// (what tells it from the stool and the table): a solid panel or two posts
// with slats, tilted back a little; optional arm rests.
Mesh make_chair(Rng& rng) {
  const double width = rng.uniform(0.42, 0.55);
  const double depth = width * rng.uniform(0.9, 1.15);
  const double seat_h = rng.uniform(0.4, 0.48);
  const double seat_t = rng.uniform(0.04, 0.07);
  const double back_h = rng.uniform(0.35, 0.55);
  const double back_t = rng.uniform(0.025, 0.045);
  const double tilt = back_h * rng.uniform(0.0, 0.18);  // backwards shift of the top edge
  const double leg_t = rng.uniform(0.03, 0.05);
  const bool round = rng.chance(0.4);
  const bool panel = rng.chance(0.5);
  const bool arms = rng.chance(0.3);

  Mesh m = labelled(centred_box(0, seat_h - seat_t / 2, 0, width, seat_t, depth), kChairSeat);
  const double lx = width / 2 - leg_t / 2, lz = depth / 2 - leg_t / 2;
  for (int sx : {-1, 1})
    for (int sz : {-1, 1}) merge(m, labelled(leg(sx * lx, sz * lz, seat_h - seat_t, leg_t, round), kChairLeg));

  // A slab from (x0..x1) at the seat's back edge, from y0 to y1, leaning back
  // by `tilt` over the back's full height.
  const double z_back = -depth / 2;
  auto back_slab = [&](double x0, double x1, double y0, double y1) {
    const double s0 = tilt * (y0 - seat_h) / back_h, s1 = tilt * (y1 - seat_h) / back_h;
    std::array<D3, 8> c;
    for (int bits = 0; bits < 8; ++bits) {
      const double x = (bits & 1) ? x1 : x0;
      const double y = (bits & 2) ? y1 : y0;
      const double z = z_back + ((bits & 4) ? back_t : 0) - ((bits & 2) ? s1 : s0);
      c[bits] = {x, y, z};
    }
    return labelled(hexahedron(c), kChairBack);
  };
  const double top = seat_h + back_h;
  if (panel) {
    merge(m, back_slab(-width / 2, width / 2, seat_h, top));
  } else {
    const double post = leg_t;
    merge(m, back_slab(-width / 2, -width / 2 + post, seat_h, top));
    merge(m, back_slab(width / 2 - post, width / 2, seat_h, top));
    const int slats = rng.integer(2, 4);
    const double slat_h = back_h * rng.uniform(0.08, 0.14);
    for (int k = 0; k < slats; ++k) {
      const double y1 = top - k * (back_h * 0.9 / slats);
      merge(m, back_slab(-width / 2 + post, width / 2 - post, y1 - slat_h, y1));
    }
  }
  if (arms) {
    const double arm_h = rng.uniform(0.18, 0.25), arm_w = 0.04;
    for (int s : {-1, 1}) {
      const double x = s * (width / 2 - arm_w / 2);
      merge(m, labelled(centred_box(x, seat_h + arm_h, 0, arm_w, 0.03, depth), kChairArm));  // rest
      merge(m, labelled(centred_box(x, seat_h + arm_h / 2, depth / 2 - 0.03, 0.03, arm_h, 0.03), kChairArm));
    }
  }
  return m;
}

// Round base, thin pole, hollow frustum shade open at both ends, a bulb:
// pole height, shade size and taper, base size vary.
Mesh make_lamp(Rng& rng) {
  const double base_r = rng.uniform(0.12, 0.2);
  const double base_h = rng.uniform(0.03, 0.06);
  const double pole_r = rng.uniform(0.012, 0.02);
  const double pole_h = rng.uniform(0.45, 0.85);
  const double shade_r = rng.uniform(0.14, 0.24);
  const double shade_top = shade_r * rng.uniform(0.45, 0.8);
  const double shade_h = rng.uniform(0.15, 0.28);
  const double shade_wall = 0.008;
  const double pole_top = base_h + pole_h;
  const double shade_y = pole_top - shade_h * rng.uniform(0.3, 0.6);

  Mesh m = labelled(frustum(base_r, base_r * rng.uniform(0.6, 0.95), base_h), kLampBase);
  merge(m, labelled(rod({0, base_h * 0.5, 0}, {0, pole_top, 0}, pole_r), kLampPole));
  // The shade's wall cross-section: a thin slanted quad, counter-clockwise.
  merge(m,
        labelled(
            translate(
                revolve(
                    {{shade_r, 0}, {shade_top, shade_h}, {shade_top - shade_wall, shade_h}, {shade_r - shade_wall, 0}},
                    kRound),
                0, shade_y, 0),
            kLampShade));
  const double bulb = std::min(shade_top * 0.8, rng.uniform(0.03, 0.05));
  merge(m, labelled(translate(ellipsoid(bulb, bulb * 1.2, bulb, kSmallRound), 0, pole_top, 0), kLampBulb));
  return m;
}

// Fuselage along z (nose +z), swept tapered wings with dihedral, tail plane and
// fin; optional engines under the wings. Span, chords, sweep, wing height and
// position vary.
Mesh make_airplane(Rng& rng) {
  const double length = 1.0;
  const double fr = length * rng.uniform(0.04, 0.07);  // fuselage radius
  const double tail_cone = rng.uniform(0.2, 0.3), nose = rng.uniform(0.08, 0.14);
  // Fuselage profile from the tail (y = 0) to the nose (y = length), then
  // laid along z: rotate_x(pi/2) takes +y to +z.
  std::vector<D2> profile{{0, 0}, {fr * 0.25, 0}};
  for (int k = 1; k <= 6; ++k) {
    const double s = k / 6.0;
    profile.push_back({fr * (0.25 + 0.75 * std::sin(s * kPi / 2)), tail_cone * length * s});
  }
  for (int k = 1; k <= 6; ++k) {
    const double s = k / 6.0;
    profile.push_back(
        {k == 6 ? 0.0 : fr * std::cos(s * kPi / 2), (1 - nose) * length + nose * length * std::sin(s * kPi / 2)});
  }
  Mesh m = labelled(rotate_x(revolve(profile, kSmallRound), kPi / 2), kAirplaneBody);

  // One wing-like slab on the +x side; the -x one is its mirror image.
  // root / tip: chord, leading edge z, y, thickness at x = 0 and x = span.
  auto wing = [&](double span, double root_chord, double tip_chord, double root_lead_z, double sweep, double y,
                  double dihedral, double thickness) {
    std::array<D3, 8> c;
    for (int bits = 0; bits < 8; ++bits) {
      const bool tip = bits & 1, up = bits & 2, front = bits & 4;
      const double chord = tip ? tip_chord : root_chord;
      const double lead = root_lead_z - (tip ? sweep : 0);
      const double t = (tip ? 0.4 : 1.0) * thickness;
      c[bits] = {tip ? span : 0.0, y + (tip ? dihedral : 0) + (up ? t / 2 : -t / 2), front ? lead : lead - chord};
    }
    Mesh right = hexahedron(c);
    Mesh left = scale(right, -1, 1, 1);
    return merged({right, left});
  };
  const double span = length * rng.uniform(0.4, 0.6);  // per side
  const double root = length * rng.uniform(0.15, 0.25);
  const double wing_lead = length * rng.uniform(0.55, 0.68);
  const double wing_y = fr * rng.uniform(-0.5, 0.3);
  merge(m, labelled(wing(span, root, root * rng.uniform(0.3, 0.6), wing_lead, length * rng.uniform(0.05, 0.3), wing_y,
                         length * rng.uniform(0.0, 0.05), fr * rng.uniform(0.35, 0.6)),
                    kAirplaneWing));
  // Tail plane.
  const double tail_root = root * rng.uniform(0.4, 0.6);
  merge(m, labelled(wing(span * rng.uniform(0.3, 0.42), tail_root, tail_root * 0.6,
                         tail_cone * length * 0.8 + tail_root, length * 0.05, fr * 0.3, 0, fr * 0.3),
                    kAirplaneTail));
  // Fin: a slab in the yz plane, rising from the fuselage's top, swept back.
  const double fin_h = length * rng.uniform(0.12, 0.2), fin_root = tail_root * rng.uniform(1.1, 1.5);
  const double fin_lead = tail_cone * length * 0.9 + fin_root * 0.5, fin_t = fr * 0.25;
  std::array<D3, 8> fin;
  for (int bits = 0; bits < 8; ++bits) {
    const bool right = bits & 1, top = bits & 2, front = bits & 4;
    const double chord = top ? fin_root * 0.55 : fin_root;
    const double lead = fin_lead - (top ? fin_h * 0.6 : 0);
    fin[bits] = {right ? fin_t / 2 : -fin_t / 2, top ? fr + fin_h : fr * 0.5, front ? lead : lead - chord};
  }
  merge(m, labelled(hexahedron(fin), kAirplaneTail));
  if (rng.chance(0.5)) {  // two engines under the wings
    const double er = fr * rng.uniform(0.45, 0.65), ex = span * rng.uniform(0.3, 0.45);
    const double ey = wing_y - er * 1.2, ez = wing_lead - root * 0.2;
    for (int s : {-1, 1})
      merge(m, labelled(rod({s * ex, ey, ez - root * 0.9}, {s * ex, ey, ez + root * 0.3}, er, kSmallRound),
                        kAirplaneEngine));
  }
  return m;
}

// Solid bottle: straight body, rounded shoulder, narrow neck (radius ratio
// [0.25, 0.4] of the body), lip. Body / shoulder / neck lengths vary.
Mesh make_bottle(Rng& rng) {
  const double r = 0.5;
  const double height = r * rng.uniform(4.5, 7.0);
  const double neck = r * rng.uniform(0.25, 0.4);
  const double body = height * rng.uniform(0.5, 0.65);
  const double shoulder = height * rng.uniform(0.12, 0.2);
  const double lip = height * 0.03;
  std::vector<D2> profile{{0, 0}, {r * 0.92, 0}, {r, height * 0.02}, {r, body}};
  for (int k = 1; k <= 8; ++k) {
    const double s = k / 8.0;
    profile.push_back({neck + (r - neck) * std::cos(s * kPi / 2), body + shoulder * std::sin(s * kPi / 2)});
  }
  profile.insert(profile.end(),
                 {{neck, height - lip}, {neck * 1.18, height - lip}, {neck * 1.18, height}, {0, height}});
  return revolve(profile, kRound);
}

// Round seat on three or four splayed legs, taller than wide (height / seat
// diameter in [1.1, 2.5]); splay, optional rungs.
Mesh make_stool(Rng& rng) {
  const double seat_r = rng.uniform(0.15, 0.22);
  const double seat_t = rng.uniform(0.03, 0.05);
  const double height = 2 * seat_r * rng.uniform(1.1, 2.5);
  const int legs = rng.integer(3, 4);
  const double leg_r = rng.uniform(0.012, 0.02);
  const double top_r = seat_r * 0.7;
  const double foot_r = top_r + (height - seat_t) * std::tan(rng.uniform(3, 10) * kPi / 180);
  const bool rungs = rng.chance(0.6);
  Mesh m = translate(frustum(seat_r, seat_r, seat_t), 0, height - seat_t, 0);
  std::vector<D3> rung_points;
  for (int k = 0; k < legs; ++k) {
    const double a = kTwoPi * (k + 0.5) / legs;
    const D3 foot{foot_r * std::cos(a), 0, foot_r * std::sin(a)};
    const D3 top{top_r * std::cos(a), height - seat_t * 0.5, top_r * std::sin(a)};
    merge(m, rod(foot, top, leg_r));
    const double s = 0.35;  // rungs a third of the way up
    rung_points.push_back({foot[0] + s * (top[0] - foot[0]), s * top[1], foot[2] + s * (top[2] - foot[2])});
  }
  if (rungs)
    for (int k = 0; k < legs; ++k) merge(m, rod(rung_points[k], rung_points[(k + 1) % legs], leg_r * 0.7));
  return m;
}

// Open thin-walled bowl on a foot: height / radius in [0.4, 0.75] (never a
// cylinder's), wall, foot and curvature vary.
Mesh make_bowl(Rng& rng) {
  const double r = 0.5;
  const double height = r * rng.uniform(0.4, 0.75);
  const double wall = r * rng.uniform(0.04, 0.07);
  const double foot_r = r * rng.uniform(0.35, 0.5);
  const double foot_h = height * rng.uniform(0.06, 0.12);
  const double inner_bottom = foot_h + wall;
  const int n = 12;
  // Outer: foot, then a quarter ellipse from (foot_r, foot_h), flat, up to
  // the rim (r, height), vertical. Inner: the same curve, smaller, back down
  // to the axis.
  std::vector<D2> profile{{0, 0}, {foot_r, 0}};
  for (int k = 0; k <= n; ++k) {
    const double s = kPi / 2 * k / n;
    profile.push_back({foot_r + (r - foot_r) * std::sin(s), foot_h + (height - foot_h) * (1 - std::cos(s))});
  }
  for (int k = n; k >= 0; --k) {
    const double s = kPi / 2 * k / n;
    profile.push_back(
        {k == 0 ? 0.0 : (r - wall) * std::sin(s), inner_bottom + (height - inner_bottom) * (1 - std::cos(s))});
  }
  return revolve(profile, kRound);
}

// Open thin-walled vase with a curved outline: a belly, a narrower neck and a
// flared mouth (mouth / belly radius in [0.6, 0.9], far wider than a bottle's
// neck); height / belly radius in [2.5, 4]; every knot's place and size vary.
Mesh make_vase(Rng& rng) {
  const double height = 1.0;
  const double belly = height / rng.uniform(2.5, 4.0);
  const std::vector<D2> knots{{0.0, belly * rng.uniform(0.5, 0.7)},
                              {rng.uniform(0.3, 0.5), belly},
                              {rng.uniform(0.72, 0.85), belly * rng.uniform(0.45, 0.6)},
                              {1.0, belly * rng.uniform(0.6, 0.9)}};
  const double wall = 0.02, floor = 0.04;
  const int n = 24;
  std::vector<D2> profile{{0, 0}};
  for (int k = 0; k <= n; ++k) {
    const double t = static_cast<double>(k) / n;
    profile.push_back({smooth_curve(knots, t), t * height});
  }
  for (int k = n; k >= 0; --k) {
    const double t = floor + (1 - floor) * static_cast<double>(k) / n;
    profile.push_back({smooth_curve(knots, t) - wall, t * height});
  }
  profile.push_back({0, floor * height});
  return revolve(profile, kRound);
}

// Standing guitar, neck up: lower and upper bouts (two overlapping discs, the
// waist between them), neck, head, bridge. Bout sizes, their spacing, body
// depth, neck length vary.
Mesh make_guitar(Rng& rng) {
  const double lower = rng.uniform(0.17, 0.21);
  const double upper = lower * rng.uniform(0.7, 0.85);
  const double spacing = (lower + upper) * rng.uniform(0.55, 0.7);
  const double depth = rng.uniform(0.08, 0.12);
  const double neck_w = rng.uniform(0.045, 0.06), neck_len = rng.uniform(0.4, 0.5);
  const double head_len = rng.uniform(0.14, 0.2);
  // A disc facing +z: a short cylinder along y, turned so its axis is z.
  auto disc = [&](double radius, double y) {
    return translate(rotate_x(frustum(radius, radius, depth), kPi / 2), 0, y, -depth / 2);
  };
  Mesh m = labelled(disc(lower, lower), kGuitarBody);
  merge(m, labelled(disc(upper, lower + spacing), kGuitarBody));
  const double neck_y0 = lower + spacing + upper * 0.6;
  const double neck_t = depth * 0.35;
  merge(m, labelled(box({-neck_w / 2, neck_y0, depth / 2 - neck_t}, {neck_w / 2, neck_y0 + neck_len, depth / 2}),
                    kGuitarNeck));
  const double head_y0 = neck_y0 + neck_len;
  merge(m, labelled(box({-neck_w * 0.7, head_y0, depth / 2 - neck_t * 1.1},
                        {neck_w * 0.7, head_y0 + head_len, depth / 2 - neck_t * 0.1}),
                    kGuitarHead));
  merge(m, labelled(centred_box(0, lower * 0.55, depth / 2 + 0.005, lower * 0.8, lower * 0.12, 0.012), kGuitarBody));
  return m;
}

struct ShapeClass {
  const char* name;
  const char* description;
  Mesh (*make)(Rng&);
};

const std::vector<ShapeClass>& shape_classes() {
  static const std::vector<ShapeClass> classes{
      {"airplane", "fuselage, swept tapered wings, tail plane and fin; span, chords, sweep, wing height, engines vary",
       make_airplane},
      {"bottle", "solid bottle: body, rounded shoulder, narrow neck, lip; height and neck width and length vary",
       make_bottle},
      {"bowl", "open thin-walled bowl on a foot; depth (height/radius 0.4-0.75), wall, foot vary", make_bowl},
      {"box", "solid box, each side 0.5-1 of the longest", make_box},
      {"capsule", "upright capsule (hemispherical ends); height/diameter 1.6-3", make_capsule},
      {"chair", "seat, four legs, a back (panel or slats, tilt), optional arm rests; proportions vary", make_chair},
      {"cone", "solid cone; height/radius 1.5-3.5", make_cone},
      {"cylinder", "solid cylinder; height/radius 1.6-5", make_cylinder},
      {"guitar", "standing guitar: two bouts, neck, head, bridge; bout sizes, spacing, depth, neck length vary",
       make_guitar},
      {"lamp", "round base, pole, open frustum shade, bulb; pole height, shade size and taper vary", make_lamp},
      {"mug", "hollow cylinder with a C handle; height/radius 1.6-2.6, wall, handle size and height vary", make_mug},
      {"pyramid", "square pyramid; height/base 0.6-1.4, base aspect up to 1.25", make_pyramid},
      {"sphere", "sphere squashed by up to 12% along each axis", make_sphere},
      {"stool", "round seat on 3 or 4 splayed legs, optional rungs; height, splay vary", make_stool},
      {"table", "rectangular top on four legs (square or round), optional apron; width/depth/height vary", make_table},
      {"torus", "ring lying flat; major/minor radius 2.2-4.5", make_torus},
      {"vase", "open thin-walled vase, curved outline with belly, neck and flared mouth; knots vary", make_vase},
  };
  return classes;
}

// `key` names the setting the name came from ("classes"), if any.
const ShapeClass& find_class(const std::string& cls, const std::string& key = "") {
  for (const auto& c : shape_classes())
    if (cls == c.name) return c;
  std::string known;
  for (const auto& c : shape_classes()) known += (known.empty() ? "" : ", ") + std::string(c.name);
  const std::string problem = "unknown synthetic shape class '" + cls + "' (known: " + known + ")";
  if (key.empty()) throw UsageError(problem);
  throw ConfigError(key, ": " + problem);
}

// Splits every triangle in four at its edge midpoints (shared between the two
// faces of an edge, so a closed surface stays closed) until the mesh has at
// least kMinFaces: a shape with large flat faces (a pyramid) still gets
// vertices all over its surface. The geometry does not change.
constexpr size_t kMinFaces = 400;

Mesh densify(Mesh m) {
  while (m.faces.size() < kMinFaces) {
    std::unordered_map<uint64_t, int64_t> midpoint;  // edge (low, high) -> vertex
    auto middle = [&](int64_t a, int64_t b) {
      const uint64_t key = (static_cast<uint64_t>(std::min(a, b)) << 32) | static_cast<uint64_t>(std::max(a, b));
      auto it = midpoint.find(key);
      if (it != midpoint.end()) return it->second;
      const auto& p = m.vertices[a];
      const auto& q = m.vertices[b];
      const auto id = static_cast<int64_t>(m.vertices.size());
      m.vertices.push_back({(p[0] + q[0]) / 2, (p[1] + q[1]) / 2, (p[2] + q[2]) / 2});
      midpoint.emplace(key, id);
      return id;
    };
    std::vector<std::array<int64_t, 3>> faces;
    std::vector<int32_t> parts;
    for (size_t i = 0; i < m.faces.size(); ++i) {
      const auto& f = m.faces[i];
      const int64_t ab = middle(f[0], f[1]), bc = middle(f[1], f[2]), ca = middle(f[2], f[0]);
      faces.push_back({f[0], ab, ca});
      faces.push_back({ab, f[1], bc});
      faces.push_back({ca, bc, f[2]});
      faces.push_back({ab, bc, ca});
      if (!m.face_parts.empty()) parts.insert(parts.end(), 4, m.face_parts[i]);
    }
    m.faces = std::move(faces);
    m.face_parts = std::move(parts);
  }
  return m;
}

// Canonical pose: largest extent 1, bounding box centred on the y axis,
// standing on y = 0.
Mesh to_canonical_pose(Mesh m) {
  D3 lo{1e30, 1e30, 1e30}, hi{-1e30, -1e30, -1e30};
  for (const auto& v : m.vertices)
    for (int k = 0; k < 3; ++k) {
      lo[k] = std::min(lo[k], static_cast<double>(v[k]));
      hi[k] = std::max(hi[k], static_cast<double>(v[k]));
    }
  const double s = 1.0 / std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
  return affine(std::move(m), {{{s, 0, 0}, {0, s, 0}, {0, 0, s}}},
                {-s * (lo[0] + hi[0]) / 2, -s * lo[1], -s * (lo[2] + hi[2]) / 2});
}

std::string numbered_name(const std::string& cls, int64_t index) {
  char number[32];
  std::snprintf(number, sizeof number, "_%04lld.off", static_cast<long long>(index));
  return cls + number;
}

}  // namespace

std::vector<std::string> synth_shape_classes() {
  std::vector<std::string> names;
  for (const auto& c : shape_classes()) names.push_back(c.name);
  return names;
}

std::string synth_shape_description(const std::string& cls) { return find_class(cls).description; }

std::vector<std::string> synth_shape_part_names(const std::string& cls) {
  find_class(cls);
  if (cls == "airplane") return {"body", "wing", "tail", "engine"};
  if (cls == "chair") return {"back", "seat", "leg", "arm"};
  if (cls == "guitar") return {"head", "neck", "body"};
  if (cls == "lamp") return {"base", "shade", "bulb", "pole"};
  if (cls == "mug") return {"handle", "body"};
  if (cls == "table") return {"top", "leg", "support"};
  return {};
}

Mesh make_synth_shape(const std::string& cls, uint64_t seed) {
  const auto& c = find_class(cls);
  Rng rng(seed);
  return to_canonical_pose(densify(c.make(rng)));
}

uint64_t synth_shape_seed(uint64_t seed, const std::string& cls, int64_t index) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ fnv1a(cls));
  return splitmix64(h ^ static_cast<uint64_t>(index));
}

void check_synth_shapes_options(const SynthShapesOptions& options) {
  if (options.train_per_class < 0)
    throw ConfigError("train_per_class", std::to_string(options.train_per_class) + ": must be 0 or more");
  if (options.test_per_class < 0)
    throw ConfigError("test_per_class", std::to_string(options.test_per_class) + ": must be 0 or more");
  if (options.train_per_class + options.test_per_class == 0)
    throw ConfigError("train_per_class", "and {test_per_class} are both 0: nothing to write");
  std::set<std::string> seen;
  for (const auto& cls : options.classes.empty() ? synth_shape_classes() : options.classes) {
    find_class(cls, "classes");
    if (!seen.insert(cls).second) throw ConfigError("classes", ": '" + cls + "' is listed twice");
  }
}

SynthShapesSummary write_synth_shapes(const std::string& out_dir, const SynthShapesOptions& options) {
  namespace fs = std::filesystem;
  if (out_dir.empty()) throw UsageError("synth-shapes: the out folder is empty");
  check_synth_shapes_options(options);
  SynthShapesSummary summary;
  summary.out_dir = out_dir;
  summary.classes = options.classes.empty() ? synth_shape_classes() : options.classes;

  for (const auto& cls : summary.classes) {
    const int64_t total = options.train_per_class + options.test_per_class;
    for (const char* split : {"train", "test"}) make_directories((fs::path(out_dir) / cls / split).string());
    for (int64_t index = 1; index <= total; ++index) {
      const bool train = index <= options.train_per_class;
      const auto path = fs::path(out_dir) / cls / (train ? "train" : "test") / numbered_name(cls, index);
      stop_if_interrupted("writing " + path.string());
      write_off(path.string(), make_synth_shape(cls, synth_shape_seed(options.seed, cls, index)));
      (train ? summary.train_files : summary.test_files) += 1;
    }
  }

  std::string readme =
      "Synthetic shapes written by `qkv data synth-shapes`: procedural triangle meshes,\n"
      "no download. The layout is ModelNet40's OFF tree:\n"
      "  <class>/train/<class>_0001.off ... then <class>/test/, the numbering continuing.\n"
      "Canonical pose: y is up, each shape stands on the plane y = 0, its bounding box\n"
      "centred on the y axis, its largest extent 1. Proportions and details are random;\n"
      "rotations are not (that is for the data-set transforms).\n\n";
  readme += "seed: " + std::to_string(options.seed) + "\n";
  readme += "train per class: " + std::to_string(options.train_per_class) + "\n";
  readme += "test per class: " + std::to_string(options.test_per_class) + "\n";
  readme += "files: " + std::to_string(summary.files()) + "\n";
  readme += "classes: " + std::to_string(summary.classes.size()) + "\n";
  for (const auto& cls : summary.classes) readme += "  " + cls + ": " + find_class(cls).description + "\n";
  write_file_atomic((fs::path(out_dir) / "README.txt").string(), readme);
  return summary;
}

}  // namespace qkv::pointcloud
