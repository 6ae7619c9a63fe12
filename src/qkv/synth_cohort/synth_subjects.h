#pragma once
// The synthetic cohort's subjects: label, covariates and the SPECT model's
// parameters drawn per subject, and a subject's volume rendered from the
// anatomy. Internal to write_synth_cohort (qkv/synth_cohort/synth_cohort.h is the
// public face and documents the model).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/medical/nifti.h"
#include "qkv/synth_cohort/synth_anatomy.h"
#include "qkv/synth_cohort/synth_cohort.h"

namespace qkv::medical::synth {

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

// A cross-modal region's uptake is scaled by exp(kCrossModalUptakeSd * z),
// z ~ N(0, 1) per subject and region in PD and controls alike (our choice:
// ~25 %, well above the count noise of a ~7 cm^3 region at 8 mm FWHM).
constexpr double kCrossModalUptakeSd = 0.25;

constexpr int kStriatalRegions = 4;
constexpr std::array<const char*, kStriatalRegions> kStriatalRegionNames{"left caudate", "right caudate",
                                                                         "left putamen", "right putamen"};

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
  // Cross-modal benchmark: each region's z (all 0 without cross-modal sites).
  std::array<double, kCrossModalRegions> cross_modal{};
  // Truth: region means of the unblurred binding ratio.
  std::array<double, 2> caudate_br{}, putamen_br{};

  double mean_putamen_br() const { return (putamen_br[0] + putamen_br[1]) / 2; }
  // Striatal region r's binding ratio, r as striatum_mask.nii.gz labels it
  // minus one: 0 left caudate, 1 right caudate, 2 left putamen, 3 right putamen.
  double region_br(int region) const { return region < 2 ? caudate_br[region] : putamen_br[region - 2]; }
  double cross_modal_factor(int region) const { return std::exp(kCrossModalUptakeSd * cross_modal[region]); }
  double caudate_level(int side) const {
    return 1 + caudate_specific[side] * (1 - kCaudateLossPerSeverity * side_severity[side]);
  }
  double putamen_level(int side, double t) const {
    const double rem = std::clamp(
        1 - side_severity[side] * (kPutamenLossBase + kPutamenLossPerT * t) - putamen_tilt[side] * (t - 0.5), 0.0, 1.5);
    return 1 + putamen_specific[side] * rem;
  }
};

// Every subject of the cohort, in manifest order; each drawn from its own
// stream (seed, subject index).
std::vector<Subject> draw_subjects(const SynthCohortOptions& o, const Anatomy& anatomy);

// Per-thread buffers, reused across subjects.
struct Workspace {
  std::vector<uint8_t> tissue, regions;
  std::vector<float> position, counts, scratch;
};

// The SPECT volume of subject `index` on the output grid.
medical::Volume render_subject(const Subject& s, int64_t index, const Anatomy& anatomy, const GridPlan& plan,
                               uint64_t seed, Workspace& ws);

}  // namespace qkv::medical::synth
