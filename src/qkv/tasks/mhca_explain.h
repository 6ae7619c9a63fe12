#pragma once
// What an MHCA model attends to, per subject, written where a clinician's or
// a bioinformatician's tools open it:
//   <out>/<subject>/scores.npy, alpha_v.npy, alpha_q.npy  [H, F, T] per head:
//       raw scores S, softmax over SPECT tokens, softmax over CpG sites
//   <out>/<subject>/spect_attention.nii.gz  the SPECT attention on the input
//       grid, with the subject's own affine
//   <out>/<subject>/spect_attention_{axial,coronal,sagittal}.png  the volume
//       with the map overlaid, through the map's peak
//   <out>/<subject>/cpg_attention.csv  CpG sites ranked by attention
// and, over all explained subjects, <out>/cpg_attention.csv,
// <out>/spect_attention_mean.nii.gz (+ PNG slices) and <out>/explain.json.
//
// Which numbers: the SPECT map is alpha_v averaged over heads and CpG
// queries (where the methylation tokens look in the volume; sums to 1 over
// tokens); a CpG site's attention is alpha_q averaged over heads and SPECT
// keys (how much the volume's tokens draw on that site; sums to 1 over
// sites). The token grid is placed on the input grid by each token's
// receptive-field centre (SpectEncoderOptions::token_offset/stride) and
// interpolated trilinearly in between, clamped at the edges.
#include <c10/core/Device.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/models/mhca.h"

