// Results that deserve a warning get one, results that do not get none, in
// the terminal summary and in report.html alike.
#include "qkv/train/result_warnings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qkv/train/report.h"
#include "qkv/train/run.h"

namespace {

using qkv::train::degenerate_result_warnings;

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

TEST(ResultWarnings, OneClassPredictedForNearlyEveryShapeIsNamed) {
  // 3 classes of 10; 28 of 30 predicted 'chair'.
  const nlohmann::json degenerate = {{"confusion", {{10, 0, 0}, {9, 1, 0}, {9, 0, 1}}},
                                     {"classes", {"chair", "lamp", "table"}}};
  const auto w = degenerate_result_warnings(degenerate);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("predicts 'chair' for 28 of 30 (93 %), though 33 % are"), std::string::npos) << w[0];
  // A good classifier, and one whose data are mostly one class anyway, are not warned about.
  EXPECT_TRUE(degenerate_result_warnings({{"confusion", {{9, 1, 0}, {1, 8, 1}, {0, 2, 8}}}}).empty());
  EXPECT_TRUE(degenerate_result_warnings({{"confusion", {{46, 0}, {4, 0}}}}).empty());
  // Too few samples to judge.
  EXPECT_TRUE(degenerate_result_warnings({{"confusion", {{1, 0}, {2, 0}}}}).empty());
}

TEST(ResultWarnings, BinaryZerosAndChanceAurocAreSaid) {
  // Every subject predicted positive: one message, not three.
  const nlohmann::json all_pd = {{"tp", 30},           {"fn", 0},      {"fp", 30}, {"tn", 0}, {"sensitivity", 1.0},
                                 {"specificity", 0.0}, {"auroc", 0.61}};
  const auto w = degenerate_result_warnings(all_pd);
  ASSERT_EQ(w.size(), 1u) << w[0];
  EXPECT_NE(w[0].find("predicts the positive class for 60 of 60 (100 %), though 50 % are"), std::string::npos);
  // Specificity 0 on a cohort that is mostly positive is still said.
  const nlohmann::json mostly_pd = {{"tp", 45}, {"fn", 0}, {"fp", 5}, {"tn", 0}, {"specificity", 0.0}};
  EXPECT_TRUE(any_contains(degenerate_result_warnings(mostly_pd), "specificity 0"));
  EXPECT_TRUE(any_contains(degenerate_result_warnings({{"sensitivity", 0.0}}), "sensitivity 0"));
  EXPECT_TRUE(any_contains(degenerate_result_warnings({{"auroc", 0.48}}), "AUROC 0.480 <= 0.5"));
  // Cross validation's {mean, std} values are judged by their mean.
  EXPECT_TRUE(
      any_contains(degenerate_result_warnings({{"specificity", {{"mean", 0.0}, {"std", 0.0}}}}), "specificity 0"));
  const nlohmann::json fine = {{"tp", 25},           {"fn", 5},      {"fp", 6}, {"tn", 24}, {"sensitivity", 0.83},
                               {"specificity", 0.8}, {"auroc", 0.88}};
  EXPECT_TRUE(degenerate_result_warnings(fine).empty());
  EXPECT_TRUE(degenerate_result_warnings({{"auroc", nullptr}, {"sensitivity", nullptr}}).empty());
}

TEST(ResultWarnings, TheSummaryAndTheReportCarryThem) {
  const nlohmann::json one_class = {{"accuracy", 0.1}, {"confusion", {{5, 0}, {45, 0}}}, {"classes", {"cube", "cone"}}};
  const nlohmann::json summary = {{"selected_epoch", 1},        {"epochs", 1},       {"selected_by", "val_accuracy"},
                                  {"val", {{"accuracy", 0.9}}}, {"test", one_class}, {"test_so3", one_class}};
  const auto warnings = qkv::train::summary_warnings(summary);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].rfind("test: predicts 'cube' for 50 of 50", 0), 0u) << warnings[0];
  EXPECT_EQ(warnings[1].rfind("test so3: ", 0), 0u) << warnings[1];  // as the results name the split
  const auto text = qkv::train::run_summary_text(summary, "/nonexistent", "z");
  EXPECT_NE(text.find("warning: test z: predicts 'cube'"), std::string::npos) << text;
  const auto html = qkv::train::render_report_html("run", nlohmann::json::array(), summary, nlohmann::json::object());
  EXPECT_NE(html.find("<div class=\"warn\"><b>Warnings</b>"), std::string::npos);
  EXPECT_NE(html.find("test so3: predicts &#39;cube&#39;"), std::string::npos);
  // A healthy run's report has no box.
  const nlohmann::json healthy = {{"test", {{"accuracy", 0.9}, {"confusion", {{24, 1}, {4, 21}}}}}};
  EXPECT_EQ(qkv::train::render_report_html("run", nlohmann::json::array(), healthy, nlohmann::json::object())
                .find("class=\"warn\""),
            std::string::npos);
}

}  // namespace
