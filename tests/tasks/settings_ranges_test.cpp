// Each setting's range is written once, in its field description
// (core/fields.h): the CLI checks the typed text against it, and validate()
// must hold a struct filled in code (Python, recipes, tests) to the same
// range. For every numeric field of the settings structs of the train,
// optimizer, spirals, lm, vnt, seg and mhca tasks, a value just outside each
// bound is refused by validate() with a ConfigError naming that field's key.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/fields.h"
#include "qkv/data/lm_data.h"
#include "qkv/synth_cohort/synth_cohort.h"
#include "qkv/tasks/classification.h"
#include "qkv/tasks/lm_task.h"
#include "qkv/tasks/mhca_commands.h"
#include "qkv/tasks/mhca_task.h"
#include "qkv/tasks/part_segmentation.h"
#include "qkv/tasks/spirals_task.h"
#include "qkv/train/trainer.h"
#include "support/build_parts.h"
#include "support/test_files.h"

namespace {

using qkv::testing::config_error_key_of;

// A value of type T just below (low) or above the bound, if T can hold it
// exactly enough to be outside; nothing for bounds beyond 2^50 (seeds).
template <typename T>
bool outside_value(const qkv::Field& f, bool low, double* out) {
  const double bound = low ? f.min : f.max;
  if (std::fabs(bound) > 1e15) return false;
  const bool open = low ? f.min_open : f.max_open;
  double v = bound;
  if (!open) {
    if constexpr (std::is_integral_v<T>)
      v = low ? bound - 1 : bound + 1;
    else
      v = std::nextafter(bound, low ? -INFINITY : INFINITY);
  }
  if (v < static_cast<double>(std::numeric_limits<T>::lowest())) return false;  // e.g. -1 for an unsigned
  *out = v;
  return true;
}

// For each numeric field of `valid` with a range, and each bound: a copy with
// that field just outside the bound is refused by `validate`, naming the key.
// Returns how many cases were checked. (visit_fields is found by
// argument-dependent lookup, in each struct's namespace.)
template <typename S>
int expect_ranges_enforced(const S& valid, const std::function<void(const S&)>& validate, const char* what) {
  EXPECT_EQ(config_error_key_of([&] { validate(valid); }), "(no ConfigError)")
      << what << ": the starting settings must be valid";
  struct Case {
    std::string key;
    double value;
  };
  std::vector<Case> cases;
  S probe = valid;
  visit_fields(probe, [&](const qkv::Field& f, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const bool has_min = f.min != -std::numeric_limits<double>::max();
      const bool has_max = f.max != std::numeric_limits<double>::max();
      double v = 0;
      if (has_min && outside_value<T>(f, true, &v)) cases.push_back({f.key, v});
      if (has_max && outside_value<T>(f, false, &v)) cases.push_back({f.key, v});
    }
  });
  for (const auto& c : cases) {
    S bad = valid;
    visit_fields(bad, [&](const qkv::Field& f, auto& value) {
      using T = std::decay_t<decltype(value)>;
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
        if (c.key == f.key) value = static_cast<T>(c.value);
    });
    EXPECT_EQ(config_error_key_of([&] { validate(bad); }), c.key) << what << ": " << c.key << " = " << c.value;
  }
  return static_cast<int>(cases.size());
}

template <typename S>
int expect_ranges_enforced(const S& valid, const char* what) {
  return expect_ranges_enforced<S>(
      valid, [](const S& s) { s.validate(); }, what);
}

}  // namespace

TEST(SettingsRanges, TrainingSettingsHoldTheirFieldsRanges) {
  EXPECT_GE(expect_ranges_enforced(qkv::train::TrainConfig{}, "train"), 20);
  EXPECT_GE(expect_ranges_enforced(qkv::train::OptimConfig{}, "optimizer"), 10);
}

TEST(SettingsRanges, DataSettingsHoldTheirFieldsRanges) {
  EXPECT_GE(expect_ranges_enforced(qkv::tasks::SpiralsData{}, "spirals"), 10);
  EXPECT_GE(expect_ranges_enforced(qkv::tasks::LmData{}, "lm"), 10);
  EXPECT_GE(expect_ranges_enforced(qkv::data::LmTaskOptions{}, "lm task"), 8);
  EXPECT_GE(expect_ranges_enforced(qkv::tasks::ClassificationData{}, "vnt"), 15);
  EXPECT_GE(expect_ranges_enforced(qkv::tasks::PartSegData{}, "seg"), 15);
  EXPECT_GE(expect_ranges_enforced(qkv::medical::SynthCohortOptions{}, "mhca synth"), 15);
  qkv::tasks::MhcaTrainData mhca;
  mhca.manifest = "manifest.csv";
  mhca.methylation = "methylation.csv";
  EXPECT_GE(expect_ranges_enforced(mhca, "mhca train"), 20);
  EXPECT_GE(expect_ranges_enforced<qkv::medical::Augmentation>(
                {}, [](const auto& a) { qkv::tasks::validate_augmentation(a); }, "augmentation"),
            5);
}

