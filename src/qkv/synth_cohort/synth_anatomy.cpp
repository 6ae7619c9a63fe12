#include "qkv/synth_cohort/synth_anatomy.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"

namespace qkv::medical::synth {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kAichaPath = "/usr/share/mricron/templates/AICHAmc.nii.gz";
constexpr std::array<int64_t, 3> kMniDims{91, 109, 91};
constexpr double kMniSpacing = 2.0;
constexpr double kFwhmToSigma = 0.42466090014400953;  // 1 / (2 sqrt(2 ln 2))

// ---------------------------------------------------------------- affines

std::array<double, 3> apply(const Mat4& a, double i, double j, double k) {
  return {a[0] * i + a[1] * j + a[2] * k + a[3], a[4] * i + a[5] * j + a[6] * k + a[7],
          a[8] * i + a[9] * j + a[10] * k + a[11]};
}

Mat4 multiply(const Mat4& a, const Mat4& b) {
  Mat4 c{};
  for (int r = 0; r < 4; ++r)
    for (int col = 0; col < 4; ++col)
      for (int x = 0; x < 4; ++x) c[4 * r + col] += a[4 * r + x] * b[4 * x + col];
  return c;
}

Mat4 invert_affine(const Mat4& a, const std::string& what) {
  const double m00 = a[0], m01 = a[1], m02 = a[2], m10 = a[4], m11 = a[5], m12 = a[6], m20 = a[8], m21 = a[9],
               m22 = a[10];
  const double det = m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22 - m12 * m20) + m02 * (m10 * m21 - m11 * m20);
  if (!(std::abs(det) > 1e-12)) throw DataError(what + ": singular voxel-to-world affine");
  Mat4 inv{};
  inv[0] = (m11 * m22 - m12 * m21) / det;
  inv[1] = (m02 * m21 - m01 * m22) / det;
  inv[2] = (m01 * m12 - m02 * m11) / det;
  inv[4] = (m12 * m20 - m10 * m22) / det;
  inv[5] = (m00 * m22 - m02 * m20) / det;
  inv[6] = (m02 * m10 - m00 * m12) / det;
  inv[8] = (m10 * m21 - m11 * m20) / det;
  inv[9] = (m01 * m20 - m00 * m21) / det;
  inv[10] = (m00 * m11 - m01 * m10) / det;
  for (int r = 0; r < 3; ++r) inv[4 * r + 3] = -(inv[4 * r] * a[3] + inv[4 * r + 1] * a[7] + inv[4 * r + 2] * a[11]);
  inv[15] = 1;
  return inv;
}

// Length of column c of the linear part: the voxel size along that axis.
double column_norm(const Mat4& a, int c) { return std::hypot(a[c], a[4 + c], a[8 + c]); }

// ---------------------------------------------------------------- blur

std::vector<float> gaussian_kernel(double sigma) {
  if (sigma < 0.05) return {1.0f};
  const int radius = std::max(1, static_cast<int>(std::ceil(3.5 * sigma)));
  std::vector<double> w(2 * radius + 1);
  double sum = 0;
  for (int o = -radius; o <= radius; ++o) sum += w[o + radius] = std::exp(-0.5 * (o / sigma) * (o / sigma));
  std::vector<float> kernel(w.size());
  for (size_t o = 0; o < w.size(); ++o) kernel[o] = static_cast<float>(w[o] / sum);
  return kernel;
}

// ---------------------------------------------------------------- anatomy

int mask_label(uint8_t tissue) {
  switch (tissue) {
    case kCaudateLeft: return 1;
    case kCaudateRight: return 2;
    case kPutamenLeft: return 3;
    case kPutamenRight: return 4;
    default: return 0;
  }
}

