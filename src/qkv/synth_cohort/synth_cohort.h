#pragma once
// The built-in synthetic MHCA cohort that stands in for PPMI (which cannot be
// shipped): DaT-SPECT-like brain volumes plus a DNA-methylation beta-value
// table, in the same public formats a user's own cohort comes in
// (qkv/medical/cohort.h, qkv/medical/nifti.h), with the generative model written
// out in ground_truth.json so that what a model attends to can be checked
// against what was planted. `qkv mhca synth` is the command-line face.
//
// Output folder:
//   manifest.csv          subject_id,label,spect,age,sex (spect = spect/<id>.nii.gz)
//   spect/<id>.nii.gz     float32 volume on the requested grid
//   methylation.csv       subject_id, then one column per CpG ("cg" + 8 digits)
//   striatum_mask.nii.gz  1 left caudate, 2 right caudate, 3 left putamen,
//                         4 right putamen, 0 elsewhere (same grid)
//   cross_modal_mask.nii.gz  with cross-modal sites only: 1 left frontal,
//                         2 right frontal, 3 left parietal, 4 right parietal
//                         (a voxel takes the region filling >= 25 % of it)
//   ground_truth.json     options, seed, atlas, grid, model constants, planted
//                         and nuisance CpG sites, and every subject's truth
//
// Grid. 91x109x91 is the MNI152 2 mm grid (mni_2mm_geometry()). Any other shape
// covers the same field of view (182 x 218 x 182 mm, voxel edges included)
// with voxels of 182/nx x 218/ny x 182/nz mm, so the affine still puts the
// grid on the same brain: 23x27x23 (~8 mm) and 45x54x45 (~4 mm) make CPU
// training fast. Coarse volumes are rendered on a ~2 mm sub-grid and averaged
// down, so partial-volume effects are those of a real coarse acquisition.
//
// Anatomy. atlas "auto" takes /usr/share/mricron/templates/AICHAmc.nii.gz when
// it is installed, else ellipsoids; "none" is always ellipsoids; anything else
// is a label NIfTI with a "<index> <name> <value>" list next to it (X.nii.txt
// or X.txt for X.nii[.gz], as MRIcron ships AICHAmc), the voxel label being
// <index>. Regions whose name holds "Caudate" / "Putamen" (any case) are the
// striatum, split into left and right by the world x of each voxel (x < 0 is
// left in MNI space); every other non-zero label is grey matter; unlabelled
// voxels enclosed by labels on all three axes are white matter / CSF, and a
// ~10 mm shell around the brain is scalp. The ellipsoid fallback puts the
// caudate head at (+-13, 12, 9) mm, the caudate body at (+-16, -8, 19), the
// putamen at (+-25, 2, 0) (semi-axes 4-15 mm), lateral ventricles, and a
// grey-matter rim on an ellipsoid brain inside an ellipsoid scalp.
//
// SPECT model, per subject (all rates are tissue concentrations before blur):
//   non-specific uptake: grey 1.0, white 0.8, CSF 0.35, scalp 0.15, outside 0.
//   binding ratio BR = striatal concentration / grey-matter concentration,
//   i.e. 1 + specific binding. Healthy specific binding (BR - 1): caudate 2.0,
//   putamen 1.6 (BR 3.0 / 2.6), times a subject factor (lognormal, 9%), a
//   region factor (lognormal, 4%), an age factor (-0.6% per year from 62, the
//   normal decline of dopamine-transporter density) and a left/right
//   asymmetry (relative difference ~ N(0, 3%)).
//   Putamen profile: t runs from 0 at the anterior to 1 at the posterior end
//   of each putamen (world y). The specific binding left is
//     rem(t) = clamp(1 - s * (0.6 + 0.6 t) - g * (t - 0.5), 0, 1.5)
//   with g ~ N(0.05, 0.06) a subject's own anterior-posterior tilt (healthy
//   people have one too, so a gradient alone does not give PD away).
//   Caudate: rem = 1 - 0.5 s. Controls have s = 0.
//   PD: severity S ~ N(0.6, 0.25) truncated to [0.03, 1]; one hemisphere
//   (random, "affected_side") has s = S, the other s = S * U(0.3, 0.85). So
//   loss is asymmetric, larger in the putamen than the caudate, and starts in
//   the posterior putamen; a PD subject with small S looks nearly normal.
//   Registration: the whole anatomy is shifted by N(0, 1.5 mm) per axis
//   (residual misregistration after spatial normalisation), sampled nearest-
//   neighbour from the template.
//   Acquisition: Poisson counts on the ~2 mm sub-grid (2 counts per 8 mm^3 at
//   grey-matter concentration, times a per-subject count level, lognormal 20%),
//   Gaussian blur of FWHM 8 mm (separable, in world units), averaging to the
//   output grid, division back to concentration units and a per-subject global
//   calibration factor (lognormal, 15%). Values are >= 0, multiples of 1/256
//   (like a scanner's integer counts; it keeps the .nii.gz files ~3x smaller),
//   and the brain background is about the calibration factor, i.e. ~1.
//   Ground truth binding ratios are the region means of the unblurred BR over
//   the template's voxels (the putamen one averages rem(t) over its voxels).
//
// Covariates: age ~ N(61, 9) controls, N(63, 9) PD, clamped to [35, 88] and
// rounded to whole years; sex male with probability 0.62 (controls), 0.66 (PD).
//
// Methylation model, beta = sigmoid(logit), so in [0, 1] after rounding:
//   background site means: 47% low (logit ~ N(-2.6, 0.5), beta ~0.03-0.15),
//   38% high (logit ~ N(1.9, 0.45), beta ~0.8-0.93), 15% intermediate
//   (beta ~ U(0.2, 0.75)); per-subject noise in logit space N(0, sd_j), sd_j
//   lognormal around 0.3 (extreme sites) or 0.45 (intermediate); a latent
//   per-subject blood-composition factor N(0, 1) loads on 10% of the
//   background sites (loading +-U(0.1, 0.4) sd_j), giving correlated
//   background that is unrelated to PD.
//   class sites (planted_class_sites): intermediate sites whose logit is
//   shifted by +-d * sd_j in PD, d ~ U(0.3, 0.65) (weak to moderate alone).
//   putamen sites (planted_putamen_sites): intermediate sites whose logit is
//   linear in the subject's mean putamen BR (mean of left and right), slope
//   chosen for a nominal correlation rho ~ U(0.4, 0.7) over a cohort whose BR
//   has sd 0.45, sign random.
//   interaction sites (planted_interaction_sites, 0 by default; the cross-
//   modal benchmark): intermediate sites, each tied to one striatal region
//   (in turn left caudate, right caudate, left putamen, right putamen). In PD
//   only, the logit moves with that region's binding ratio: slope * (BR -
//   mean BR of the cohort's PD subjects), the slope set for a within-PD
//   correlation rho ~ U(0.6, 0.85), sign random; controls have no such term.
//   The site's mean logit is therefore the same in PD and in controls and the
//   region's uptake alone says nothing of the site: only a model that reads
//   the site together with that region's uptake can use it (a PD subject with
//   near-normal uptake has the site shifted, a control with the same uptake
//   does not). Its only marginal trace is a larger spread in PD (sd / sqrt(1 -
//   rho^2)). ground_truth.json names each site's region and mask label.
//   cross-modal sites (cross_modal_sites, 0 by default; the benchmark that
//   only cross-modal reading can solve): intermediate sites, each tied to one
//   of four cross-modal regions (in turn left frontal, right frontal, left
//   parietal, right parietal: spheres of 12 mm radius of brain tissue centred
//   at (-+30, 40, 20) and (-+30, -55, 35) mm, cross_modal_mask.nii.gz labels
//   1-4). Every subject has a z ~ N(0, 1) per region, in PD and controls
//   alike, and the region's uptake (all tissue in it) is scaled by
//   exp(0.25 z). A site's logit is mu + sd * noise + sign * slope * z with
//   sign +1 in PD and -1 in controls, the slope set for a within-class
//   correlation rho ~ U(0.4, 0.7) (sign random). Since z is symmetric, the
//   site's distribution and the region's uptake are each the same in PD and
//   controls: neither modality alone says anything, only their product does.
//   write_synth_cohort measures this (the oracle check, ground_truth.json
//   "oracle_check"): cross-validated logistic regression on the true
//   striatal binding ratios and region z's, then with the sites added, then
//   with each site times its region's z; the additive gain is ~0, the
//   product gain several points.
//   nuisance sites (not informative about PD by construction, listed apart in
//   ground_truth.json): up to 8 age sites (logit slope +-U(0.02, 0.05) per
//   year) and up to 8 X-linked sex sites (beta ~0.45 in women, ~0.05 in men);
//   they correlate with PD only as weakly as age and sex do.
//   Planted and nuisance sites sit at seeded random columns among CpG ids that
//   are unique, random and sorted, as in an array export. Values are rounded
//   to 4 decimals; each cell is missing (empty) with probability
//   missing_fraction.
//
// Determinism: every random draw comes from a generator seeded by (seed,
// purpose, subject), and the distributions are implemented here rather than
// taken from <random> (whose output differs between standard libraries), so
// the files are bit-identical for a seed whatever the thread count.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/core/fields.h"

