#include "qkv/pointcloud/sampling.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/splitmix64.h"

namespace qkv::pointcloud {
namespace {

// Our own mapping to [0, 1): std::uniform_real_distribution's output is not
// specified bit for bit across standard libraries.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform in [0, n) without modulo bias.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t r;
  do r = rng();
  while (r >= limit);
  return r % n;
}

SampledPoints sample_cloud(const Mesh& mesh, int64_t n, std::mt19937_64& rng) {
  const auto count = static_cast<int64_t>(mesh.vertices.size());
  std::vector<int64_t> pick(static_cast<size_t>(std::max(count, n)));
  std::iota(pick.begin(), pick.begin() + count, int64_t{0});
  if (count >= n) {
    for (int64_t i = 0; i < n; ++i)  // the first n steps of a Fisher-Yates shuffle
      std::swap(
          pick[static_cast<size_t>(i)],
          pick[static_cast<size_t>(i + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(count - i))))]);
  } else {
    for (int64_t i = count; i < n; ++i)
      pick[static_cast<size_t>(i)] = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(count)));
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(pick[static_cast<size_t>(i)], pick[uniform_below(rng, static_cast<uint64_t>(i + 1))]);
  }
  SampledPoints out;
  out.points = torch::empty({n, 3}, torch::kFloat);
  out.indices = torch::from_blob(pick.data(), {n}, torch::kLong).clone();
  auto* p = out.points.data_ptr<float>();
  float* q = nullptr;
  if (mesh.has_normals()) {
    out.normals = torch::empty({n, 3}, torch::kFloat);
    q = out.normals.data_ptr<float>();
  }
  for (int64_t i = 0; i < n; ++i) {
    const auto s = static_cast<size_t>(pick[static_cast<size_t>(i)]);
    for (int c = 0; c < 3; ++c) {
      p[3 * i + c] = mesh.vertices[s][static_cast<size_t>(c)];
      if (q) q[3 * i + c] = mesh.normals[s][static_cast<size_t>(c)];
    }
  }
  return out;
}

}  // namespace

uint64_t seed_mix(uint64_t seed, uint64_t index) { return splitmix64(splitmix64(seed) + index); }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void check_point_cloud_extent(const std::vector<Vec3>& points, const std::string& source) {
  const std::string where = source.empty() ? "" : source + ": ";
  if (points.empty()) throw DataError(where + "no points");
  Vec3 lo = points[0], hi = points[0];
  for (const auto& v : points)
    for (int a = 0; a < 3; ++a) {
      if (!std::isfinite(v[a])) throw DataError(where + "a coordinate is not finite");
      lo[a] = std::min(lo[a], v[a]);
      hi[a] = std::max(hi[a], v[a]);
    }
  // One point, or every point the same, cannot be scaled to the unit sphere:
  // a model would see the same nothing whatever the file held.
  if (lo == hi)
    throw DataError(where +
                    (points.size() == 1 ? std::string("only 1 point")
                                        : "all " + std::to_string(points.size()) + " points are the same point") +
                    "; a shape needs points that span some extent");
}

SampledPoints sample_surface(const Mesh& mesh, int64_t n, uint64_t seed, const std::string& source) {
  const std::string where = source.empty() ? "" : source + ": ";
  if (n < 0) throw UsageError("sample_surface: n must be >= 0 (got " + std::to_string(n) + ")");
  if (mesh.vertices.empty()) throw DataError(where + "no vertices to sample from");
  if (mesh.has_normals() && mesh.normals.size() != mesh.vertices.size())
    throw DataError(where + std::to_string(mesh.normals.size()) + " normals for " +
                    std::to_string(mesh.vertices.size()) + " vertices");
  std::mt19937_64 rng(seed);
  if (mesh.is_point_cloud()) {
    check_point_cloud_extent(mesh.vertices, source);
    return sample_cloud(mesh, n, rng);
  }

  const auto n_vertices = static_cast<int64_t>(mesh.vertices.size());
  const size_t n_faces = mesh.faces.size();
  // 8 bytes a face (the running area); the unit normal is made again for the
  // faces drawn, not kept for every face: a mesh's triangles may come 12 to
  // a byte of the file (a polygon of millions of corners, fanned).
  std::vector<double> cumulative(n_faces);
  const auto cross_of = [&](size_t f, double cross[3]) {
    const auto& a = mesh.vertices[static_cast<size_t>(mesh.faces[f][0])];
    const auto& b = mesh.vertices[static_cast<size_t>(mesh.faces[f][1])];
    const auto& c = mesh.vertices[static_cast<size_t>(mesh.faces[f][2])];
    const double u[3] = {double(b[0]) - a[0], double(b[1]) - a[1], double(b[2]) - a[2]};
    const double v[3] = {double(c[0]) - a[0], double(c[1]) - a[1], double(c[2]) - a[2]};
    cross[0] = u[1] * v[2] - u[2] * v[1];
    cross[1] = u[2] * v[0] - u[0] * v[2];
    cross[2] = u[0] * v[1] - u[1] * v[0];
    return std::sqrt(cross[0] * cross[0] + cross[1] * cross[1] + cross[2] * cross[2]);
  };
  double total = 0;
  for (size_t f = 0; f < n_faces; ++f) {
    for (int64_t i : mesh.faces[f])
      if (i < 0 || i >= n_vertices)
        throw DataError(where + "face " + std::to_string(f) + " refers to vertex " + std::to_string(i) + " of " +
                        std::to_string(n_vertices));
    double cross[3];
    const double norm = cross_of(f, cross);
    if (!std::isfinite(norm))
      throw DataError(where + "face " + std::to_string(f) + " has a coordinate that is not finite");
    total += 0.5 * norm;
    cumulative[f] = total;
  }
  if (!(total > 0)) throw DataError(where + "mesh has zero surface area (every face is degenerate)");
  size_t last_positive = n_faces - 1;
  while (last_positive > 0 && !(cumulative[last_positive] > cumulative[last_positive - 1])) --last_positive;

  SampledPoints out;
  out.points = torch::empty({n, 3}, torch::kFloat);
  out.normals = torch::empty({n, 3}, torch::kFloat);
  out.faces = torch::empty({n}, torch::kLong);
  auto* face_of = out.faces.data_ptr<int64_t>();
  auto* p = out.points.data_ptr<float>();
  auto* q = out.normals.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    // upper_bound never lands on a zero-area face: its cumulative equals the one before.
    size_t f = static_cast<size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), uniform01(rng) * total) -
                                   cumulative.begin());
    if (f >= n_faces) f = last_positive;
    face_of[i] = static_cast<int64_t>(f);
    const auto& a = mesh.vertices[static_cast<size_t>(mesh.faces[f][0])];
    const auto& b = mesh.vertices[static_cast<size_t>(mesh.faces[f][1])];
    const auto& c = mesh.vertices[static_cast<size_t>(mesh.faces[f][2])];
    // Uniform on the triangle: sqrt of the first draw undoes the crowding toward vertex a.
    const double s = std::sqrt(uniform01(rng));
    const double t = uniform01(rng);
    const double wa = 1 - s, wb = s * (1 - t), wc = s * t;
    double cross[3];
    const double norm = cross_of(f, cross);  // > 0: a drawn face has area
    for (size_t k = 0; k < 3; ++k) {
      p[3 * i + static_cast<int64_t>(k)] = static_cast<float>(wa * a[k] + wb * b[k] + wc * c[k]);
      q[3 * i + static_cast<int64_t>(k)] = static_cast<float>(cross[k] / norm);
    }
  }
  return out;
}

}  // namespace qkv::pointcloud
