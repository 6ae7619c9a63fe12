#include "qkv/synth_cohort/synth_cohort.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <sstream>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/nifti.h"
#include "qkv/runtime/parallel.h"
#include "qkv/synth_cohort/synth_anatomy.h"
#include "qkv/synth_cohort/synth_methylation.h"
#include "qkv/synth_cohort/synth_oracle.h"
#include "qkv/synth_cohort/synth_random.h"
#include "qkv/synth_cohort/synth_subjects.h"

namespace qkv::medical {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace synth;

// ---------------------------------------------------------------- truth

json side_pair(const std::array<double, 2>& v) { return {{"left", v[0]}, {"right", v[1]}}; }

json ground_truth(const SynthCohortOptions& o, const Anatomy& anatomy, const GridPlan& plan,
                  const std::vector<Subject>& subjects, const MethylationPlan& meth, const json& oracle) {
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
      {"interaction_sites",
       "in PD only, logit slope per unit of the named region's BR, centred at the region's mean BR over the PD "
       "subjects, for a within-PD correlation rho ~ U(0.6, 0.85); the same mean in PD and controls"},
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
      case SiteKind::kInteraction:
        entry["reference_beta"] = sigmoid(site.mu);
        entry["region"] = kStriatalRegionNames[static_cast<size_t>(site.region)];
        entry["striatum_mask_label"] = site.region + 1;
        entry["pd_reference_br"] = site.region_reference;
        entry["pd_region_br_sd"] = site.region_pd_sd;
        entry["logit_slope_per_br_in_pd"] = site.interaction_slope;
        entry["nominal_correlation_in_pd"] = site.effect;
        informative.push_back(entry);
        break;
      case SiteKind::kCrossModal:
        entry["reference_beta"] = sigmoid(site.mu);
        entry["region"] = kCrossModalRegionList[static_cast<size_t>(site.cross_region)].name;
        entry["cross_modal_mask_label"] = site.cross_region + 1;
        entry["logit_slope_per_z"] = site.cross_modal_slope;
        entry["sign"] = "+ in PD, - in controls";
        entry["nominal_correlation_within_class"] = site.effect;
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
  if (o.cross_modal_sites > 0) {
    json regions = json::array();
    for (int r = 0; r < kCrossModalRegions; ++r)
      regions.push_back({{"label", r + 1},
                         {"region", kCrossModalRegionList[r].name},
                         {"centre_mm", kCrossModalRegionList[r].centre_mm},
                         {"radius_mm", kCrossModalRadiusMm}});
    truth["cross_modal_regions"] = regions;
    truth["cross_modal_model"] = {
        {"uptake_factor", "exp(0.25 z), z ~ N(0, 1) per subject and region in PD and controls alike"},
        {"sites",
         "logit += (+1 in PD, -1 in controls) * slope * z of the site's region, slope for a within-class "
         "correlation rho ~ U(0.4, 0.7)"}};
    truth["oracle_check"] = oracle;
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
    if (o.cross_modal_sites > 0) people.back()["cross_modal_z"] = s.cross_modal;
  }
  truth["subjects"] = people;
  return truth;
}

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

}  // namespace

void SynthCohortOptions::validate() const {
  check_field_ranges(*this);
  const int64_t pd = std::llround(static_cast<double>(subjects) * pd_fraction);
  if (pd < 1 || pd > subjects - 1) {
    std::ostringstream s;
    s << pd_fraction << " of " << subjects << " subjects leaves " << (pd < 1 ? "no PD" : "no control") << " subject";
    throw ConfigError("pd_fraction", s.str());
  }
  const int64_t planted = planted_class_sites + planted_putamen_sites + planted_interaction_sites + cross_modal_sites;
  if (cpg <= planted)
    throw ConfigError("cpg",
                      "must exceed the planted sites (" + std::to_string(planted) + "), got " + std::to_string(cpg));
  if (static_cast<double>(cpg) * static_cast<double>(subjects) > 1e9)
    throw ConfigError(
        "cpg", std::to_string(cpg) + " x {subjects} " + std::to_string(subjects) + " is over 1e9 methylation cells");
  for (int64_t d : shape)
    if (const std::string problem = field_range_problem(synth_shape_field(), static_cast<double>(d)); !problem.empty())
      throw ConfigError("shape", "sizes " + problem + ", got " + std::to_string(shape[0]) + "x" +
                                     std::to_string(shape[1]) + "x" + std::to_string(shape[2]));
  if (atlas.empty()) throw ConfigError("atlas", "must be auto, none or the path of a label NIfTI");
  if (threads < 0) throw ConfigError("threads", "must be >= 0, got " + std::to_string(threads));
}

