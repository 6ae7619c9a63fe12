#include "qkv/synth_cohort/synth_methylation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "qkv/synth_cohort/synth_random.h"

namespace qkv::medical::synth {
namespace {

constexpr double kPutamenCohortSd = 0.45;  // nominal sd of mean putamen BR over a cohort
// Within-class correlation of a cross-modal site's logit with its region's z
// (our choice: strong enough that a handful of sites per region carry
// several points of accuracy in the oracle check, weak enough that no single
// site decides a subject).
constexpr double kCrossModalRhoMin = 0.5, kCrossModalRhoMax = 0.8;

}  // namespace

MethylationPlan plan_methylation(const SynthCohortOptions& o, const std::vector<Subject>& subjects) {
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
  // Interaction sites after the others, so that a cohort without them draws
  // exactly what it drew before they existed.
  std::array<double, kStriatalRegions> pd_mean{}, pd_sd{};
  if (o.planted_interaction_sites > 0) {
    for (int r = 0; r < kStriatalRegions; ++r) {
      double sum = 0, sum_sq = 0, count = 0;
      for (const Subject& s : subjects) {
        if (s.label != 1) continue;
        sum += s.region_br(r);
        sum_sq += s.region_br(r) * s.region_br(r);
        count += 1;
      }
      pd_mean[r] = count > 0 ? sum / count : 0;
      const double variance = count > 1 ? (sum_sq - sum * sum / count) / (count - 1) : 0;
      // A cohort with one PD subject has no spread to scale by: the nominal one.
      pd_sd[r] = variance > 1e-8 ? std::sqrt(variance) : kPutamenCohortSd;
    }
  }
  for (int64_t c = 0; c < o.planted_interaction_sites; ++c) {
    Site& site = plan.sites[take()];
    site.kind = SiteKind::kInteraction;
    site.mu = logit(rng.uniform(0.2, 0.75));
    site.sd = intermediate_sd();
    site.region = static_cast<int>(c % kStriatalRegions);
    const double rho = rng.uniform(0.6, 0.85);
    site.effect = (rng.bernoulli(0.5) ? 1 : -1) * rho;
    site.region_reference = pd_mean[site.region];
    site.region_pd_sd = pd_sd[site.region];
    site.interaction_slope = site.effect / std::sqrt(1 - rho * rho) * site.sd / site.region_pd_sd;
  }
  // Cross-modal sites last, for the same reason.
  for (int64_t c = 0; c < o.cross_modal_sites; ++c) {
    Site& site = plan.sites[take()];
    site.kind = SiteKind::kCrossModal;
    site.mu = logit(rng.uniform(0.2, 0.75));
    site.sd = intermediate_sd();
    site.cross_region = static_cast<int>(c % kCrossModalRegions);
    const double rho = rng.uniform(kCrossModalRhoMin, kCrossModalRhoMax);
    site.effect = (rng.bernoulli(0.5) ? 1 : -1) * rho;
    site.cross_modal_slope = site.effect / std::sqrt(1 - rho * rho) * site.sd;
  }
  const int64_t background =
      n - o.planted_class_sites - o.planted_putamen_sites - o.planted_interaction_sites - o.cross_modal_sites;
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
    if (s.label == 1 && site.region >= 0)
      x += site.interaction_slope * (s.region_br(site.region) - site.region_reference);
    if (site.cross_region >= 0)
      x += (s.label == 1 ? 1 : -1) * site.cross_modal_slope * s.cross_modal[static_cast<size_t>(site.cross_region)];
    x += site.putamen_slope * putamen + site.age_slope * age;
    if (s.female) x += site.female_shift;
    // Four decimals, as array exports write beta-values.
    const double beta = std::round(sigmoid(x) * 1e4) / 1e4;
    out[j] = static_cast<float>(beta);
    if (o.missing_fraction > 0 && rng.bernoulli(o.missing_fraction)) out[j] = std::numeric_limits<float>::quiet_NaN();
  }
}

const char* kind_name(SiteKind k) {
  switch (k) {
    case SiteKind::kClass: return "class";
    case SiteKind::kPutamen: return "putamen";
    case SiteKind::kInteraction: return "interaction";
    case SiteKind::kCrossModal: return "cross_modal";
    case SiteKind::kAge: return "age";
    case SiteKind::kSex: return "sex";
    default: return "background";
  }
}

}  // namespace qkv::medical::synth