TEST(SettingsRanges, ChoicesAreCheckedLikeRanges) {
  qkv::train::TrainConfig train;
  train.optim.schedule = "linear";
  EXPECT_EQ(config_error_key_of([&] { train.validate(); }), "schedule");
  qkv::tasks::ClassificationData vnt;
  vnt.view.sampling = "grid";
  EXPECT_EQ(config_error_key_of([&] { vnt.validate(); }), "sampling");
  qkv::medical::Augmentation augmentation;
  augmentation.mode = "twice";
  EXPECT_EQ(config_error_key_of([&] { qkv::tasks::validate_augmentation(augmentation); }), "augment_mode");
}

// mhca cv's own fields are checked by their field list before the cohort is
// read (prepare_cv_options), with the bound the cross validation needs.
TEST(SettingsRanges, CrossValidationFieldsAreCheckedBeforeTheCohort) {
  QKV_SKIP_WITHOUT(qkv::Part::XGBoost);
  const auto refused = [](const std::function<void(qkv::tasks::CVOptions&)>& change) {
    qkv::tasks::CVOptions cv;
    change(cv);
    return config_error_key_of(
        [&] { qkv::tasks::prepare_cv_options(cv, {"paper"}, "{}", "", [](const std::string&) { return false; }); });
  };
  EXPECT_EQ(refused([](auto&) {}), "(no ConfigError)");
  EXPECT_EQ(refused([](auto& cv) { cv.val_fraction = 0.5; }), "val_fraction");
  EXPECT_EQ(refused([](auto& cv) { cv.val_fraction = 0; }), "val_fraction");
  EXPECT_EQ(refused([](auto& cv) { cv.folds = 1; }), "folds");
  EXPECT_EQ(refused([](auto& cv) { cv.normalisation = "none"; }), "normalisation");
}

// What the point tasks' shared half checks besides the ranges: a source, and
// no more points per view than a shape holds, said as each task stores them.
TEST(SettingsRanges, PointDataNeedASourceAndEnoughStoredPoints) {
  const auto message = [](const auto& d) {
    try {
      d.validate();
    } catch (const qkv::ConfigError& e) {
      return e.key + ": " + e.problem;
    }
    return std::string("(accepted)");
  };
  qkv::tasks::ClassificationData vnt;
  vnt.load.points_per_shape = 100;
  vnt.view.num_points = 100;
  EXPECT_EQ(message(vnt), "(accepted)");
  vnt.view.num_points = 101;
  EXPECT_EQ(message(vnt), "points: 101 is more than the 100 points stored per shape");
  vnt.view.num_points = 64;
  vnt.source = "";
  EXPECT_EQ(message(vnt), "source: must be 'synthetic' or a folder");
  qkv::tasks::PartSegData seg;
  seg.load.points_per_shape = 1000;
  EXPECT_EQ(message(seg), "points: 2048 is more than the 1000 points each shape is resampled to");
}

// compare measures invariance on as many shapes as eval may: the same field's
// range, checked before any run is read.
TEST(SettingsRanges, CompareTakesEvalsInvarianceRange) {
  const c10::Device cpu(c10::kCPU);
  for (const auto* compare : {&qkv::tasks::kClassificationCompare, &qkv::tasks::kPartSegmentationCompare}) {
    for (const int64_t shapes : {int64_t{-1}, int64_t{100001}})
      EXPECT_EQ(qkv::testing::config_error_key_of([&] { compare->rows({"no-such-run"}, shapes, 0, {}, cpu); }),
                "invariance_shapes")
          << compare->train_command << " " << shapes;
    EXPECT_EQ(qkv::field_range_problem(qkv::tasks::invariance_shapes_field(""), compare->default_shapes), "");
  }
}

// mhca select keeps a number of CpG sites, in its field's range, checked
// before the cohort is read (the files here do not exist); its default is the
// paper's count, which lies in that range.
TEST(SettingsRanges, SelectChecksItsCpgCountBeforeTheCohort) {
  qkv::tasks::CohortFiles files;
  files.manifest = "no-such-manifest.csv";
  files.methylation = "no-such-table.csv";
  for (const int64_t n : {int64_t{0}, int64_t{10000001}}) {
    qkv::tasks::FeatureSelection selection;
    selection.n_features = n;
    EXPECT_EQ(config_error_key_of([&] { qkv::tasks::select_to_file(files, selection, "cpgs.txt", false); }),
              "n_features")
        << n;
  }
  EXPECT_EQ(qkv::field_range_problem(qkv::tasks::select_n_features_field(), qkv::tasks::kPaperCpgSites), "");
}