json SynthCohortOptions::to_json() const {
  json j = {{"subjects", subjects},
            {"pd_fraction", pd_fraction},
            {"cpg", cpg},
            {"shape", shape},
            {"atlas", atlas},
            {"planted_class_sites", planted_class_sites},
            {"planted_putamen_sites", planted_putamen_sites},
            {"planted_interaction_sites", planted_interaction_sites},
            {"missing_fraction", missing_fraction},
            {"seed", seed}};
  // Only when used, so that the records of earlier cohorts stay as they were.
  if (cross_modal_sites > 0) j["cross_modal_sites"] = cross_modal_sites;
  return j;
}

json SynthCohortSummary::to_json() const {
  json j = {{"subjects", subjects},     {"pd", pd},      {"controls", controls}, {"cpg", cpg},
            {"atlas_used", atlas_used}, {"files", files}};
  if (!oracle.is_null()) j["oracle_check"] = oracle;
  return j;
}

SynthCohortSummary write_synth_cohort(const std::string& out_dir, const SynthCohortOptions& options,
                                      const std::function<void(int64_t done, int64_t total)>& progress) {
  options.validate();
  if (out_dir.empty()) throw ConfigError("out", ": must name a folder");
  {
    std::error_code ec;
    const auto status = fs::status(out_dir, ec);
    // Whether an existing folder may be written into is the caller's policy
    // (core/output_policy.h); files of the same name are replaced.
    if (fs::exists(status) && !fs::is_directory(status))
      throw ConfigError("out", out_dir + " exists and is not a folder");
  }

  Anatomy anatomy = load_anatomy(options.atlas);
  if (options.cross_modal_sites > 0) mark_cross_modal_regions(anatomy);
  const GridPlan plan = make_plan(options.shape, anatomy);
  const std::vector<Subject> subjects = draw_subjects(options, anatomy);
  const MethylationPlan meth = plan_methylation(options, subjects);
  const int64_t workers = parallel_workers(options.subjects, options.threads);

  medical::MethylationTable table;
  for (const auto& s : subjects) table.subject_ids.push_back(s.id);
  table.cpg_ids = meth.ids;
  table.values.resize(static_cast<size_t>(options.subjects * options.cpg));
  parallel_tasks(options.subjects, workers, [&](int64_t, int64_t row) {
    fill_methylation_row(meth, subjects[row], row, options, table.values.data() + row * options.cpg);
  });

  // The oracle check needs no volume: made before anything is written, so
  // that a cohort too small for its folds leaves no half-written folder.
  std::optional<OracleCheck> oracle;
  if (options.cross_modal_sites > 0) {
    int64_t smallest_class = options.subjects;
    for (const int64_t label : {0, 1})
      smallest_class = std::min<int64_t>(
          smallest_class,
          std::count_if(subjects.begin(), subjects.end(), [&](const Subject& s) { return s.label == label; }));
    const int64_t folds = OracleCheck{}.folds;
    if (smallest_class < folds)
      throw ConfigError("cross_modal_sites",
                        ": its oracle check is " + std::to_string(folds) + "-fold cross validation, which needs " +
                            std::to_string(folds) + " subjects of each class; {subjects} " +
                            std::to_string(options.subjects) + " gives " + std::to_string(smallest_class) + " of one");
    oracle = cross_modal_oracle(subjects, meth, table, options.seed);
  }

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
    medical::write_nifti(spect_files[i],
                         render_subject(subjects[i], i, anatomy, plan, options.seed, workspaces[worker]));
    ++done;
    if (worker == 0 && progress) report();
  });
  if (progress) report();
  summary.files = spect_files;

  const std::string mask_path = join(out_dir, "striatum_mask.nii.gz");
  medical::write_nifti(mask_path, striatum_mask(anatomy, plan));
  summary.files.push_back(mask_path);

  if (options.cross_modal_sites > 0) {
    const std::string cross_path = join(out_dir, "cross_modal_mask.nii.gz");
    medical::write_nifti(cross_path, cross_modal_mask(anatomy, plan));
    summary.files.push_back(cross_path);
    summary.oracle = oracle->to_json();
    summary.oracle_check = oracle->describe();
  }

  const std::string methylation_path = join(out_dir, "methylation.csv");
  medical::write_methylation_table(methylation_path, table);
  summary.files.push_back(methylation_path);

  const std::string truth_path = join(out_dir, "ground_truth.json");
  write_file_atomic(truth_path, json_text(ground_truth(options, anatomy, plan, subjects, meth, summary.oracle)) + "\n");
  summary.files.push_back(truth_path);

  medical::Manifest manifest;
  for (const auto& s : subjects) {
    medical::CohortSubject row;
    row.id = s.id;
    row.label = s.label;
    row.spect_path = "spect/" + s.id + ".nii.gz";
    row.covariates = {{"age", std::to_string(s.age)}, {"sex", s.female ? "F" : "M"}};
    manifest.subjects.push_back(row);
  }
  const std::string manifest_path = join(out_dir, "manifest.csv");
  medical::write_manifest(manifest_path, manifest);
  summary.files.push_back(manifest_path);
  return summary;
}

}  // namespace qkv::medical
