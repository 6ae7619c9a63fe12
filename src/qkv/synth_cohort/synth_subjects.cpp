#include "qkv/synth_cohort/synth_subjects.h"

#include <cmath>

#include "qkv/synth_cohort/synth_random.h"

namespace qkv::medical::synth {
namespace {

std::string subject_id(int64_t index, int64_t count) {
  const int width = std::max<int>(4, static_cast<int>(std::to_string(count).size()));
  std::string digits = std::to_string(index + 1);
  return "sub-" + std::string(width - digits.size(), '0') + digits;
}

}  // namespace

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
    // Its own stream, so that a cohort without cross-modal sites draws exactly
    // what it drew before they existed.
    if (o.cross_modal_sites > 0) {
      Rng regions(o.seed, Stream::kCrossModal, idx);
      for (auto& z : s.cross_modal) z = regions.normal();
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

medical::Volume render_subject(const Subject& s, int64_t index, const Anatomy& anatomy, const GridPlan& plan,
                               uint64_t seed, Workspace& ws) {
  sample_anatomy(anatomy, plan, s.shift_mm, ws.tissue, ws.position, &ws.regions);
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
    if (!ws.regions.empty() && ws.regions[v] > 0) level *= s.cross_modal_factor(ws.regions[v] - 1);
    ws.counts[v] = static_cast<float>(rng.poisson(level * counts_per_unit));
  }
  blur(ws.counts, plan.fine_dims, plan.blur_sigma, ws.scratch);

  medical::Volume out;
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

}  // namespace qkv::medical::synth
