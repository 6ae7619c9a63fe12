#pragma once
// Results that look like a model that learned nothing useful, said in words
// next to the numbers (terminal and report.html), since a table of metrics
// does not shout: a classifier predicting (nearly) one class for everything,
// a binary classifier with sensitivity or specificity 0, an AUROC at or
// below chance.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::train {

// One predicted class for at least this share of the samples, where that
// class is a smaller share of the true labels (by kOneClassExcess at least),
// is "(nearly) one class for everything": our choice.
inline constexpr double kOneClassShare = 0.9;
inline constexpr double kOneClassExcess = 0.25;
inline constexpr int64_t kOneClassMinSamples = 5;  // fewer say nothing

// The warnings one split's metrics deserve (a summary's "test", "val", ... or
// an eval's JSON), each a sentence without the split's name: read from
// "confusion" (rows true, columns predicted) with "classes", from binary
// counts "tp", "fp", "tn", "fn", and from "sensitivity", "specificity",
// "auroc" (a number, or {"mean": ...} as cross validation reports them).
// Keys that are missing or null are not judged; without `judge_auroc` AUROC
// is not (a small part, such as one fold, can rank below chance by chance).
std::vector<std::string> degenerate_result_warnings(const nlohmann::json& metrics, bool judge_auroc = true);

// The warnings of every evaluated split of a run summary ("val", "test",
// "test_*"), each as "<split>: <warning>", the split named as the results
// name it (split_label, report.h: "test so3" for an i/so3 run's "test").
std::vector<std::string> summary_warnings(const nlohmann::json& summary, const std::string& test_label = "");

}  // namespace qkv::train
