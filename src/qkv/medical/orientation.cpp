#include "qkv/medical/orientation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qkv/core/errors.h"

namespace qkv::medical {
namespace {

using Mat4 = std::array<double, 16>;  // row-major, world = M * (i, j, k, 1)

// For each voxel axis c: the world axis it follows (perm[c]) and whether it
// runs towards the world axis's negative end (flip[c]). The permutation
// maximises the sum of |cosines| between voxel axes and world axes, so an
// oblique affine gets its nearest axis order.
struct AxisMap {
  std::array<int, 3> perm{0, 1, 2};
  std::array<bool, 3> flip{false, false, false};
};

AxisMap axis_map(const Mat4& m, const std::string& path) {
  std::array<double, 3> norm{};
  for (int c = 0; c < 3; ++c) {
    for (int r = 0; r < 3; ++r) norm[c] += m[4 * r + c] * m[4 * r + c];
    norm[c] = std::sqrt(norm[c]);
    if (!(norm[c] > 0) || !std::isfinite(norm[c]))
      throw DataError(path + ": its affine's voxel axis " + std::to_string(c) +
                      " has no direction (a singular or non-finite affine); it cannot be turned to RAS+");
  }
  AxisMap best;
  double best_score = -1;
  std::array<int, 3> perm{0, 1, 2};
  do {
    double score = 0;
    for (int c = 0; c < 3; ++c) score += std::abs(m[4 * perm[c] + c]) / norm[c];
    if (score > best_score) {
      best_score = score;
      best.perm = perm;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  for (int c = 0; c < 3; ++c) best.flip[c] = m[4 * best.perm[c] + c] < 0;
  return best;
}

// The affine of the reoriented grid: new axis w is old axis c (perm[c] = w),
// reversed where flip[c].
Mat4 reoriented_affine(const Mat4& m, const AxisMap& a, const std::array<int64_t, 3>& dims) {
  Mat4 out = m;
  for (int r = 0; r < 3; ++r) {
    double origin = m[4 * r + 3];
    for (int c = 0; c < 3; ++c) {
      const double sign = a.flip[c] ? -1.0 : 1.0;
      out[4 * r + a.perm[c]] = sign * m[4 * r + c];
      if (a.flip[c]) origin += m[4 * r + c] * static_cast<double>(dims[c] - 1);
    }
    out[4 * r + 3] = origin;
  }
  return out;
}

}  // namespace

std::string orientation_code(const NiftiGeometry& geometry, const std::string& source) {
  const Mat4 m = geometry.affine();
  const AxisMap a = axis_map(m, source);
  static const char positive[] = {'R', 'A', 'S'}, negative[] = {'L', 'P', 'I'};
  std::string code;
  for (int c = 0; c < 3; ++c) code += a.flip[c] ? negative[a.perm[c]] : positive[a.perm[c]];
  return code;
}

Volume reorient_to_ras(const Volume& v, const std::string& path) {
  const Mat4 m = v.geometry.affine();
  const AxisMap a = axis_map(m, path);
  // Permuting and flipping cannot straighten an oblique grid: "turned to
  // RAS+" it would still be turned. The largest angle between a voxel axis
  // and the world axis it is mapped to, against our tolerance.
  double worst = 0;
  for (int c = 0; c < 3; ++c) {
    double norm = 0;
    for (int r = 0; r < 3; ++r) norm += m[4 * r + c] * m[4 * r + c];
    const double cosine = std::min(1.0, std::abs(m[4 * a.perm[c] + c]) / std::sqrt(norm));
    worst = std::max(worst, std::acos(cosine) * 180.0 / M_PI);
  }
  if (worst > kMaxObliqueDegrees) {
    char angle[32];
    std::snprintf(angle, sizeof angle, "%.1f", worst);
    throw DataError(path + ": its voxel axes are turned " + angle +
                    " degrees from the world axes (an oblique grid); turning to RAS+ only permutes and flips axes, "
                    "it does not resample, so the volume would stay oblique; resample it to an axis-aligned grid");
  }
  Volume out;
  out.geometry = v.geometry;
  for (int c = 0; c < 3; ++c) {
    out.dims[a.perm[c]] = v.dims[c];
    out.geometry.spacing[a.perm[c]] = v.geometry.spacing[c];
  }
  if (v.geometry.sform_code > 0) out.geometry.sform = reoriented_affine(v.geometry.sform, a, v.dims);
  if (v.geometry.qform_code > 0) out.geometry.qform = reoriented_affine(v.geometry.qform, a, v.dims);
  if (v.geometry.sform_code <= 0 && v.geometry.qform_code <= 0) {
    // Spacing alone is RAS already: nothing moves.
    out.voxels = v.voxels;
    return out;
  }
  out.voxels.resize(v.voxels.size());
  // For each new index (x, y, z), the old index along each old axis c.
  for (int64_t k = 0; k < out.dims[2]; ++k)
    for (int64_t j = 0; j < out.dims[1]; ++j)
      for (int64_t i = 0; i < out.dims[0]; ++i) {
        const int64_t n[3] = {i, j, k};
        int64_t old[3];
        for (int c = 0; c < 3; ++c) {
          const int64_t along = n[a.perm[c]];
          old[c] = a.flip[c] ? v.dims[c] - 1 - along : along;
        }
        out.at(i, j, k) = v.at(old[0], old[1], old[2]);
      }
  return out;
}

}  // namespace qkv::medical