// Interior voxels (unlabelled but enclosed by labels along all three axes)
// become white matter / CSF, and a shell around the brain becomes scalp: a
// grey-matter-only atlas would otherwise give a hollow brain.
void fill_brain_and_scalp(Anatomy& a) {
  const int64_t nx = a.dims[0], ny = a.dims[1], nz = a.dims[2];
  const int64_t n = nx * ny * nz;
  std::vector<uint8_t> enclosed(n, 0);
  const std::array<int64_t, 3> stride{1, nx, nx * ny};
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t len = a.dims[axis];
    const int a1 = (axis + 1) % 3, a2 = (axis + 2) % 3;
    for (int64_t u = 0; u < a.dims[a1]; ++u) {
      for (int64_t v = 0; v < a.dims[a2]; ++v) {
        const int64_t base = u * stride[a1] + v * stride[a2];
        int64_t first = -1, last = -1;
        for (int64_t t = 0; t < len; ++t) {
          if (a.tissue[base + t * stride[axis]] != kOutside) {
            if (first < 0) first = t;
            last = t;
          }
        }
        for (int64_t t = first; first >= 0 && t <= last; ++t) ++enclosed[base + t * stride[axis]];
      }
    }
  }
  for (int64_t v = 0; v < n; ++v)
    if (a.tissue[v] == kOutside && enclosed[v] == 3) a.tissue[v] = kWhite;

  std::vector<float> brain(n), scratch;
  for (int64_t v = 0; v < n; ++v) brain[v] = a.tissue[v] != kOutside ? 1.0f : 0.0f;
  constexpr double kScalpSigmaMm = 5.0;  // threshold 0.02 below reaches ~2 sigma out
  blur(brain, a.dims,
       {kScalpSigmaMm / column_norm(a.affine, 0), kScalpSigmaMm / column_norm(a.affine, 1),
        kScalpSigmaMm / column_norm(a.affine, 2)},
       scratch);
  for (int64_t v = 0; v < n; ++v)
    if (a.tissue[v] == kOutside && brain[v] >= 0.02f) a.tissue[v] = kScalp;
}

void finish_putamen(Anatomy& a, const std::string& what) {
  a.putamen_front = {-1e300, -1e300};
  a.putamen_back = {1e300, 1e300};
  std::array<int64_t, 4> counts{};
  for (int64_t k = 0; k < a.dims[2]; ++k)
    for (int64_t j = 0; j < a.dims[1]; ++j)
      for (int64_t i = 0; i < a.dims[0]; ++i) {
        const uint8_t t = a.tissue[a.index(i, j, k)];
        if (mask_label(t) > 0) ++counts[mask_label(t) - 1];
        if (t != kPutamenLeft && t != kPutamenRight) continue;
        const int side = t == kPutamenLeft ? 0 : 1;
        const double y = apply(a.affine, i, j, k)[1];
        a.putamen_front[side] = std::max(a.putamen_front[side], y);
        a.putamen_back[side] = std::min(a.putamen_back[side], y);
      }
  const char* names[] = {"left caudate", "right caudate", "left putamen", "right putamen"};
  for (int r = 0; r < 4; ++r)
    if (counts[r] == 0) throw DataError(what + ": no " + names[r] + " voxels (world x < 0 is left)");
  for (int64_t k = 0; k < a.dims[2]; ++k)
    for (int64_t j = 0; j < a.dims[1]; ++j)
      for (int64_t i = 0; i < a.dims[0]; ++i) {
        const uint8_t t = a.tissue[a.index(i, j, k)];
        if (t != kPutamenLeft && t != kPutamenRight) continue;
        const int side = t == kPutamenLeft ? 0 : 1;
        a.putamen_t[side].push_back(a.putamen_position(side, apply(a.affine, i, j, k)[1]));
      }
}

struct Ellipsoid {
  std::array<double, 3> centre, semi;
  bool contains(const std::array<double, 3>& p) const {
    double r2 = 0;
    for (int d = 0; d < 3; ++d) r2 += ((p[d] - centre[d]) / semi[d]) * ((p[d] - centre[d]) / semi[d]);
    return r2 <= 1;
  }
  double radius2(const std::array<double, 3>& p) const {
    double r2 = 0;
    for (int d = 0; d < 3; ++d) r2 += ((p[d] - centre[d]) / semi[d]) * ((p[d] - centre[d]) / semi[d]);
    return r2;
  }
};

