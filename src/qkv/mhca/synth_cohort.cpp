#include "qkv/mhca/synth_cohort.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_set>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/parallel.h"
#include "qkv/data/cohort.h"
#include "qkv/data/nifti.h"

namespace qkv::mhca {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Mat4 = std::array<double, 16>;  // row-major affine, last row 0 0 0 1

constexpr const char* kAichaPath = "/usr/share/mricron/templates/AICHAmc.nii.gz";
constexpr std::array<int64_t, 3> kMniDims{91, 109, 91};
constexpr double kMniSpacing = 2.0;
constexpr double kFwhmMm = 8.0;
constexpr double kFwhmToSigma = 0.42466090014400953;  // 1 / (2 sqrt(2 ln 2))

// ---------------------------------------------------------------- random

// xoshiro256** seeded through splitmix64, with its own distributions: the
// standard library's are implementation-defined, and the files must be the
// same on every platform for a seed.
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Streams, so that adding a draw to one purpose does not shift another's.
enum class Stream : uint64_t { kCohort = 1, kSubject, kVolume, kSites, kMethylation };

class Rng {
 public:
  Rng(uint64_t seed, Stream stream, uint64_t index) {
    uint64_t x = seed;
    x = splitmix64(x) ^ static_cast<uint64_t>(stream);
    x = splitmix64(x) ^ index;
    for (auto& s : s_) s = splitmix64(x);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // [0, 1)
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  bool bernoulli(double p) { return uniform() < p; }
  // Unbiased integer in [0, n) by rejection.
  uint64_t below(uint64_t n) {
    const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
    uint64_t r;
    do r = next();
    while (r >= limit);
    return r % n;
  }
  // Marsaglia's polar method; the second value is kept for the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2 * uniform() - 1;
      v = 2 * uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    const double f = std::sqrt(-2 * std::log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }
  double normal(double mean, double sd) { return mean + sd * normal(); }
  double lognormal_factor(double sd_log) { return std::exp(sd_log * normal()); }
  // Knuth's product method for the small means of SPECT voxels; a rounded
  // normal above 30, where the two are indistinguishable at this noise level.
  int64_t poisson(double lambda) {
    if (lambda <= 0) return 0;
    if (lambda >= 30) return std::max<int64_t>(0, std::llround(lambda + std::sqrt(lambda) * normal()));
    const double limit = std::exp(-lambda);
    int64_t k = 0;
    double p = uniform();
    while (p > limit) {
      ++k;
      p *= uniform();
    }
    return k;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  double spare_ = 0;
};

double logit(double p) { return std::log(p / (1 - p)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

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

// Separable Gaussian with zeros beyond the grid (no activity outside the field
// of view). The y and z passes add whole shifted rows / slices, which keeps
// the inner loops contiguous and vectorised.
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

enum Tissue : uint8_t {
  kOutside = 0,
  kScalp,
  kCsf,
  kWhite,
  kGrey,
  kCaudateLeft,
  kCaudateRight,
  kPutamenLeft,
  kPutamenRight,
  kTissueCount
};

// Non-specific uptake relative to grey matter; striatal tissues are set per subject.
constexpr std::array<double, kTissueCount> kBaseUptake{0.0, 0.15, 0.35, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0};

int mask_label(uint8_t tissue) {
  switch (tissue) {
    case kCaudateLeft: return 1;
    case kCaudateRight: return 2;
    case kPutamenLeft: return 3;
    case kPutamenRight: return 4;
    default: return 0;
  }
}

// The anatomy every subject is drawn from, on the template's own grid.
struct Anatomy {
  std::array<int64_t, 3> dims{};
  Mat4 affine{};  // template voxel -> world (mm)
  std::vector<uint8_t> tissue;
  // World y of each putamen's anterior (max y) and posterior (min y) end; [0] left, [1] right.
  std::array<double, 2> putamen_front{}, putamen_back{};
  // t of every putamen voxel, per side: the region means of rem(t).
  std::array<std::vector<double>, 2> putamen_t;
  std::string source;  // atlas path or "ellipsoids"
  json regions = json::array();

  int64_t index(int64_t i, int64_t j, int64_t k) const { return i + dims[0] * (j + dims[1] * k); }

  // 0 at the anterior end of the putamen, 1 at the posterior end.
  double putamen_position(int side, double world_y) const {
    const double span = putamen_front[side] - putamen_back[side];
    if (span <= 0) return 0.5;
    return std::clamp((putamen_front[side] - world_y) / span, 0.0, 1.0);
  }
};

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
  a.affine = data::mni_2mm_geometry().sform;
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

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  const data::Volume atlas = data::read_nifti(path);
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

Anatomy load_anatomy(const std::string& atlas) {
  if (atlas == "none") return ellipsoid_anatomy();
  if (atlas == "auto") {
    std::error_code ec;
    return fs::is_regular_file(kAichaPath, ec) ? atlas_anatomy(kAichaPath) : ellipsoid_anatomy();
  }
  return atlas_anatomy(atlas);
}

// ---------------------------------------------------------------- grid

// The output grid, and the ~2 mm sub-grid a subject is rendered on before
// averaging down to it.
struct GridPlan {
  std::array<int64_t, 3> dims{}, factor{}, fine_dims{};
  data::NiftiGeometry geometry;
  Mat4 fine_to_anatomy{};  // sub-grid voxel -> anatomy voxel
  Mat4 world_to_anatomy{};
  std::array<double, 3> blur_sigma{};  // in sub-grid voxels
  double fine_voxel_mm3 = 8;

  int64_t fine_size() const { return fine_dims[0] * fine_dims[1] * fine_dims[2]; }
  int64_t size() const { return dims[0] * dims[1] * dims[2]; }
};

GridPlan make_plan(const std::array<int64_t, 3>& shape, const Anatomy& anatomy) {
  GridPlan plan;
  plan.dims = shape;
  const data::NiftiGeometry mni = data::mni_2mm_geometry();
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

// Tissue and putamen position of every sub-grid voxel, with the anatomy moved
// by shift_mm (nearest neighbour: labels cannot be interpolated).
void sample_anatomy(const Anatomy& anatomy, const GridPlan& plan, const std::array<double, 3>& shift_mm,
                    std::vector<uint8_t>& tissue, std::vector<float>& position) {
  tissue.assign(plan.fine_size(), kOutside);
  position.assign(plan.fine_size(), 0.0f);
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
        const uint8_t t = anatomy.tissue[anatomy.index(ai, aj, ak)];
        tissue[v] = t;
        if (t == kPutamenLeft || t == kPutamenRight) {
          const double world_y = apply(anatomy.affine, ai, aj, ak)[1];
          position[v] = static_cast<float>(anatomy.putamen_position(t == kPutamenLeft ? 0 : 1, world_y));
        }
      }
    }
}

// Majority label of each output voxel's sub-grid block; ties go to the lower
// label, so a voxel half striatum, half not, stays 0.
data::Volume striatum_mask(const Anatomy& anatomy, const GridPlan& plan) {
  std::vector<uint8_t> tissue;
  std::vector<float> position;
  sample_anatomy(anatomy, plan, {0, 0, 0}, tissue, position);
  data::Volume mask;
  mask.dims = plan.dims;
  mask.geometry = plan.geometry;
  mask.geometry.description = "qkv striatum mask: 1 L caudate 2 R caudate 3 L putamen 4 R putamen";
  mask.voxels.assign(plan.size(), 0.0f);
  const auto& fd = plan.fine_dims;
  for (int64_t k = 0; k < plan.dims[2]; ++k)
    for (int64_t j = 0; j < plan.dims[1]; ++j)
      for (int64_t i = 0; i < plan.dims[0]; ++i) {
        std::array<int64_t, 5> votes{};
        for (int64_t c = 0; c < plan.factor[2]; ++c)
          for (int64_t b = 0; b < plan.factor[1]; ++b)
            for (int64_t a = 0; a < plan.factor[0]; ++a) {
              const int64_t fi = i * plan.factor[0] + a, fj = j * plan.factor[1] + b, fk = k * plan.factor[2] + c;
              ++votes[mask_label(tissue[fi + fd[0] * (fj + fd[1] * fk)])];
            }
        mask.at(i, j, k) = static_cast<float>(std::max_element(votes.begin(), votes.end()) - votes.begin());
      }
  return mask;
}

// ---------------------------------------------------------------- subjects

constexpr double kCaudateSpecific = 2.0;  // BR 3.0
constexpr double kPutamenSpecific = 1.6;  // BR 2.6
constexpr double kCaudateLossPerSeverity = 0.5;
// Putamen loss s * (base + per_t * t): posterior first; at s = 1 the posterior
// third has no specific binding left.
constexpr double kPutamenLossBase = 0.6;
constexpr double kPutamenLossPerT = 0.6;
constexpr double kSeverityMean = 0.6, kSeveritySd = 0.25, kSeverityMin = 0.03, kSeverityMax = 1.0;
constexpr double kLessAffectedMin = 0.3, kLessAffectedMax = 0.85;
constexpr double kReferenceAge = 62;
constexpr double kAgeDeclinePerYear = 0.006;
constexpr double kCountsPer8mm3 = 2.0;
// Output values are multiples of 1 / kStoredSteps, like a scanner's integer
// counts: the step (0.4% of grey matter) is far below the noise, and gzip
// shrinks the volumes ~3x instead of ~1.4x.
constexpr double kStoredSteps = 256;
constexpr double kPutamenReferenceBr = 2.2;  // centre of the putamen-site regression
constexpr double kPutamenCohortSd = 0.45;    // nominal sd of mean putamen BR over a cohort

struct Subject {
  std::string id;
  int64_t label = 0;
  int64_t age = 0;
  bool female = false;
  double severity = 0;                                           // S; 0 for controls
  int affected_side = -1;                                        // 0 left, 1 right, -1 none
  std::array<double, 2> side_severity{};                         // s per hemisphere
  std::array<double, 2> caudate_specific{}, putamen_specific{};  // healthy-equivalent BR - 1
  std::array<double, 2> putamen_tilt{};
  std::array<double, 3> shift_mm{};
  double calibration = 1, count_level = 1;
  // Truth: region means of the unblurred binding ratio.
  std::array<double, 2> caudate_br{}, putamen_br{};

  double mean_putamen_br() const { return (putamen_br[0] + putamen_br[1]) / 2; }
  double caudate_level(int side) const {
    return 1 + caudate_specific[side] * (1 - kCaudateLossPerSeverity * side_severity[side]);
  }
  double putamen_level(int side, double t) const {
    const double rem = std::clamp(
        1 - side_severity[side] * (kPutamenLossBase + kPutamenLossPerT * t) - putamen_tilt[side] * (t - 0.5), 0.0, 1.5);
    return 1 + putamen_specific[side] * rem;
  }
};

std::string subject_id(int64_t index, int64_t count) {
  const int width = std::max<int>(4, static_cast<int>(std::to_string(count).size()));
  std::string digits = std::to_string(index + 1);
  return "sub-" + std::string(width - digits.size(), '0') + digits;
}

std::vector<Subject> draw_subjects(const SynthCohortOptions& o, const Anatomy& anatomy) {
  const int64_t n = o.subjects;
  const int64_t n_pd = std::llround(static_cast<double>(n) * o.pd_fraction);
  std::vector<int64_t> labels(n, 0);
  std::fill(labels.begin(), labels.begin() + n_pd, 1);
  Rng cohort(o.seed, Stream::kCohort, 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(labels[i], labels[cohort.below(i + 1)]);

  std::vector<Subject> subjects(n);
  for (int64_t idx = 0; idx < n; ++idx) {
    Subject& s = subjects[idx];
    Rng rng(o.seed, Stream::kSubject, idx);
    s.id = subject_id(idx, n);
    s.label = labels[idx];
    const bool pd = s.label == 1;
    s.age = std::llround(std::clamp(rng.normal(pd ? 63 : 61, 9), 35.0, 88.0));
    s.female = !rng.bernoulli(pd ? 0.66 : 0.62);
    const double subject_factor = rng.lognormal_factor(0.09);
    const double age_factor = std::max(0.5, 1 - kAgeDeclinePerYear * (static_cast<double>(s.age) - kReferenceAge));
    const double caudate = kCaudateSpecific * subject_factor * rng.lognormal_factor(0.04) * age_factor;
    const double putamen = kPutamenSpecific * subject_factor * rng.lognormal_factor(0.04) * age_factor;
    const double caudate_asym = rng.normal(0, 0.03), putamen_asym = rng.normal(0, 0.03);
    s.caudate_specific = {caudate * (1 + caudate_asym / 2), caudate * (1 - caudate_asym / 2)};
    s.putamen_specific = {putamen * (1 + putamen_asym / 2), putamen * (1 - putamen_asym / 2)};
    s.putamen_tilt = {rng.normal(0.05, 0.06), rng.normal(0.05, 0.06)};
    for (auto& x : s.shift_mm) x = rng.normal(0, 1.5);
    s.calibration = rng.lognormal_factor(0.15);
    s.count_level = rng.lognormal_factor(0.20);
    // Drawn for every subject and unused for controls, so that the stream is
    // consumed alike whatever the label.
    double severity;
    do severity = rng.normal(kSeverityMean, kSeveritySd);
    while (severity < kSeverityMin || severity > kSeverityMax);
    const int affected = rng.bernoulli(0.5) ? 0 : 1;
    const double other = rng.uniform(kLessAffectedMin, kLessAffectedMax);
    if (pd) {
      s.severity = severity;
      s.affected_side = affected;
      s.side_severity[affected] = severity;
      s.side_severity[1 - affected] = severity * other;
    }
    for (int side = 0; side < 2; ++side) {
      s.caudate_br[side] = s.caudate_level(side);
      double sum = 0;
      for (double t : anatomy.putamen_t[side]) sum += s.putamen_level(side, t);
      s.putamen_br[side] = sum / static_cast<double>(anatomy.putamen_t[side].size());
    }
  }
  return subjects;
}

// Per-thread buffers, reused across subjects.
struct Workspace {
  std::vector<uint8_t> tissue;
  std::vector<float> position, counts, scratch;
};

data::Volume render_subject(const Subject& s, int64_t index, const Anatomy& anatomy, const GridPlan& plan,
                            uint64_t seed, Workspace& ws) {
  sample_anatomy(anatomy, plan, s.shift_mm, ws.tissue, ws.position);
  const double counts_per_unit = kCountsPer8mm3 * plan.fine_voxel_mm3 / 8 * s.count_level;
  Rng rng(seed, Stream::kVolume, index);
  const int64_t n = plan.fine_size();
  ws.counts.assign(n, 0.0f);
  for (int64_t v = 0; v < n; ++v) {
    const uint8_t t = ws.tissue[v];
    double level;
    switch (t) {
      case kCaudateLeft: level = s.caudate_level(0); break;
      case kCaudateRight: level = s.caudate_level(1); break;
      case kPutamenLeft: level = s.putamen_level(0, ws.position[v]); break;
      case kPutamenRight: level = s.putamen_level(1, ws.position[v]); break;
      default: level = kBaseUptake[t];
    }
    ws.counts[v] = static_cast<float>(rng.poisson(level * counts_per_unit));
  }
  blur(ws.counts, plan.fine_dims, plan.blur_sigma, ws.scratch);

  data::Volume out;
  out.dims = plan.dims;
  out.geometry = plan.geometry;
  out.voxels.assign(plan.size(), 0.0f);
  const auto& fd = plan.fine_dims;
  const auto& m = plan.factor;
  const double scale = s.calibration / counts_per_unit / static_cast<double>(m[0] * m[1] * m[2]);
  for (int64_t k = 0; k < plan.dims[2]; ++k)
    for (int64_t j = 0; j < plan.dims[1]; ++j)
      for (int64_t i = 0; i < plan.dims[0]; ++i) {
        double sum = 0;
        for (int64_t c = 0; c < m[2]; ++c)
          for (int64_t b = 0; b < m[1]; ++b) {
            const float* row = ws.counts.data() + i * m[0] + fd[0] * ((j * m[1] + b) + fd[1] * (k * m[2] + c));
            for (int64_t a = 0; a < m[0]; ++a) sum += row[a];
          }
        out.at(i, j, k) = static_cast<float>(std::round(std::max(0.0, sum * scale) * kStoredSteps) / kStoredSteps);
      }
  return out;
}

// ---------------------------------------------------------------- methylation

enum class SiteKind { kBackground, kClass, kPutamen, kAge, kSex };

struct Site {
  SiteKind kind = SiteKind::kBackground;
  double mu = 0, sd = 0.3;   // logit mean (control / male / reference) and subject noise sd
  double class_shift = 0;    // added in PD
  double putamen_slope = 0;  // per unit of mean putamen BR above kPutamenReferenceBr
  double age_slope = 0;      // per year above kReferenceAge
  double female_shift = 0;
  double composition = 0;  // loading on the blood-composition factor, in logit units
  double effect = 0;       // standardized class effect d, or nominal putamen correlation
};

struct MethylationPlan {
  std::vector<std::string> ids;
  std::vector<Site> sites;
};

MethylationPlan plan_methylation(const SynthCohortOptions& o) {
  Rng rng(o.seed, Stream::kSites, 0);
  MethylationPlan plan;
  const int64_t n = o.cpg;
  std::unordered_set<uint32_t> used;
  std::vector<uint32_t> numbers;
  while (static_cast<int64_t>(numbers.size()) < n) {
    const auto x = static_cast<uint32_t>(rng.below(100000000));
    if (used.insert(x).second) numbers.push_back(x);
  }
  std::sort(numbers.begin(), numbers.end());
  for (uint32_t x : numbers) {
    std::string digits = std::to_string(x);
    plan.ids.push_back("cg" + std::string(8 - digits.size(), '0') + digits);
  }

  auto extreme_sd = [&] { return 0.3 * rng.lognormal_factor(0.35); };
  auto intermediate_sd = [&] { return 0.45 * rng.lognormal_factor(0.3); };
  plan.sites.resize(n);
  for (auto& site : plan.sites) {
    const double u = rng.uniform();
    if (u < 0.47) {
      site.mu = rng.normal(-2.6, 0.5);
      site.sd = extreme_sd();
    } else if (u < 0.85) {
      site.mu = rng.normal(1.9, 0.45);
      site.sd = extreme_sd();
    } else {
      site.mu = logit(rng.uniform(0.2, 0.75));
      site.sd = intermediate_sd();
    }
  }

  // Roles at random columns: a partial shuffle of the column order.
  std::vector<int64_t> order(n);
  for (int64_t j = 0; j < n; ++j) order[j] = j;
  int64_t next = 0;
  auto take = [&] {
    const int64_t pick = next + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - next)));
    std::swap(order[next], order[pick]);
    return order[next++];
  };
  for (int64_t c = 0; c < o.planted_class_sites; ++c) {
    Site& site = plan.sites[take()];
    site.kind = SiteKind::kClass;
    site.mu = logit(rng.uniform(0.2, 0.75));
    site.sd = intermediate_sd();
    site.effect = rng.uniform(0.3, 0.65);
    site.class_shift = (rng.bernoulli(0.5) ? 1 : -1) * site.effect * site.sd;
  }
  for (int64_t c = 0; c < o.planted_putamen_sites; ++c) {
    Site& site = plan.sites[take()];
    site.kind = SiteKind::kPutamen;
    site.mu = logit(rng.uniform(0.2, 0.75));
    site.sd = intermediate_sd();
    const double rho = rng.uniform(0.4, 0.7);
    site.effect = (rng.bernoulli(0.5) ? 1 : -1) * rho;
    site.putamen_slope = site.effect / std::sqrt(1 - rho * rho) * site.sd / kPutamenCohortSd;
  }
  const int64_t background = n - o.planted_class_sites - o.planted_putamen_sites;
  const int64_t per_nuisance = std::min<int64_t>(8, background / 20);
  for (int64_t c = 0; c < per_nuisance; ++c) {
    Site& site = plan.sites[take()];
    site.kind = SiteKind::kAge;
    site.age_slope = (rng.bernoulli(0.5) ? 1 : -1) * rng.uniform(0.02, 0.05);
  }
  for (int64_t c = 0; c < per_nuisance; ++c) {
    Site& site = plan.sites[take()];
    site.kind = SiteKind::kSex;
    site.mu = logit(rng.uniform(0.03, 0.07));
    site.sd = extreme_sd();
    site.female_shift = logit(rng.uniform(0.38, 0.5)) - site.mu;
  }
  for (auto& site : plan.sites) {
    if (site.kind != SiteKind::kBackground) continue;
    if (rng.bernoulli(0.1)) site.composition = (rng.bernoulli(0.5) ? 1 : -1) * rng.uniform(0.1, 0.4) * site.sd;
  }
  return plan;
}

void fill_methylation_row(const MethylationPlan& plan, const Subject& s, int64_t row, const SynthCohortOptions& o,
                          float* out) {
  Rng rng(o.seed, Stream::kMethylation, row);
  const double composition = rng.normal();
  const double putamen = s.mean_putamen_br() - kPutamenReferenceBr;
  const double age = static_cast<double>(s.age) - kReferenceAge;
  for (size_t j = 0; j < plan.sites.size(); ++j) {
    const Site& site = plan.sites[j];
    double x = site.mu + site.sd * rng.normal() + site.composition * composition;
    if (s.label == 1) x += site.class_shift;
    x += site.putamen_slope * putamen + site.age_slope * age;
    if (s.female) x += site.female_shift;
    // Four decimals, as array exports write beta-values.
    const double beta = std::round(sigmoid(x) * 1e4) / 1e4;
    out[j] = static_cast<float>(beta);
    if (o.missing_fraction > 0 && rng.bernoulli(o.missing_fraction)) out[j] = std::numeric_limits<float>::quiet_NaN();
  }
}

// ---------------------------------------------------------------- truth

const char* kind_name(SiteKind k) {
  switch (k) {
    case SiteKind::kClass: return "class";
    case SiteKind::kPutamen: return "putamen";
    case SiteKind::kAge: return "age";
    case SiteKind::kSex: return "sex";
    default: return "background";
  }
}

json side_pair(const std::array<double, 2>& v) { return {{"left", v[0]}, {"right", v[1]}}; }

json ground_truth(const SynthCohortOptions& o, const Anatomy& anatomy, const GridPlan& plan,
                  const std::vector<Subject>& subjects, const MethylationPlan& meth) {
  json truth;
  truth["generator"] = "qkv mhca synth";
  truth["seed"] = o.seed;
  truth["options"] = o.to_json();
  truth["atlas"] = {{"used", anatomy.source}, {"striatal_regions", anatomy.regions}};
  truth["grid"] = {{"shape", plan.dims},
                   {"spacing_mm", plan.geometry.spacing},
                   {"sform", plan.geometry.sform},
                   {"render_subgrid_factor", plan.factor}};
  truth["striatum_mask_labels"] = json::array({
      json{{"label", 1}, {"region", "left caudate"}},
      json{{"label", 2}, {"region", "right caudate"}},
      json{{"label", 3}, {"region", "left putamen"}},
      json{{"label", 4}, {"region", "right putamen"}},
  });
  truth["spect_model"] = {
      {"binding_ratio", "striatal / grey-matter concentration before blur (1 + specific binding)"},
      {"non_specific_uptake", {{"grey", 1.0}, {"white", 0.8}, {"csf", 0.35}, {"scalp", 0.15}, {"outside", 0.0}}},
      {"healthy_specific_binding", {{"caudate", kCaudateSpecific}, {"putamen", kPutamenSpecific}}},
      {"subject_factor_lognormal_sd", 0.09},
      {"region_factor_lognormal_sd", 0.04},
      {"age_decline_per_year", kAgeDeclinePerYear},
      {"reference_age", kReferenceAge},
      {"left_right_asymmetry_sd", 0.03},
      {"putamen_remaining",
       "clamp(1 - s*(loss_base + loss_per_t*t) - tilt*(t - 0.5), 0, 1.5); t 0 anterior .. 1 posterior"},
      {"putamen_loss", {{"loss_base", kPutamenLossBase}, {"loss_per_t", kPutamenLossPerT}}},
      {"putamen_tilt", "N(0.05, 0.06) per hemisphere, controls included"},
      {"caudate_remaining", "1 - caudate_loss_per_severity*s"},
      {"caudate_loss_per_severity", kCaudateLossPerSeverity},
      {"pd_severity",
       {{"distribution", "normal truncated to [min, max]"},
        {"mean", kSeverityMean},
        {"sd", kSeveritySd},
        {"min", kSeverityMin},
        {"max", kSeverityMax},
        {"less_affected_side", "s = S * U(less_affected_range)"},
        {"less_affected_range", {kLessAffectedMin, kLessAffectedMax}}}},
      {"misregistration_shift_mm_sd", 1.5},
      {"counts_per_8mm3_grey", kCountsPer8mm3},
      {"count_level_lognormal_sd", 0.20},
      {"fwhm_mm", kFwhmMm},
      {"calibration_lognormal_sd", 0.15},
  };
  truth["methylation_model"] = {
      {"scale", "logit(beta) = mu + sd*z + effects; beta rounded to 4 decimals"},
      {"background", "47% logit N(-2.6, 0.5), 38% logit N(1.9, 0.45), 15% beta U(0.2, 0.75)"},
      {"composition_factor", "N(0,1) per subject, loading +-U(0.1, 0.4)*sd on 10% of background sites"},
      {"class_sites", "logit shift +-d*sd in PD, d ~ U(0.3, 0.65)"},
      {"putamen_sites", "logit slope per unit of mean putamen BR, centred at 2.2, for correlation rho ~ U(0.4, 0.7)"},
      {"putamen_reference_br", kPutamenReferenceBr},
      {"missing_fraction", o.missing_fraction},
  };

  json informative = json::array(), nuisance = json::array();
  for (size_t j = 0; j < meth.sites.size(); ++j) {
    const Site& site = meth.sites[j];
    json entry{{"id", meth.ids[j]}, {"column", j}, {"kind", kind_name(site.kind)}, {"logit_sd", site.sd}};
    switch (site.kind) {
      case SiteKind::kClass:
        entry["control_mean_beta"] = sigmoid(site.mu);
        entry["direction"] = site.class_shift > 0 ? "higher in PD" : "lower in PD";
        entry["logit_shift"] = site.class_shift;
        entry["standardized_effect"] = site.effect;
        informative.push_back(entry);
        break;
      case SiteKind::kPutamen:
        entry["reference_beta"] = sigmoid(site.mu);
        entry["logit_slope_per_br"] = site.putamen_slope;
        entry["nominal_correlation"] = site.effect;
        informative.push_back(entry);
        break;
      case SiteKind::kAge:
        entry["reference_beta"] = sigmoid(site.mu);
        entry["logit_slope_per_year"] = site.age_slope;
        nuisance.push_back(entry);
        break;
      case SiteKind::kSex:
        entry["male_beta"] = sigmoid(site.mu);
        entry["female_beta"] = sigmoid(site.mu + site.female_shift);
        nuisance.push_back(entry);
        break;
      default: break;
    }
  }
  truth["informative_sites"] = informative;
  truth["nuisance_sites"] = nuisance;

  json people = json::array();
  for (const Subject& s : subjects) {
    people.push_back({
        {"id", s.id},
        {"label", s.label},
        {"affected_side", s.affected_side < 0 ? json(nullptr) : json(s.affected_side == 0 ? "left" : "right")},
        {"severity", s.severity},
        {"side_severity", side_pair(s.side_severity)},
        {"age", s.age},
        {"sex", s.female ? "F" : "M"},
        {"caudate_binding_ratio", side_pair(s.caudate_br)},
        {"putamen_binding_ratio", side_pair(s.putamen_br)},
        {"mean_putamen_binding_ratio", s.mean_putamen_br()},
        {"putamen_tilt", side_pair(s.putamen_tilt)},
        {"shift_mm", s.shift_mm},
        {"calibration", s.calibration},
        {"count_level", s.count_level},
    });
  }
  truth["subjects"] = people;
  return truth;
}

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

}  // namespace

void SynthCohortOptions::validate() const {
  auto fail = [](const std::string& message) { throw UsageError(message); };
  if (subjects < 2) fail("--subjects must be at least 2, got " + std::to_string(subjects));
  if (subjects > 1000000) fail("--subjects must be at most 1000000, got " + std::to_string(subjects));
  if (!(pd_fraction > 0 && pd_fraction < 1)) {
    std::ostringstream s;
    s << "--pd-fraction must be in (0, 1), got " << pd_fraction;
    fail(s.str());
  }
  const int64_t pd = std::llround(static_cast<double>(subjects) * pd_fraction);
  if (pd < 1 || pd > subjects - 1) {
    std::ostringstream s;
    s << "--pd-fraction " << pd_fraction << " of " << subjects << " subjects leaves "
      << (pd < 1 ? "no PD" : "no control") << " subject";
    fail(s.str());
  }
  if (planted_class_sites < 0) fail("--planted-class-sites must be >= 0, got " + std::to_string(planted_class_sites));
  if (planted_putamen_sites < 0) {
    fail("--planted-putamen-sites must be >= 0, got " + std::to_string(planted_putamen_sites));
  }
  const int64_t planted = planted_class_sites + planted_putamen_sites;
  if (cpg <= planted) {
    fail("--cpg must exceed the planted sites (" + std::to_string(planted) + "), got " + std::to_string(cpg));
  }
  if (cpg > 10000000) fail("--cpg must be at most 10000000, got " + std::to_string(cpg));
  if (static_cast<double>(cpg) * static_cast<double>(subjects) > 1e9) {
    fail("--cpg " + std::to_string(cpg) + " x --subjects " + std::to_string(subjects) +
         " is over 1e9 methylation cells");
  }
  for (int64_t d : shape) {
    if (d < 8 || d > 256) {
      fail("--shape sizes must be in [8, 256], got " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" +
           std::to_string(shape[2]));
    }
  }
  if (atlas.empty()) fail("--atlas must be auto, none or the path of a label NIfTI");
  if (!(missing_fraction >= 0 && missing_fraction <= 0.5)) {
    std::ostringstream s;
    s << "--missing-fraction must be in [0, 0.5], got " << missing_fraction;
    fail(s.str());
  }
  if (threads < 0) fail("--threads must be >= 0, got " + std::to_string(threads));
}

json SynthCohortOptions::to_json() const {
  return {{"subjects", subjects},
          {"pd_fraction", pd_fraction},
          {"cpg", cpg},
          {"shape", shape},
          {"atlas", atlas},
          {"planted_class_sites", planted_class_sites},
          {"planted_putamen_sites", planted_putamen_sites},
          {"missing_fraction", missing_fraction},
          {"seed", seed}};
}

json SynthCohortSummary::to_json() const {
  return {{"subjects", subjects},     {"pd", pd},      {"controls", controls}, {"cpg", cpg},
          {"atlas_used", atlas_used}, {"files", files}};
}

SynthCohortSummary write_synth_cohort(const std::string& out_dir, const SynthCohortOptions& options,
                                      const std::function<void(int64_t done, int64_t total)>& progress) {
  options.validate();
  if (out_dir.empty()) throw UsageError("--out must name a folder");
  {
    std::error_code ec;
    const auto status = fs::status(out_dir, ec);
    if (fs::exists(status)) {
      if (!fs::is_directory(status)) throw UsageError("--out " + out_dir + " exists and is not a folder");
      if (!fs::is_empty(out_dir, ec) || ec) throw UsageError("--out " + out_dir + " exists and is not empty");
    }
  }

  const Anatomy anatomy = load_anatomy(options.atlas);
  const GridPlan plan = make_plan(options.shape, anatomy);
  const std::vector<Subject> subjects = draw_subjects(options, anatomy);
  const MethylationPlan meth = plan_methylation(options);
  const int64_t workers = parallel_workers(options.subjects, options.threads);

  data::MethylationTable table;
  for (const auto& s : subjects) table.subject_ids.push_back(s.id);
  table.cpg_ids = meth.ids;
  table.values.resize(static_cast<size_t>(options.subjects * options.cpg));
  parallel_tasks(options.subjects, workers, [&](int64_t, int64_t row) {
    fill_methylation_row(meth, subjects[row], row, options, table.values.data() + row * options.cpg);
  });

  make_directories(join(out_dir, "spect"));
  SynthCohortSummary summary;
  summary.subjects = options.subjects;
  summary.cpg = options.cpg;
  summary.atlas_used = anatomy.source;
  for (const auto& s : subjects) (s.label == 1 ? summary.pd : summary.controls) += 1;

  std::vector<std::string> spect_files(subjects.size());
  for (size_t i = 0; i < subjects.size(); ++i) spect_files[i] = join(out_dir, "spect/" + subjects[i].id + ".nii.gz");
  std::vector<Workspace> workspaces(static_cast<size_t>(workers));
  // Worker 0 is the calling thread: it reports the volumes finished so far
  // after each of its own, and the rest at the end.
  std::atomic<int64_t> done{0};
  int64_t reported = 0;
  auto report = [&] {
    for (const int64_t now = done.load(); reported < now;) progress(++reported, options.subjects);
  };
  if (progress) progress(0, options.subjects);
  parallel_tasks(options.subjects, workers, [&](int64_t worker, int64_t i) {
    data::write_nifti(spect_files[i], render_subject(subjects[i], i, anatomy, plan, options.seed, workspaces[worker]));
    ++done;
    if (worker == 0 && progress) report();
  });
  if (progress) report();
  summary.files = spect_files;

  const std::string mask_path = join(out_dir, "striatum_mask.nii.gz");
  data::write_nifti(mask_path, striatum_mask(anatomy, plan));
  summary.files.push_back(mask_path);

  const std::string methylation_path = join(out_dir, "methylation.csv");
  data::write_methylation_table(methylation_path, table);
  summary.files.push_back(methylation_path);

  const std::string truth_path = join(out_dir, "ground_truth.json");
  write_file_atomic(truth_path, ground_truth(options, anatomy, plan, subjects, meth).dump(2) + "\n");
  summary.files.push_back(truth_path);

  data::Manifest manifest;
  for (const auto& s : subjects) {
    data::CohortSubject row;
    row.id = s.id;
    row.label = s.label;
    row.spect_path = "spect/" + s.id + ".nii.gz";
    row.covariates = {{"age", std::to_string(s.age)}, {"sex", s.female ? "F" : "M"}};
    manifest.subjects.push_back(row);
  }
  const std::string manifest_path = join(out_dir, "manifest.csv");
  data::write_manifest(manifest_path, manifest);
  summary.files.push_back(manifest_path);
  return summary;
}

}  // namespace qkv::mhca
