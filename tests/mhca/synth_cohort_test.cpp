#include "qkv/synth_cohort/synth_cohort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/nifti.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using nlohmann::json;
using qkv::medical::SynthCohortOptions;
using qkv::medical::SynthCohortSummary;
using qkv::medical::write_synth_cohort;

namespace {

constexpr const char* kAicha = "/usr/share/mricron/templates/AICHAmc.nii.gz";

SynthCohortOptions small_options() {
  SynthCohortOptions o;
  o.subjects = 40;
  o.pd_fraction = 0.7;
  o.cpg = 500;
  o.shape = {45, 54, 45};  // ~4 mm: at ~8 mm misregistration alone blurs left/right asymmetry
  o.atlas = "none";
  o.seed = 1;
  o.threads = 2;
  return o;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::array<double, 3> world(const qkv::medical::Volume& v, double i, double j, double k) {
  const auto a = v.geometry.affine();
  return {a[0] * i + a[1] * j + a[2] * k + a[3], a[4] * i + a[5] * j + a[6] * k + a[7],
          a[8] * i + a[9] * j + a[10] * k + a[11]};
}

// Mean of the volume over each striatum mask label 1..4 (index 0 unused).
std::array<double, 5> region_means(const qkv::medical::Volume& volume, const qkv::medical::Volume& mask) {
  std::array<double, 5> sum{}, count{};
  for (int64_t v = 0; v < mask.size(); ++v) {
    const int label = static_cast<int>(mask.voxels[v]);
    sum[label] += volume.voxels[v];
    count[label] += 1;
  }
  for (int l = 0; l < 5; ++l) sum[l] = count[l] > 0 ? sum[l] / count[l] : 0;
  return sum;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One cohort shared by the tests that only read it (generating is the slow part).
class SynthCohortTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(qkv::testing::fresh_dir("synth_cohort"));
    progress_ = new std::vector<std::pair<int64_t, int64_t>>();
    summary_ = new SynthCohortSummary(write_synth_cohort(*dir_, small_options(), [](int64_t done, int64_t total) {
      progress_->push_back({done, total});
    }));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete progress_;
    delete summary_;
  }
  static std::string file(const std::string& name) { return (fs::path(*dir_) / name).string(); }

  static std::string* dir_;
  static std::vector<std::pair<int64_t, int64_t>>* progress_;
  static SynthCohortSummary* summary_;
};
std::string* SynthCohortTest::dir_ = nullptr;
std::vector<std::pair<int64_t, int64_t>>* SynthCohortTest::progress_ = nullptr;
SynthCohortSummary* SynthCohortTest::summary_ = nullptr;

TEST_F(SynthCohortTest, FilesReadBackWithTheCohortReaders) {
  const auto manifest = qkv::medical::read_manifest(file("manifest.csv"));
  ASSERT_EQ(manifest.subjects.size(), 40u);
  int64_t pd = 0;
  for (const auto& s : manifest.subjects) {
    pd += s.label;
    EXPECT_TRUE(fs::is_regular_file(s.spect_path)) << s.spect_path;
    EXPECT_EQ(fs::path(s.spect_path).filename().string(), s.id + ".nii.gz");
    ASSERT_EQ(s.covariates.count("age"), 1u);
    ASSERT_EQ(s.covariates.count("sex"), 1u);
    const int age = std::stoi(s.covariates.at("age"));
    EXPECT_GE(age, 35);
    EXPECT_LE(age, 88);
    EXPECT_TRUE(s.covariates.at("sex") == "M" || s.covariates.at("sex") == "F");
  }
  EXPECT_EQ(pd, 28);  // round(40 * 0.7)
  EXPECT_EQ(manifest.subjects.front().id, "sub-0001");
  EXPECT_EQ(summary_->pd, 28);
  EXPECT_EQ(summary_->controls, 12);
  EXPECT_EQ(summary_->atlas_used, "ellipsoids");
  EXPECT_EQ(summary_->files.back(), file("manifest.csv"));
  for (const auto& f : summary_->files) EXPECT_TRUE(fs::is_regular_file(f)) << f;

  const auto table = qkv::medical::read_methylation_table(file("methylation.csv"));
  ASSERT_EQ(table.rows(), 40);
  ASSERT_EQ(table.cols(), 500);
  for (int64_t r = 0; r < table.rows(); ++r) EXPECT_EQ(table.subject_ids[r], manifest.subjects[r].id);
  std::set<std::string> ids(table.cpg_ids.begin(), table.cpg_ids.end());
  EXPECT_EQ(ids.size(), 500u);
  for (const auto& id : table.cpg_ids) {
    ASSERT_EQ(id.size(), 10u) << id;
    EXPECT_EQ(id.substr(0, 2), "cg");
    EXPECT_TRUE(std::all_of(id.begin() + 2, id.end(), [](char c) { return c >= '0' && c <= '9'; })) << id;
  }
  int64_t missing = 0;
  for (float v : table.values) {
    if (std::isnan(v)) {
      ++missing;
      continue;
    }
    ASSERT_GE(v, 0.0f);
    ASSERT_LE(v, 1.0f);
  }
  EXPECT_EQ(missing, table.missing_count());
  // 20,000 cells at 0.001: P(none missing) is about 2e-9.
  EXPECT_GT(missing, 0);
  EXPECT_LT(missing, 100);

  const auto volume = qkv::medical::read_nifti(manifest.subjects[0].spect_path);
  EXPECT_EQ(volume.dims, (std::array<int64_t, 3>{45, 54, 45}));
  EXPECT_TRUE(std::all_of(volume.voxels.begin(), volume.voxels.end(), [](float v) { return v >= 0; }));
  EXPECT_GT(*std::max_element(volume.voxels.begin(), volume.voxels.end()), 0.5f);
}

TEST_F(SynthCohortTest, ProgressCountsEveryVolumeOnce) {
  ASSERT_FALSE(progress_->empty());
  EXPECT_EQ(progress_->back(), (std::pair<int64_t, int64_t>{40, 40}));
  for (size_t i = 1; i < progress_->size(); ++i) EXPECT_EQ((*progress_)[i].first, (*progress_)[i - 1].first + 1);
}

// Voxel edges (-1/2 and n - 1/2) of a coarse grid land on those of the MNI
// 2 mm grid, so the coarse volume overlays the same brain.
void expect_mni_field_of_view(const qkv::medical::Volume& volume) {
  const auto mni = qkv::medical::mni_2mm_geometry();
  qkv::medical::Volume reference;
  reference.geometry = mni;
  const auto& n = volume.dims;
  const auto low = world(volume, -0.5, -0.5, -0.5), low_ref = world(reference, -0.5, -0.5, -0.5);
  const auto high = world(volume, n[0] - 0.5, n[1] - 0.5, n[2] - 0.5), high_ref = world(reference, 90.5, 108.5, 90.5);
  for (int d = 0; d < 3; ++d) {
    EXPECT_NEAR(low[d], low_ref[d], 1e-3) << d;
    EXPECT_NEAR(high[d], high_ref[d], 1e-3) << d;
    EXPECT_NEAR(volume.geometry.spacing[d], 2.0 * (d == 1 ? 109 : 91) / n[d], 1e-4) << d;
  }
  EXPECT_EQ(volume.geometry.sform_code, mni.sform_code);
}

TEST_F(SynthCohortTest, CoarseGridsCoverTheMniFieldOfView) {
  expect_mni_field_of_view(qkv::medical::read_nifti(file("spect/sub-0001.nii.gz")));
  expect_mni_field_of_view(qkv::medical::read_nifti(file("striatum_mask.nii.gz")));

  auto options = small_options();
  options.subjects = 3;
  options.shape = {23, 27, 23};
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_8mm");
  write_synth_cohort(dir, options);
  const auto volume = qkv::medical::read_nifti((fs::path(dir) / "spect/sub-0001.nii.gz").string());
  ASSERT_EQ(volume.dims, (std::array<int64_t, 3>{23, 27, 23}));
  expect_mni_field_of_view(volume);
  fs::remove_all(dir);
}

// How the CLI honours Ctrl-C: the callback throws, the run stops, and the
// folder has no manifest, the mark of a complete cohort.
TEST(SynthCohortProgress, ThrowingFromProgressStopsTheRunWithoutAManifest) {
  struct Stop {};
  auto options = small_options();
  options.subjects = 12;
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_stopped");
  int64_t last = -1;
  EXPECT_THROW(write_synth_cohort(dir, options,
                                  [&](int64_t done, int64_t) {
                                    last = done;
                                    if (done == 3) throw Stop{};
                                  }),
               Stop);
  EXPECT_EQ(last, 3);
  EXPECT_FALSE(fs::exists(fs::path(dir) / "manifest.csv"));
  fs::remove_all(dir);
}

TEST(SynthCohortGrid, FullSizeGridIsTheMniGrid) {
  auto options = small_options();
  options.subjects = 2;
  options.shape = {91, 109, 91};
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_2mm");
  write_synth_cohort(dir, options);
  const auto volume = qkv::medical::read_nifti((fs::path(dir) / "spect/sub-0001.nii.gz").string());
  const auto mni = qkv::medical::mni_2mm_geometry();
  EXPECT_EQ(volume.dims, (std::array<int64_t, 3>{91, 109, 91}));
  for (int e = 0; e < 16; ++e) EXPECT_NEAR(volume.geometry.sform[e], mni.sform[e], 1e-6) << e;
  fs::remove_all(dir);
}

TEST_F(SynthCohortTest, StriatumMaskLabelsSitWhereTheyAreNamed) {
  const auto mask = qkv::medical::read_nifti(file("striatum_mask.nii.gz"));
  ASSERT_EQ(mask.dims, (std::array<int64_t, 3>{45, 54, 45}));
  std::array<std::array<double, 3>, 5> centroid{};
  std::array<int64_t, 5> count{};
  for (int64_t k = 0; k < mask.dims[2]; ++k)
    for (int64_t j = 0; j < mask.dims[1]; ++j)
      for (int64_t i = 0; i < mask.dims[0]; ++i) {
        const int label = static_cast<int>(mask.at(i, j, k));
        ASSERT_GE(label, 0);
        ASSERT_LE(label, 4);
        const auto p = world(mask, i, j, k);
        for (int d = 0; d < 3; ++d) centroid[label][d] += p[d];
        ++count[label];
      }
  for (int l = 1; l <= 4; ++l) {
    ASSERT_GT(count[l], 0) << "label " << l;
    for (int d = 0; d < 3; ++d) centroid[l][d] /= count[l];
  }
  EXPECT_LT(centroid[1][0], 0);  // left caudate
  EXPECT_GT(centroid[2][0], 0);
  EXPECT_LT(centroid[3][0], 0);  // left putamen
  EXPECT_GT(centroid[4][0], 0);
  // The putamen lies lateral to the caudate.
  EXPECT_GT(std::abs(centroid[3][0]), std::abs(centroid[1][0]));
  EXPECT_GT(std::abs(centroid[4][0]), std::abs(centroid[2][0]));
}

// Per subject: label, region means measured through the mask, truth.
struct Measured {
  int64_t label;
  double caudate_left, caudate_right, putamen_left, putamen_right;
  json truth;
};

std::vector<Measured> measure(const std::string& dir) {
  const auto manifest = qkv::medical::read_manifest((fs::path(dir) / "manifest.csv").string());
  const auto mask = qkv::medical::read_nifti((fs::path(dir) / "striatum_mask.nii.gz").string());
  const auto truth = read_json((fs::path(dir) / "ground_truth.json").string());
  std::vector<Measured> out;
  for (size_t i = 0; i < manifest.subjects.size(); ++i) {
    const auto means = region_means(qkv::medical::read_nifti(manifest.subjects[i].spect_path), mask);
    out.push_back({manifest.subjects[i].label, means[1], means[2], means[3], means[4], truth["subjects"][i]});
  }
  return out;
}

void expect_pd_putamen_lower_and_asymmetric(const std::vector<Measured>& subjects) {
  std::array<double, 2> uptake{}, putamen_to_caudate{}, asymmetry{}, n{};
  for (const auto& s : subjects) {
    const double putamen = s.putamen_left + s.putamen_right, caudate = s.caudate_left + s.caudate_right;
    uptake[s.label] += putamen / 2;
    putamen_to_caudate[s.label] += putamen / caudate;
    asymmetry[s.label] += std::abs(s.putamen_left - s.putamen_right) / putamen;
    n[s.label] += 1;
  }
  for (int l = 0; l < 2; ++l) {
    ASSERT_GT(n[l], 0);
    uptake[l] /= n[l];
    putamen_to_caudate[l] /= n[l];
    asymmetry[l] /= n[l];
  }
  // Raw uptake carries each scan's calibration (15%); the putamen / caudate
  // ratio does not, and PD takes more from the putamen.
  EXPECT_LT(uptake[1], uptake[0]) << "PD " << uptake[1] << " control " << uptake[0];
  EXPECT_LT(putamen_to_caudate[1], 0.95 * putamen_to_caudate[0])
      << "PD " << putamen_to_caudate[1] << " control " << putamen_to_caudate[0];
  EXPECT_GT(asymmetry[1], 1.5 * asymmetry[0]) << "PD " << asymmetry[1] << " control " << asymmetry[0];
}

TEST_F(SynthCohortTest, PdPutamenUptakeIsLowerAndMoreAsymmetric) {
  const auto subjects = measure(*dir_);
  expect_pd_putamen_lower_and_asymmetric(subjects);
  // The hemisphere ground truth calls affected is the dimmer one in clearly affected PD.
  int64_t agree = 0, clear = 0;
  for (const auto& s : subjects) {
    if (s.label != 1 || s.truth["severity"].get<double>() < 0.5) continue;
    ++clear;
    const bool left_dimmer = s.putamen_left < s.putamen_right;
    agree += left_dimmer == (s.truth["affected_side"] == "left");
  }
  ASSERT_GE(clear, 5);
  EXPECT_GE(agree, clear * 8 / 10) << agree << " of " << clear;
}

TEST_F(SynthCohortTest, GroundTruthListsThePlantedSitesAndTheyCarrySignal) {
  const auto truth = read_json(file("ground_truth.json"));
  const auto table = qkv::medical::read_methylation_table(file("methylation.csv"));
  std::map<std::string, int64_t> column;
  for (int64_t c = 0; c < table.cols(); ++c) column[table.cpg_ids[c]] = c;

  std::vector<int64_t> class_columns, putamen_columns;
  std::set<int64_t> planted;
  for (const auto& site : truth["informative_sites"]) {
    const std::string id = site["id"];
    ASSERT_EQ(column.count(id), 1u) << id;
    EXPECT_EQ(site["column"].get<int64_t>(), column[id]);
    (site["kind"] == "class" ? class_columns : putamen_columns).push_back(column[id]);
    planted.insert(column[id]);
  }
  EXPECT_EQ(class_columns.size(), 30u);
  EXPECT_EQ(putamen_columns.size(), 15u);
  EXPECT_EQ(planted.size(), 45u);
  EXPECT_GT(*planted.rbegin(), 44);  // not simply the first columns
  for (const auto& site : truth["nuisance_sites"]) EXPECT_EQ(planted.count(site["column"].get<int64_t>()), 0u);

  const auto manifest = qkv::medical::read_manifest(file("manifest.csv"));
  auto class_difference = [&](int64_t c) {
    std::array<double, 2> sum{}, n{};
    for (int64_t r = 0; r < table.rows(); ++r) {
      const float v = table.at(r, c);
      if (std::isnan(v)) continue;
      sum[manifest.subjects[r].label] += v;
      n[manifest.subjects[r].label] += 1;
    }
    return std::abs(sum[1] / n[1] - sum[0] / n[0]);
  };
  std::vector<double> background, planted_class;
  for (int64_t c = 0; c < table.cols(); ++c)
    if (!planted.count(c)) background.push_back(class_difference(c));
  for (int64_t c : class_columns) planted_class.push_back(class_difference(c));
  const double background_median = median(background);
  int64_t above = 0;
  for (double d : planted_class) above += d > background_median;
  EXPECT_GT(median(planted_class), 2 * background_median);
  EXPECT_GE(above, 24) << "of 30 class sites above the median background site";

  // Putamen sites follow each subject's true mean putamen binding ratio.
  std::vector<double> correlations;
  for (const auto& site : truth["informative_sites"]) {
    if (site["kind"] != "putamen") continue;
    const int64_t c = column[site["id"].get<std::string>()];
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, n = 0;
    for (int64_t r = 0; r < table.rows(); ++r) {
      const double y = table.at(r, c);
      if (std::isnan(y)) continue;
      const double x = truth["subjects"][r]["mean_putamen_binding_ratio"];
      sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, n += 1;
    }
    const double r = (sxy - sx * sy / n) / std::sqrt((sxx - sx * sx / n) * (syy - sy * sy / n));
    correlations.push_back(site["nominal_correlation"].get<double>() > 0 ? r : -r);
  }
  EXPECT_GT(median(correlations), 0.3);
}

std::vector<std::string> relative_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

bool same_bytes(const std::string& a, const std::string& b) {
  return qkv::read_file_bytes(a) == qkv::read_file_bytes(b);
}

TEST_F(SynthCohortTest, SameSeedSameBytesWhateverTheThreadsAndAnotherSeedDiffers) {
  auto options = small_options();
  options.threads = 1;
  const std::string one_thread = qkv::testing::fresh_dir("synth_cohort_threads1");
  write_synth_cohort(one_thread, options);
  const auto files = relative_files(*dir_);
  ASSERT_EQ(files, relative_files(one_thread));
  ASSERT_EQ(files.size(), 40u + 4u);
  for (const auto& f : files) EXPECT_TRUE(same_bytes(file(f), (fs::path(one_thread) / f).string())) << f;
  fs::remove_all(one_thread);

  options.threads = 2;
  options.seed = 2;
  const std::string other_seed = qkv::testing::fresh_dir("synth_cohort_seed2");
  write_synth_cohort(other_seed, options);
  EXPECT_FALSE(same_bytes(file("methylation.csv"), (fs::path(other_seed) / "methylation.csv").string()));
  EXPECT_FALSE(same_bytes(file("spect/sub-0001.nii.gz"), (fs::path(other_seed) / "spect/sub-0001.nii.gz").string()));
  EXPECT_FALSE(same_bytes(file("ground_truth.json"), (fs::path(other_seed) / "ground_truth.json").string()));
  // The anatomy does not depend on the seed.
  EXPECT_TRUE(same_bytes(file("striatum_mask.nii.gz"), (fs::path(other_seed) / "striatum_mask.nii.gz").string()));
  fs::remove_all(other_seed);
}

TEST(SynthCohortAtlas, AichaStriatumGivesTheSameDiseasePattern) {
  if (!fs::exists(kAicha)) GTEST_SKIP() << kAicha << " is not installed";
  auto options = small_options();
  options.atlas = "auto";
  options.shape = {23, 27, 23};
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_aicha");
  const auto summary = write_synth_cohort(dir, options);
  EXPECT_EQ(summary.atlas_used, kAicha);
  const auto truth = read_json((fs::path(dir) / "ground_truth.json").string());
  EXPECT_EQ(truth["atlas"]["used"], kAicha);
  std::set<std::string> structures;
  for (const auto& region : truth["atlas"]["striatal_regions"]) {
    const std::string name = region["name"];
    EXPECT_TRUE(name.find("Caudate") != std::string::npos || name.find("Putamen") != std::string::npos) << name;
    structures.insert(region["structure"].get<std::string>());
  }
  EXPECT_EQ(structures, (std::set<std::string>{"caudate", "putamen"}));

  const auto mask = qkv::medical::read_nifti((fs::path(dir) / "striatum_mask.nii.gz").string());
  std::array<int64_t, 5> count{};
  for (int64_t k = 0; k < mask.dims[2]; ++k)
    for (int64_t j = 0; j < mask.dims[1]; ++j)
      for (int64_t i = 0; i < mask.dims[0]; ++i) {
        const int label = static_cast<int>(mask.at(i, j, k));
        ++count[label];
        if (label == 0) continue;
        const double x = world(mask, i, j, k)[0];
        if (label == 1 || label == 3) {
          EXPECT_LT(x, 0) << "label " << label << " at x " << x;
        } else {
          EXPECT_GT(x, 0) << "label " << label << " at x " << x;
        }
      }
  for (int l = 1; l <= 4; ++l) EXPECT_GT(count[l], 0) << "label " << l;
  expect_pd_putamen_lower_and_asymmetric(measure(dir));
  fs::remove_all(dir);
}

TEST(SynthCohortAtlas, MissingAtlasFileIsADataErrorNamingIt) {
  auto options = small_options();
  options.subjects = 4;
  const std::string atlas = qkv::testing::temp_path("no_such_atlas.nii.gz");
  options.atlas = atlas;
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_bad_atlas");
  qkv::testing::expect_data_error([&] { write_synth_cohort(dir, options); }, atlas, "not found");
  fs::remove_all(dir);
}

using qkv::testing::usage_error_of;

TEST(SynthCohortOptionsTest, BadOptionsAreUsageErrorsNamingTheOption) {
  auto bad = [](auto change) {
    auto o = small_options();
    change(o);
    return usage_error_of([&] { o.validate(); });
  };
  EXPECT_NE(bad([](auto& o) { o.pd_fraction = 1.5; }).find("pd_fraction"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.pd_fraction = 0; }).find("pd_fraction"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.pd_fraction = 0.01; }).find("pd_fraction"), std::string::npos);  // 0 PD of 40
  EXPECT_NE(bad([](auto& o) { o.subjects = 1; }).find("subjects"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.cpg = 45; }).find("cpg"), std::string::npos);  // all planted
  EXPECT_NE(bad([](auto& o) { o.shape = {4, 27, 23}; }).find("shape"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.missing_fraction = -0.1; }).find("missing_fraction"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.planted_class_sites = -1; }).find("planted_class_sites"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.planted_interaction_sites = -1; }).find("planted_interaction_sites"),
            std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.threads = -1; }).find("threads"), std::string::npos);
  EXPECT_EQ(bad([](auto&) {}), "(no UsageError)");

  // write_synth_cohort validates before touching the disk.
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_bad_option");
  auto o = small_options();
  o.subjects = 1;
  EXPECT_NE(usage_error_of([&] { write_synth_cohort(dir, o); }).find("subjects"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(SynthCohortOptionsTest, AFileWhereTheFolderShouldBeIsRefused) {
  // Whether a non-empty folder may be written into is the CLI's overwrite
  // policy (tests/cli/overwrite_test.cpp); the writer refuses a file in the way.
  const std::string dir = qkv::testing::fresh_dir("synth_cohort_file");
  qkv::testing::write_text_file(dir, "mine\n");
  const auto message = usage_error_of([&] { write_synth_cohort(dir, small_options()); });
  EXPECT_NE(message.find("not a folder"), std::string::npos) << message;
  std::ifstream in(dir);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "mine");
  fs::remove_all(dir);
}

}  // namespace