Anatomy ellipsoid_anatomy() {
  Anatomy a;
  a.dims = kMniDims;
  a.affine = medical::mni_2mm_geometry().sform;
  a.source = "ellipsoids";
  const Ellipsoid brain{{0, -17, 12}, {68, 87, 62}};
  const Ellipsoid head{{0, -17, 12}, {80, 99, 74}};
  const std::array<double, 2> side_sign{-1, 1};  // left (x < 0), right
  std::vector<std::pair<Ellipsoid, uint8_t>> parts;
  for (int s = 0; s < 2; ++s) {
    const double x = side_sign[s];
    parts.push_back({{{x * 11, -18, 6}, {7, 10, 7}}, kGrey});  // thalamus
    parts.push_back({{{x * 8, -6, 16}, {4, 18, 7}}, kCsf});    // lateral ventricle
  }
  for (int s = 0; s < 2; ++s) {
    const double x = side_sign[s];
    const uint8_t caudate = s == 0 ? kCaudateLeft : kCaudateRight;
    const uint8_t putamen = s == 0 ? kPutamenLeft : kPutamenRight;
    parts.push_back({{{x * 13, 12, 9}, {5, 9, 8}}, caudate});    // caudate head
    parts.push_back({{{x * 16, -8, 19}, {4, 11, 5}}, caudate});  // caudate body
    parts.push_back({{{x * 25, 2, 0}, {6, 15, 9}}, putamen});
  }
  a.tissue.assign(a.dims[0] * a.dims[1] * a.dims[2], kOutside);
  for (int64_t k = 0; k < a.dims[2]; ++k)
    for (int64_t j = 0; j < a.dims[1]; ++j)
      for (int64_t i = 0; i < a.dims[0]; ++i) {
        const auto p = apply(a.affine, i, j, k);
        uint8_t t = kOutside;
        if (head.contains(p)) t = kScalp;
        const double r2 = brain.radius2(p);
        if (r2 <= 1) t = r2 >= 0.8 * 0.8 ? kGrey : kWhite;  // a grey rim around white matter
        for (const auto& [shape, tissue] : parts)
          if (shape.contains(p)) t = tissue;
        a.tissue[a.index(i, j, k)] = t;
      }
  finish_putamen(a, "ellipsoid anatomy");
  a.regions = json::array({
      json{{"structure", "caudate head"}, {"centre_mm", {13, 12, 9}}, {"semi_axes_mm", {5, 9, 8}}},
      json{{"structure", "caudate body"}, {"centre_mm", {16, -8, 19}}, {"semi_axes_mm", {4, 11, 5}}},
      json{{"structure", "putamen"}, {"centre_mm", {25, 2, 0}}, {"semi_axes_mm", {6, 15, 9}}},
  });
  return a;
}

// MRIcron names the list after the image with ".txt" added to the .nii name
// (AICHAmc.nii.gz -> AICHAmc.nii.txt); FSL-style lists drop the extension.
std::string label_list_path(const std::string& atlas) {
  std::vector<std::string> candidates;
  std::string stem = atlas;
  if (ends_with(stem, ".gz")) stem.resize(stem.size() - 3);
  candidates.push_back(stem + ".txt");
  if (ends_with(stem, ".nii")) candidates.push_back(stem.substr(0, stem.size() - 4) + ".txt");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c;
  }
  std::string tried;
  for (const auto& c : candidates) tried += (tried.empty() ? "" : " or ") + c;
  throw DataError(atlas + ": no label list next to it (looked for " + tried + ")");
}

std::map<int64_t, std::string> read_label_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError(path + ": cannot open");
  std::map<int64_t, std::string> labels;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream fields(line);
    std::string index_text, name;
    if (!(fields >> index_text)) continue;  // blank line
    size_t used = 0;
    int64_t index = 0;
    try {
      index = std::stoll(index_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != index_text.size() || !(fields >> name)) {
      throw DataError(path + ": line " + std::to_string(number) + ": expected \"<index> <name> <value>\"");
    }
    labels[index] = name;
  }
  if (labels.empty()) throw DataError(path + ": no labels");
  return labels;
}

