#pragma once
// The synthetic cohort's methylation model: the CpG sites (ids, background
// means, planted and nuisance roles) and each subject's row of beta-values.
// Internal to write_synth_cohort (qkv/synth_cohort/synth_cohort.h is the public face
// and documents the model).
#include <cstdint>
#include <string>
#include <vector>

#include "qkv/synth_cohort/synth_cohort.h"
#include "qkv/synth_cohort/synth_subjects.h"

namespace qkv::medical::synth {

constexpr double kPutamenReferenceBr = 2.2;  // centre of the putamen-site regression

enum class SiteKind { kBackground, kClass, kPutamen, kInteraction, kCrossModal, kAge, kSex };

struct Site {
  SiteKind kind = SiteKind::kBackground;
  double mu = 0, sd = 0.3;   // logit mean (control / male / reference) and subject noise sd
  double class_shift = 0;    // added in PD
  double putamen_slope = 0;  // per unit of mean putamen BR above kPutamenReferenceBr
  double age_slope = 0;      // per year above kReferenceAge
  double female_shift = 0;
  double composition = 0;  // loading on the blood-composition factor, in logit units
  double effect = 0;       // standardized class effect d, or nominal (putamen / in-PD region) correlation
  // Interaction sites: in PD only, logit += interaction_slope * (BR of
  // `region` - region_reference), region_reference being the region's mean BR
  // over the cohort's PD subjects (so the site's mean is the same in PD and in
  // controls: neither modality alone shows it).
  int region = -1;
  double interaction_slope = 0;
  double region_reference = 0, region_pd_sd = 0;
  // Cross-modal sites: logit += cross_modal_slope * z of cross-modal region
  // `cross_region` in PD and -= it in controls. z ~ N(0, 1) in both classes,
  // so the site's distribution, like the region's uptake, is the same in PD
  // and controls: only the sign of their coupling tells the classes apart.
  int cross_region = -1;
  double cross_modal_slope = 0;
};

struct MethylationPlan {
  std::vector<std::string> ids;
  std::vector<Site> sites;
};

// The sites, drawn from the (seed, sites) stream; the subjects give the
// interaction sites' centring and scale.
MethylationPlan plan_methylation(const SynthCohortOptions& o, const std::vector<Subject>& subjects);

// Subject `row`'s beta-values (NaN where missing) into out[0 .. cpg), drawn
// from the (seed, methylation, row) stream.
void fill_methylation_row(const MethylationPlan& plan, const Subject& s, int64_t row, const SynthCohortOptions& o,
                          float* out);

// "class", "putamen", "interaction", "cross_modal", "age", "sex" or "background", as
// ground_truth.json says.
const char* kind_name(SiteKind k);

}  // namespace qkv::medical::synth