// The cross-modal benchmark's sites: in PD each follows its region's binding
// ratio, in controls nothing; neither modality alone shows them. Adding them
// leaves the volumes and the other planted sites as they were.
TEST(SynthCohortInteraction, SitesFollowTheirRegionInPdOnlyAndTheRestOfTheCohortStays) {
  auto options = small_options();
  options.subjects = 160;
  options.pd_fraction = 0.5;
  options.cpg = 300;
  options.shape = {23, 27, 23};
  options.seed = 4;
  const std::string plain = qkv::testing::fresh_dir("synth_interaction_plain");
  write_synth_cohort(plain, options);
  options.planted_interaction_sites = 8;
  const std::string crossed = qkv::testing::fresh_dir("synth_interaction");
  write_synth_cohort(crossed, options);
  auto in = [](const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); };

  for (const auto& f : relative_files(in(plain, "spect")))
    EXPECT_TRUE(same_bytes(in(plain, "spect/" + f), in(crossed, "spect/" + f))) << f;
  EXPECT_TRUE(same_bytes(in(plain, "manifest.csv"), in(crossed, "manifest.csv")));

  const auto truth = read_json(in(crossed, "ground_truth.json"));
  const auto plain_truth = read_json(in(plain, "ground_truth.json"));
  const auto table = qkv::medical::read_methylation_table(in(crossed, "methylation.csv"));
  const auto plain_table = qkv::medical::read_methylation_table(in(plain, "methylation.csv"));
  ASSERT_EQ(table.cpg_ids, plain_table.cpg_ids);
  EXPECT_EQ(truth["options"]["planted_interaction_sites"], 8);
  // Class and putamen sites: the same columns with the same values.
  std::vector<json> interactions;
  for (const auto& site : truth["informative_sites"])
    if (site["kind"] == "interaction") interactions.push_back(site);
  std::vector<json> others;
  for (const auto& site : truth["informative_sites"])
    if (site["kind"] != "interaction") others.push_back(site);
  ASSERT_EQ(others.size(), plain_truth["informative_sites"].size());
  for (size_t i = 0; i < others.size(); ++i) {
    ASSERT_EQ(others[i]["id"], plain_truth["informative_sites"][i]["id"]);
    const int64_t c = others[i]["column"];
    for (int64_t r = 0; r < table.rows(); ++r) {
      const float a = table.at(r, c), b = plain_table.at(r, c);
      EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << others[i]["id"] << " row " << r;
    }
  }

  ASSERT_EQ(interactions.size(), 8u);
  const std::vector<std::string> regions = {"left caudate", "right caudate", "left putamen", "right putamen"};
  std::vector<double> in_pd, in_controls, mean_shift;
  std::map<std::string, int> per_region;
  for (const auto& site : interactions) {
    const std::string region = site["region"];
    const auto named = std::find(regions.begin(), regions.end(), region);
    ASSERT_NE(named, regions.end()) << region;
    EXPECT_EQ(site["striatum_mask_label"], named - regions.begin() + 1) << region;
    ++per_region[region];
    const std::string side = region.substr(0, region.find(' '));
    const std::string structure = region.substr(region.find(' ') + 1) + "_binding_ratio";
    const int64_t c = site["column"];
    // Correlation with the region's true BR, per class; standardized PD - control mean difference.
    std::array<std::array<double, 6>, 2> s{};  // n, sx, sy, sxx, syy, sxy
    for (int64_t r = 0; r < table.rows(); ++r) {
      const double y = table.at(r, c);
      if (std::isnan(y)) continue;
      const auto& subject = truth["subjects"][r];
      const double x = subject[structure][side];
      auto& a = s[subject["label"].get<int>()];
      a[0] += 1, a[1] += x, a[2] += y, a[3] += x * x, a[4] += y * y, a[5] += x * y;
    }
    auto correlation = [](const std::array<double, 6>& a) {
      const double n = a[0];
      return (a[5] - a[1] * a[2] / n) / std::sqrt((a[3] - a[1] * a[1] / n) * (a[4] - a[2] * a[2] / n));
    };
    const double sign = site["nominal_correlation_in_pd"].get<double>() > 0 ? 1 : -1;
    in_pd.push_back(sign * correlation(s[1]));
    in_controls.push_back(std::abs(correlation(s[0])));
    const double sd0 = std::sqrt((s[0][4] - s[0][2] * s[0][2] / s[0][0]) / (s[0][0] - 1));
    mean_shift.push_back(std::abs(s[1][2] / s[1][0] - s[0][2] / s[0][0]) / sd0);
  }
  for (const auto& region : regions) EXPECT_EQ(per_region[region], 2) << region;  // in turn
  EXPECT_GT(median(in_pd), 0.45);
  EXPECT_LT(median(in_controls), 0.2);
  EXPECT_LT(median(mean_shift), 0.25) << "an interaction site's mean should not tell PD from controls";
  fs::remove_all(plain);
  fs::remove_all(crossed);
}