Anatomy atlas_anatomy(const std::string& path) {
  const medical::Volume atlas = medical::read_nifti(path);
  const std::string list_path = label_list_path(path);
  const auto names = read_label_list(list_path);
  std::map<int64_t, uint8_t> striatal;  // label -> 0 caudate, 1 putamen
  Anatomy a;
  a.source = path;
  for (const auto& [index, name] : names) {
    const std::string l = lower(name);
    const bool caudate = l.find("caudate") != std::string::npos;
    const bool putamen = l.find("putamen") != std::string::npos;
    if (!caudate && !putamen) continue;
    striatal[index] = caudate ? 0 : 1;
    a.regions.push_back({{"index", index}, {"name", name}, {"structure", caudate ? "caudate" : "putamen"}});
  }
  bool any_caudate = false, any_putamen = false;
  for (const auto& [index, kind] : striatal) (kind == 0 ? any_caudate : any_putamen) = true;
  if (!any_caudate || !any_putamen) {
    throw DataError(list_path + ": no region named " + std::string(!any_caudate ? "Caudate" : "Putamen") +
                    " (the striatum is found by name)");
  }

  a.dims = atlas.dims;
  a.affine = atlas.geometry.affine();
  invert_affine(a.affine, path);  // checked here so that a bad file is named
  a.tissue.assign(atlas.voxels.size(), kOutside);
  for (int64_t k = 0; k < a.dims[2]; ++k)
    for (int64_t j = 0; j < a.dims[1]; ++j)
      for (int64_t i = 0; i < a.dims[0]; ++i) {
        const int64_t v = a.index(i, j, k);
        const double value = atlas.voxels[v];
        const double label = std::round(value);
        if (std::abs(value - label) > 1e-3) {
          throw DataError(path + ": voxel (" + std::to_string(i) + ", " + std::to_string(j) + ", " + std::to_string(k) +
                          ") holds " + std::to_string(value) + ", not an integer label: not a label atlas");
        }
        if (label == 0) continue;
        const auto it = striatal.find(static_cast<int64_t>(label));
        if (it == striatal.end()) {
          a.tissue[v] = kGrey;
          continue;
        }
        const bool left = apply(a.affine, i, j, k)[0] < 0;
        a.tissue[v] = it->second == 0 ? (left ? kCaudateLeft : kCaudateRight) : (left ? kPutamenLeft : kPutamenRight);
      }
  fill_brain_and_scalp(a);
  finish_putamen(a, path);
  return a;
}

}  // namespace

// ---------------------------------------------------------------- blur

void blur(std::vector<float>& data, const std::array<int64_t, 3>& dims, const std::array<double, 3>& sigma,
          std::vector<float>& scratch) {
  const int64_t nx = dims[0], ny = dims[1], nz = dims[2];
  scratch.resize(data.size());
  {
    const auto kernel = gaussian_kernel(sigma[0]);
    const int64_t r = static_cast<int64_t>(kernel.size()) / 2;
    if (r > 0) {
      std::vector<float> padded(nx + 2 * r, 0.0f);
      for (int64_t row = 0; row < ny * nz; ++row) {
        float* line = data.data() + row * nx;
        std::copy(line, line + nx, padded.begin() + r);
        for (int64_t i = 0; i < nx; ++i) {
          float acc = 0;
          for (size_t o = 0; o < kernel.size(); ++o) acc += kernel[o] * padded[i + o];
          line[i] = acc;
        }
      }
    }
  }
  // Adds kernel-weighted copies of `count` blocks of `block` floats, shifted
  // along the blocks' axis, into scratch; then swaps.
  auto pass = [&](const std::vector<float>& kernel, int64_t outer, int64_t count, int64_t block) {
    const int64_t r = static_cast<int64_t>(kernel.size()) / 2;
    if (r == 0) return;
    std::fill(scratch.begin(), scratch.end(), 0.0f);
    for (int64_t o = 0; o < outer; ++o) {
      const float* in = data.data() + o * count * block;
      float* out = scratch.data() + o * count * block;
      for (int64_t b = 0; b < count; ++b) {
        float* dst = out + b * block;
        for (int64_t t = -r; t <= r; ++t) {
          const int64_t src_b = b + t;
          if (src_b < 0 || src_b >= count) continue;
          const float w = kernel[t + r];
          const float* src = in + src_b * block;
          for (int64_t x = 0; x < block; ++x) dst[x] += w * src[x];
        }
      }
    }
    data.swap(scratch);
  };
  pass(gaussian_kernel(sigma[1]), nz, ny, nx);
  pass(gaussian_kernel(sigma[2]), 1, nz, nx * ny);
}

// ---------------------------------------------------------------- anatomy

Anatomy load_anatomy(const std::string& atlas) {
  if (atlas == "none") return ellipsoid_anatomy();
  if (atlas == "auto") {
    std::error_code ec;
    return fs::is_regular_file(kAichaPath, ec) ? atlas_anatomy(kAichaPath) : ellipsoid_anatomy();
  }
  return atlas_anatomy(atlas);
}

// ---------------------------------------------------------------- grid