namespace qkv::tasks {

// What the synthetic cohort planted (ground_truth.json of `qkv mhca synth`),
// for scoring an explanation.
struct GroundTruth {
  std::vector<std::string> informative_cpgs;  // class, putamen and interaction sites
  // Interaction sites and the striatal region each one's PD shift follows
  // (`mhca synth --planted-interaction-sites`).
  struct Interaction {
    std::string cpg, region;
    int64_t mask_label = 0;  // the region's label in striatum_mask.nii.gz
  };
  std::vector<Interaction> interactions;
  std::string striatum_mask;  // NIfTI path; empty if unknown
  // Cross-modal sites (`mhca synth --cross-modal-sites`) and the label of
  // their region in cross_modal_mask.nii.gz.
  std::vector<Interaction> cross_modal;
  std::string cross_modal_mask;  // NIfTI path; empty if unknown
  // The synthetic cohort's subjects and their labels (0 control, 1 PD): what
  // tells this cohort's truth from another's (the same ids, other labels).
  std::string path;
  std::map<std::string, int64_t> subject_labels;
};
// DataError naming the file if it is not a ground-truth file of `mhca synth`.
GroundTruth read_ground_truth(const std::string& path);
// DataError naming the ground truth's file when it is another cohort's: a
// subject explained that it does not list, or one whose label there is not
// the manifest's. Unlabelled subjects are checked by id alone.
void check_ground_truth_is_of(const GroundTruth& truth, const medical::CohortData& cohort,
                              const std::vector<int64_t>& rows);

struct ExplainOptions {
  std::vector<std::string> subjects;  // empty: every subject of the cohort
  std::string ground_truth;           // optional ground_truth.json
  std::string striatum_mask;          // optional label NIfTI (non-zero = striatum) on the volumes' grid
  bool write_per_subject = true;
  int64_t png_scale = 3;           // least pixels per voxel in the PNG slices (at least 360 px a side)
  double overlay_threshold = 0.5;  // share of the map's range below which the PNGs paint nothing
};

template <typename V>
void visit_fields(ExplainOptions& o, V&& visit) {
  visit(Field{"subjects", "subject id(s) to explain (comma-separated)", "subject"}, o.subjects);
  visit(Field{"ground_truth",
              "ground_truth.json of 'qkv mhca synth' to score the explanation (default: next to the manifest)"},
        o.ground_truth);
  visit(Field{"overlay_threshold",
              "PNG overlays paint attention from this share of the map's range up (0 paints everything)"}
            .range(0, 1),
        o.overlay_threshold);
  visit(Field{"striatum_mask", "label NIfTI on the volumes' grid, non-zero = striatum (default: the ground truth's)"},
        o.striatum_mask);
}

// What explain reads besides the model and the cohort, checked before
// anything is written (an --overwrite would have emptied the folder first):
// the rows of the subjects to explain, the ground truth (check_ground_truth_is_of)
// and the striatum mask's labels on the volumes' grid. UsageError without
// volumes, ConfigError for an unknown subject, DataError for a ground truth
// or mask that is not this cohort's.
struct ExplainInputs {
  std::vector<int64_t> rows;
  GroundTruth truth;
  std::string mask_path;   // --striatum-mask, else the ground truth's; "" for none
  at::Tensor mask_labels;  // [X, Y, Z]; undefined without a mask
};
ExplainInputs read_explain_inputs(const medical::CohortData& cohort, const ExplainOptions& options);

struct OverlayStyle {
  int64_t min_scale = 3;   // least pixels per voxel; the longer side is at least 360 px
  double threshold = 0.5;  // in [0, 1]: share of the heat map's range below which nothing is painted
  std::string title;       // "Subject 003": each picture's title adds the view and slice
};

// The voxels of an anatomy volume [X, Y, Z] that are brain: above half the
// mean of the voxels above the volume's mean (our choice: background and
// scalp fall below it, white matter does not). A bool tensor [X, Y, Z].
at::Tensor brain_mask(const at::Tensor& anatomy);

// The voxel of `map`'s largest value inside `mask` (anywhere if the mask is empty).
std::array<int64_t, 3> peak_voxel_in(const at::Tensor& map, const at::Tensor& mask);

// token weights [gx, gy, gz] -> [X, Y, Z] on the encoder's input grid.
at::Tensor token_map_to_volume(const at::Tensor& token_weights, const models::SpectEncoderOptions& encoder);

// Writes axial, coronal and sagittal PNGs (`prefix`_axial.png, ...) of
// `anatomy` ([X, Y, Z] voxel i, j, k; any range) in grey with `heat` ([X, Y,
// Z], >= 0) blended over it above the threshold, through voxel `through`,
// with +j (axial) or +k up; each with a title, the anatomical direction at each
// edge (from `geometry`'s affine), a colour bar in heat's units and a legend line.
void write_overlay_slices(const std::string& prefix, const at::Tensor& anatomy, const at::Tensor& heat,
                          const std::array<int64_t, 3>& through, const medical::NiftiGeometry& geometry,
                          const OverlayStyle& style);

// Runs the model on each subject and writes the files above; returns
// explain.json's content (with precision@k and striatal attention fractions
// when a ground truth or mask is given). With interaction sites in the ground
// truth, "interactions" scores each planted (site, region) pair that survived
// feature selection: the share of that site's SPECT attention (alpha_v, its
// query's row, averaged over heads and subjects) inside its region, against
// the region's share of the volume (enrichment 1 = chance), and the same for
// the other three striatal regions (does it find its own region, or just the
// striatum?).
// "token_resolution" scores the planted sites with a region (interaction and
// cross-modal) at the resolution the model has: a region's own tokens are
// those holding at least 20 % of its voxels' (interpolation) weight; per site,
// its alpha_v mass on them against their share of the tokens (enrichment, 1 =
// chance), the same on the mirror region's tokens (left against right), and
// the region tokens' alpha_q share on the site against 1 / F; as the control,
// the other sites' alpha_v mass on all the planted regions' tokens against
// chance ("unplanted_alpha_v_region_enrichment", 1 = no preference). With
// cross-modal sites, planted_<region>_{axial,coronal,sagittal}.png show the
// mean alpha_v of each region's sites, through the region's centre.
// The PNG slices go through the map's peak inside the brain (voxels above
// half the mean of the anatomy's above-mean voxels; brain_mask()).
nlohmann::json explain_subjects(models::CoAttentionModel& model, const medical::CohortData& cohort,
                                const medical::Preprocessing& prep, const ExplainOptions& options,
                                const ExplainInputs& inputs, const std::string& out_dir, const c10::Device& device);

}  // namespace qkv::tasks
