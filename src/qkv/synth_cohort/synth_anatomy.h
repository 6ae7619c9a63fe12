#pragma once
// The synthetic cohort's anatomy (ellipsoids or a label atlas), the output
// grid with the ~2 mm sub-grid subjects are rendered on, the striatum mask,
// and the Gaussian blur of the acquisition model. Internal to
// write_synth_cohort (qkv/synth_cohort/synth_cohort.h is the public face and
// documents the model).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/medical/nifti.h"

namespace qkv::medical::synth {

using Mat4 = std::array<double, 16>;  // row-major affine, last row 0 0 0 1

constexpr double kFwhmMm = 8.0;  // resolution of the acquisition (blur FWHM)

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
  nlohmann::json regions = nlohmann::json::array();
  // Cross-modal region (1 .. kCrossModalRegions) of every template voxel, 0
  // outside them; empty unless the cohort has cross-modal sites.
  std::vector<uint8_t> cross_modal;

  int64_t index(int64_t i, int64_t j, int64_t k) const { return i + dims[0] * (j + dims[1] * k); }

  // 0 at the anterior end of the putamen, 1 at the posterior end.
  double putamen_position(int side, double world_y) const {
    const double span = putamen_front[side] - putamen_back[side];
    if (span <= 0) return 0.5;
    return std::clamp((putamen_front[side] - world_y) / span, 0.0, 1.0);
  }
};

// The cross-modal benchmark's regions (`mhca synth --cross-modal-sites`):
// spheres of brain tissue, one per lobe and side, whose uptake is scaled per
// subject by a factor that has the same distribution in PD and controls (our
// choice of places: two lobes, each side, so that a model resolving ~30 mm
// tells all four apart; synth_cohort.h documents the model).
constexpr int kCrossModalRegions = 4;
struct CrossModalRegion {
  const char* name;
  std::array<double, 3> centre_mm;  // MNI world
};
constexpr std::array<CrossModalRegion, kCrossModalRegions> kCrossModalRegionList{{
    {"left frontal", {-30, 40, 20}},
    {"right frontal", {30, 40, 20}},
    {"left parietal", {-30, -55, 35}},
    {"right parietal", {30, -55, 35}},
}};
constexpr double kCrossModalRadiusMm = 12;

// Fills anatomy.cross_modal: brain tissue (grey, white, CSF) within
// kCrossModalRadiusMm of each region's centre. DataError naming the region
// when the anatomy has no brain tissue there.
void mark_cross_modal_regions(Anatomy& anatomy);

// "none": ellipsoids; "auto": MRIcron's AICHAmc atlas when it is installed,
// else ellipsoids; anything else: a label NIfTI (see "Anatomy" in
// synth_cohort.h). DataError naming the file for a bad atlas or label list.
Anatomy load_anatomy(const std::string& atlas);

// The output grid, and the ~2 mm sub-grid a subject is rendered on before
// averaging down to it.
struct GridPlan {
  std::array<int64_t, 3> dims{}, factor{}, fine_dims{};
  medical::NiftiGeometry geometry;
  Mat4 fine_to_anatomy{};  // sub-grid voxel -> anatomy voxel
  Mat4 world_to_anatomy{};
  std::array<double, 3> blur_sigma{};  // in sub-grid voxels
  double fine_voxel_mm3 = 8;

  int64_t fine_size() const { return fine_dims[0] * fine_dims[1] * fine_dims[2]; }
  int64_t size() const { return dims[0] * dims[1] * dims[2]; }
};

GridPlan make_plan(const std::array<int64_t, 3>& shape, const Anatomy& anatomy);

// Tissue and putamen position of every sub-grid voxel, with the anatomy moved
// by shift_mm (nearest neighbour: labels cannot be interpolated).
// With `regions`, also each sub-grid voxel's cross-modal region (0 none), when
// the anatomy has them.
void sample_anatomy(const Anatomy& anatomy, const GridPlan& plan, const std::array<double, 3>& shift_mm,
                    std::vector<uint8_t>& tissue, std::vector<float>& position,
                    std::vector<uint8_t>* regions = nullptr);

// Majority label of each output voxel's sub-grid block; ties go to the lower
// label, so a voxel half striatum, half not, stays 0.
medical::Volume striatum_mask(const Anatomy& anatomy, const GridPlan& plan);

// The same for the cross-modal regions: 1 .. kCrossModalRegions in
// kCrossModalRegionList's order, 0 elsewhere (cross_modal_mask.nii.gz).
medical::Volume cross_modal_mask(const Anatomy& anatomy, const GridPlan& plan);

// Separable Gaussian with zeros beyond the grid (no activity outside the field
// of view). The y and z passes add whole shifted rows / slices, which keeps
// the inner loops contiguous and vectorised.
void blur(std::vector<float>& data, const std::array<int64_t, 3>& dims, const std::array<double, 3>& sigma,
          std::vector<float>& scratch);

}  // namespace qkv::medical::synth