GridPlan make_plan(const std::array<int64_t, 3>& shape, const Anatomy& anatomy) {
  GridPlan plan;
  plan.dims = shape;
  const medical::NiftiGeometry mni = medical::mni_2mm_geometry();
  const Mat4& a = mni.sform;
  // Output voxel i covers MNI-grid voxels [f i - 1/2, f (i + 1) - 1/2], f = 91 / nx:
  // the same field of view, voxel edges included.
  Mat4 target = a;
  std::array<double, 3> f{};
  for (int c = 0; c < 3; ++c) f[c] = static_cast<double>(kMniDims[c]) / static_cast<double>(shape[c]);
  for (int r = 0; r < 3; ++r) {
    double offset = a[4 * r + 3];
    for (int c = 0; c < 3; ++c) {
      target[4 * r + c] = a[4 * r + c] * f[c];
      offset += a[4 * r + c] * (f[c] - 1) / 2;
    }
    target[4 * r + 3] = offset;
  }
  plan.geometry = mni;
  plan.geometry.sform = target;
  plan.geometry.qform = target;
  for (int c = 0; c < 3; ++c) plan.geometry.spacing[c] = kMniSpacing * f[c];
  plan.geometry.description = "qkv synthetic DaT-SPECT";

  Mat4 fine_to_target{};
  for (int c = 0; c < 3; ++c) {
    plan.factor[c] = std::max<int64_t>(1, std::llround(f[c]));
    plan.fine_dims[c] = shape[c] * plan.factor[c];
    const double m = static_cast<double>(plan.factor[c]);
    fine_to_target[5 * c] = 1 / m;
    fine_to_target[4 * c + 3] = 0.5 / m - 0.5;
  }
  fine_to_target[15] = 1;
  const Mat4 fine = multiply(target, fine_to_target);
  plan.world_to_anatomy = invert_affine(anatomy.affine, anatomy.source);
  plan.fine_to_anatomy = multiply(plan.world_to_anatomy, fine);
  plan.fine_voxel_mm3 = 1;
  for (int c = 0; c < 3; ++c) {
    const double spacing = column_norm(fine, c);
    plan.blur_sigma[c] = kFwhmMm * kFwhmToSigma / spacing;
    plan.fine_voxel_mm3 *= spacing;
  }
  return plan;
}

void sample_anatomy(const Anatomy& anatomy, const GridPlan& plan, const std::array<double, 3>& shift_mm,
                    std::vector<uint8_t>& tissue, std::vector<float>& position, std::vector<uint8_t>* regions) {
  tissue.assign(plan.fine_size(), kOutside);
  position.assign(plan.fine_size(), 0.0f);
  const bool with_regions = regions != nullptr && !anatomy.cross_modal.empty();
  if (regions) regions->assign(with_regions ? plan.fine_size() : 0, 0);
  const Mat4& m = plan.fine_to_anatomy;
  const Mat4& w = plan.world_to_anatomy;
  // Moving the anatomy by +shift samples it at world point p - shift.
  std::array<double, 3> d{};
  for (int r = 0; r < 3; ++r) d[r] = w[4 * r] * shift_mm[0] + w[4 * r + 1] * shift_mm[1] + w[4 * r + 2] * shift_mm[2];
  const auto& fd = plan.fine_dims;
  const auto& ad = anatomy.dims;
  int64_t v = 0;
  for (int64_t k = 0; k < fd[2]; ++k)
    for (int64_t j = 0; j < fd[1]; ++j) {
      const auto base = apply(m, 0, static_cast<double>(j), static_cast<double>(k));
      for (int64_t i = 0; i < fd[0]; ++i, ++v) {
        const double x = base[0] + m[0] * i - d[0], y = base[1] + m[4] * i - d[1], z = base[2] + m[8] * i - d[2];
        const int64_t ai = static_cast<int64_t>(std::floor(x + 0.5));
        const int64_t aj = static_cast<int64_t>(std::floor(y + 0.5));
        const int64_t ak = static_cast<int64_t>(std::floor(z + 0.5));
        if (ai < 0 || aj < 0 || ak < 0 || ai >= ad[0] || aj >= ad[1] || ak >= ad[2]) continue;
        const int64_t a = anatomy.index(ai, aj, ak);
        const uint8_t t = anatomy.tissue[a];
        tissue[v] = t;
        if (with_regions) (*regions)[v] = anatomy.cross_modal[a];
        if (t == kPutamenLeft || t == kPutamenRight) {
          const double world_y = apply(anatomy.affine, ai, aj, ak)[1];
          position[v] = static_cast<float>(anatomy.putamen_position(t == kPutamenLeft ? 0 : 1, world_y));
        }
      }
    }
}