namespace qkv::medical {

struct SynthCohortOptions {
  int64_t subjects = 408;
  double pd_fraction = 0.70;  // PD count = round(subjects * pd_fraction)
  int64_t cpg = 20000;
  // Volume grid (nx, ny, nz); see "Grid" above.
  std::array<int64_t, 3> shape{91, 109, 91};
  // "auto", "none" (ellipsoids) or the path of a label NIfTI; see "Anatomy".
  std::string atlas = "auto";
  int64_t planted_class_sites = 30;       // CpG sites whose beta shifts with PD status
  int64_t planted_putamen_sites = 15;     // CpG sites whose beta follows the mean putamen BR
  int64_t planted_interaction_sites = 0;  // CpG sites whose PD shift follows one region's BR
  int64_t cross_modal_sites = 0;          // CpG sites coupled to a cross-modal region's uptake, sign flipped by class
  double missing_fraction = 0.001;        // beta cells left empty
  uint64_t seed = 0;
  // Volumes generated at once, on LibTorch's threads (so at most
  // at::get_num_threads()); 0 = as many as LibTorch has.
  int64_t threads = 0;

  // ConfigError naming the key, e.g. "pd_fraction must be in [0, 1], got
  // 1.5": each field's range (visit_fields), then what involves several.
  // Checks only the values; an atlas path is read (and a bad one is a
  // DataError) by write_synth_cohort.
  void validate() const;
  nlohmann::json to_json() const;
};

// The options' keys, help and ranges (core/fields.h); `shape` and `threads`
// are checked by validate() (a shape is three numbers, threads depend on
// the machine). Sources: PPMI's numbers where said, else our choice.
template <typename V>
void visit_fields(SynthCohortOptions& o, V&& visit) {
  visit(Field{"subjects", "subjects (PPMI: 408)"}.range(2, 1000000), o.subjects);
  visit(Field{"pd_fraction", "share of Parkinson's patients (PPMI: 0.70)"}.range(0, 1), o.pd_fraction);
  visit(Field{"cpg", "CpG sites in the methylation table"}.range(1, 10000000), o.cpg);
  visit(Field{"atlas",
              "striatum anatomy: auto (MRIcron's AICHAmc atlas if installed), none (ellipsoids), or a label "
              "NIfTI"},
        o.atlas);
  visit(Field{"planted_class_sites", "CpG sites shifted in PD"}.range(0, 10000000), o.planted_class_sites);
  visit(Field{"planted_putamen_sites", "CpG sites tied to putamen uptake"}.range(0, 10000000), o.planted_putamen_sites);
  visit(Field{"planted_interaction_sites",
              "CpG sites whose PD shift follows one striatal region's uptake (the cross-modal benchmark)"}
            .range(0, 10000000),
        o.planted_interaction_sites);
  visit(Field{"cross_modal_sites",
              "CpG sites coupled to one of four cortical regions' uptake with the sign flipped between PD and "
              "controls: each modality alone carries nothing, only reading both does (prints an oracle check)"}
            .range(0, 10000000),
        o.cross_modal_sites);
  visit(Field{"missing_fraction", "share of beta-values left missing"}.range(0, 0.5), o.missing_fraction);
  visit(Field{"seed", "random seed; the same seed writes the same files"}.range(0, kMaxSeed), o.seed);
}

// `shape`, three sizes X,Y,Z: the range each size must be in (validate()
// checks it; the CLI shows and checks it on --shape).
inline Field synth_shape_field() {
  return Field{"shape", "volume grid X,Y,Z (default 91,109,91, MNI 2 mm); e.g. 24,28,24 for CPU runs"}.range(8, 256);
}

struct SynthCohortSummary {
  int64_t subjects = 0, pd = 0, controls = 0, cpg = 0;
  std::string atlas_used;          // the atlas path, or "ellipsoids"
  std::vector<std::string> files;  // every file written (out_dir joined), manifest.csv last
  // With cross-modal sites: the oracle check's line and record (else empty / null).
  std::string oracle_check;
  nlohmann::json oracle;
  nlohmann::json to_json() const;
};

// Writes the cohort into out_dir (created; whether an existing folder may be
// written into is the caller's policy, core/output_policy.h). Each file is written
// atomically and manifest.csv last, so a folder with a manifest is complete.
// progress(done, total) is called on the calling thread for done = 0, 1, ...,
// total (total = subjects), between the volumes the calling thread renders
// itself and at the end; if it throws, the workers stop after their current
// volume and the exception propagates (how the CLI honours Ctrl-C).
// Throws UsageError for invalid options, DataError for an unreadable atlas or
// label list (naming the file) and for write failures.
SynthCohortSummary write_synth_cohort(const std::string& out_dir, const SynthCohortOptions& options,
                                      const std::function<void(int64_t done, int64_t total)>& progress = {});

}  // namespace qkv::medical
