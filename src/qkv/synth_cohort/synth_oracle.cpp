#include "qkv/synth_cohort/synth_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qkv/learners/logistic_regression.h"

namespace qkv::medical::synth {

nlohmann::json OracleCheck::to_json() const {
  return {{"model", "L2 logistic regression (ridge 1 on standardised columns), stratified CV"},
          {"runs", runs},
          {"folds", folds},
          {"subjects", subjects},
          {"cross_modal_sites", sites},
          {"accuracy_imaging", imaging},
          {"accuracy_additive", additive},
          {"accuracy_with_products", with_products},
          {"additive_gain", additive_gain()},
          {"product_gain", product_gain()}};
}

std::string OracleCheck::describe() const {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "oracle check (logistic regression on the true quantities, %lld x %lld-fold CV): striatal binding "
                "ratios and region uptakes %.1f %%, + the %lld cross-modal sites additively %.1f %% (%+.1f), + site x "
                "region products %.1f %% (%+.1f)",
                static_cast<long long>(runs), static_cast<long long>(folds), 100 * imaging,
                static_cast<long long>(sites), 100 * additive, 100 * additive_gain(), 100 * with_products,
                100 * product_gain());
  return buf;
}

OracleCheck cross_modal_oracle(const std::vector<Subject>& subjects, const MethylationPlan& plan,
                               const medical::MethylationTable& table, uint64_t seed) {
  std::vector<int64_t> columns;
  for (size_t j = 0; j < plan.sites.size(); ++j)
    if (plan.sites[j].kind == SiteKind::kCrossModal) columns.push_back(static_cast<int64_t>(j));
  const auto n = static_cast<int64_t>(subjects.size());
  const auto cpg = static_cast<int64_t>(table.cpg_ids.size());
  const auto sites = static_cast<int64_t>(columns.size());

  // Each site's logit(beta), missing values at the column mean.
  std::vector<double> site_logit(static_cast<size_t>(n * sites));
  for (int64_t c = 0; c < sites; ++c) {
    double sum = 0;
    int64_t count = 0;
    for (int64_t r = 0; r < n; ++r) {
      const double b = table.values[r * cpg + columns[c]];
      if (std::isfinite(b)) {
        const double clamped = std::min(std::max(b, 1e-4), 1 - 1e-4);
        site_logit[r * sites + c] = std::log(clamped / (1 - clamped));
        sum += site_logit[r * sites + c];
        ++count;
      } else {
        site_logit[r * sites + c] = NAN;
      }
    }
    const double mean = count > 0 ? sum / static_cast<double>(count) : 0;
    for (int64_t r = 0; r < n; ++r)
      if (!std::isfinite(site_logit[r * sites + c])) site_logit[r * sites + c] = mean;
  }

  std::vector<int64_t> labels;
  for (const auto& s : subjects) labels.push_back(s.label);
  auto design = [&](bool with_sites, bool with_products) {
    std::vector<double> x;
    for (int64_t r = 0; r < n; ++r) {
      const Subject& s = subjects[r];
      for (int region = 0; region < kStriatalRegions; ++region) x.push_back(s.region_br(region));
      for (double z : s.cross_modal) x.push_back(z);
      for (int64_t c = 0; c < sites && with_sites; ++c) x.push_back(site_logit[r * sites + c]);
      for (int64_t c = 0; c < sites && with_products; ++c)
        x.push_back(site_logit[r * sites + c] * s.cross_modal[plan.sites[columns[c]].cross_region]);
    }
    return x;
  };
  OracleCheck check;
  check.subjects = n;
  check.sites = sites;
  const int64_t base = kStriatalRegions + kCrossModalRegions;
  check.imaging =
      cross_validated_logistic_accuracy(design(false, false), n, base, labels, check.folds, check.runs, seed);
  check.additive =
      cross_validated_logistic_accuracy(design(true, false), n, base + sites, labels, check.folds, check.runs, seed);
  check.with_products =
      cross_validated_logistic_accuracy(design(true, true), n, base + 2 * sites, labels, check.folds, check.runs, seed);
  return check;
}

}  // namespace qkv::medical::synth