namespace {

// Each output voxel's majority label among its sub-grid block's `labels`
// (values < classes); ties go to the lower label. With min_share > 0, the
// most frequent non-zero label instead, when it fills at least that share of
// the block (regions smaller than a coarse voxel still get one).
medical::Volume majority_labels(const std::vector<uint8_t>& labels, int classes, const GridPlan& plan,
                                const std::string& description, double min_share = 0) {
  medical::Volume mask;
  mask.dims = plan.dims;
  mask.geometry = plan.geometry;
  mask.geometry.description = description;
  mask.voxels.assign(plan.size(), 0.0f);
  const auto& fd = plan.fine_dims;
  std::vector<int64_t> votes(static_cast<size_t>(classes));
  const double block = static_cast<double>(plan.factor[0] * plan.factor[1] * plan.factor[2]);
  for (int64_t k = 0; k < plan.dims[2]; ++k)
    for (int64_t j = 0; j < plan.dims[1]; ++j)
      for (int64_t i = 0; i < plan.dims[0]; ++i) {
        std::fill(votes.begin(), votes.end(), 0);
        for (int64_t c = 0; c < plan.factor[2]; ++c)
          for (int64_t b = 0; b < plan.factor[1]; ++b)
            for (int64_t a = 0; a < plan.factor[0]; ++a) {
              const int64_t fi = i * plan.factor[0] + a, fj = j * plan.factor[1] + b, fk = k * plan.factor[2] + c;
              ++votes[labels[fi + fd[0] * (fj + fd[1] * fk)]];
            }
        int64_t label;
        if (min_share > 0) {
          label = std::max_element(votes.begin() + 1, votes.end()) - votes.begin();
          if (static_cast<double>(votes[label]) < min_share * block) label = 0;
        } else {
          label = std::max_element(votes.begin(), votes.end()) - votes.begin();
        }
        mask.at(i, j, k) = static_cast<float>(label);
      }
  return mask;
}

}  // namespace

medical::Volume striatum_mask(const Anatomy& anatomy, const GridPlan& plan) {
  std::vector<uint8_t> tissue;
  std::vector<float> position;
  sample_anatomy(anatomy, plan, {0, 0, 0}, tissue, position);
  for (auto& t : tissue) t = static_cast<uint8_t>(mask_label(t));
  return majority_labels(tissue, 5, plan, "qkv striatum mask: 1 L caudate 2 R caudate 3 L putamen 4 R putamen");
}

medical::Volume cross_modal_mask(const Anatomy& anatomy, const GridPlan& plan) {
  std::vector<uint8_t> tissue, regions;
  std::vector<float> position;
  sample_anatomy(anatomy, plan, {0, 0, 0}, tissue, position, &regions);
  if (regions.empty()) regions.assign(plan.fine_size(), 0);
  return majority_labels(regions, kCrossModalRegions + 1, plan,
                         "qkv cross-modal regions: 1 L frontal 2 R frontal 3 L parietal 4 R parietal", 0.25);
}

void mark_cross_modal_regions(Anatomy& a) {
  a.cross_modal.assign(a.tissue.size(), 0);
  std::array<int64_t, kCrossModalRegions> counts{};
  for (int64_t k = 0; k < a.dims[2]; ++k)
    for (int64_t j = 0; j < a.dims[1]; ++j)
      for (int64_t i = 0; i < a.dims[0]; ++i) {
        const int64_t v = a.index(i, j, k);
        const uint8_t t = a.tissue[v];
        if (t != kGrey && t != kWhite && t != kCsf) continue;
        const auto p = apply(a.affine, static_cast<double>(i), static_cast<double>(j), static_cast<double>(k));
        for (int r = 0; r < kCrossModalRegions; ++r) {
          const auto& c = kCrossModalRegionList[r].centre_mm;
          const double d2 =
              (p[0] - c[0]) * (p[0] - c[0]) + (p[1] - c[1]) * (p[1] - c[1]) + (p[2] - c[2]) * (p[2] - c[2]);
          if (d2 <= kCrossModalRadiusMm * kCrossModalRadiusMm) {
            a.cross_modal[v] = static_cast<uint8_t>(r + 1);
            ++counts[r];
          }
        }
      }
  for (int r = 0; r < kCrossModalRegions; ++r)
    if (counts[r] == 0)
      throw DataError(a.source + ": no brain tissue within " + std::to_string(static_cast<int>(kCrossModalRadiusMm)) +
                      " mm of the " + kCrossModalRegionList[r].name + " cross-modal region's centre");
}

}  // namespace qkv::medical::synth
