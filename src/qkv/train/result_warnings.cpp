#include "qkv/train/result_warnings.h"

#include <cmath>
#include <cstdio>

#include "qkv/train/report.h"

namespace qkv::train {
namespace {

// A metric as a number: a plain number or the mean of {"mean": ...}; NaN when
// missing, null or anything else.
double metric_value(const nlohmann::json& metrics, const char* key) {
  if (!metrics.is_object() || !metrics.contains(key)) return NAN;
  const auto& v = metrics.at(key);
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.contains("mean") && v.at("mean").is_number()) return v.at("mean").get<double>();
  return NAN;
}

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f %%", 100 * share);
  return text;
}

// (Nearly) every sample predicted as class `c`: `predicted` of `total`,
// though `actual` of them are.
bool one_class(int64_t predicted, int64_t actual, int64_t total) {
  if (total < kOneClassMinSamples) return false;
  const double p = static_cast<double>(predicted) / static_cast<double>(total);
  const double a = static_cast<double>(actual) / static_cast<double>(total);
  return p >= kOneClassShare && p - a >= kOneClassExcess;
}

std::string one_class_text(const std::string& name, int64_t predicted, int64_t actual, int64_t total) {
  return "predicts " + name + " for " + std::to_string(predicted) + " of " + std::to_string(total) + " (" +
         percent(static_cast<double>(predicted) / static_cast<double>(total)) + "), though " +
         percent(static_cast<double>(actual) / static_cast<double>(total)) +
         " are: the model has learned little beyond that class";
}

}  // namespace

std::vector<std::string> degenerate_result_warnings(const nlohmann::json& m, bool judge_auroc) {
  std::vector<std::string> out;
  if (!m.is_object()) return out;
  if (m.contains("confusion") && m.at("confusion").is_array()) {
    const auto& confusion = m.at("confusion");
    const size_t n = confusion.size();
    std::vector<int64_t> predicted(n, 0), actual(n, 0);
    int64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!confusion[i].is_array() || confusion[i].size() != n) return out;
      for (size_t j = 0; j < n; ++j) {
        const int64_t v = confusion[i][j].is_number_integer() ? confusion[i][j].get<int64_t>() : 0;
        predicted[j] += v;
        actual[i] += v;
        total += v;
      }
    }
    for (size_t c = 0; c < n; ++c)
      if (one_class(predicted[c], actual[c], total)) {
        std::string name = "class " + std::to_string(c);
        if (m.contains("classes") && m.at("classes").is_array() && c < m.at("classes").size() &&
            m.at("classes")[c].is_string())
          name = "'" + m.at("classes")[c].get<std::string>() + "'";
        out.push_back(one_class_text(name, predicted[c], actual[c], total));
      }
  }
  const bool counts = m.contains("tp") && m.contains("fp") && m.contains("tn") && m.contains("fn") &&
                      m.at("tp").is_number_integer() && m.at("fp").is_number_integer() &&
                      m.at("tn").is_number_integer() && m.at("fn").is_number_integer();
  const size_t before = out.size();
  if (counts) {
    const int64_t tp = m.at("tp"), fp = m.at("fp"), tn = m.at("tn"), fn = m.at("fn");
    const int64_t total = tp + fp + tn + fn;
    if (one_class(tp + fp, tp + fn, total))
      out.push_back(one_class_text("the positive class", tp + fp, tp + fn, total));
    if (one_class(tn + fn, tn + fp, total))
      out.push_back(one_class_text("the negative class", tn + fn, tn + fp, total));
  }
  // Said once: a one-class warning above already implies the zero.
  const double sensitivity = metric_value(m, "sensitivity"), specificity = metric_value(m, "specificity");
  if (out.size() == before) {
    if (sensitivity == 0) out.push_back("sensitivity 0: no positive case was predicted positive");
    if (specificity == 0) out.push_back("specificity 0: every negative case was predicted positive");
  }
  const double auroc = judge_auroc ? metric_value(m, "auroc") : NAN;
  if (auroc <= 0.5) {
    char text[96];
    std::snprintf(text, sizeof text, "AUROC %.3f <= 0.5: the scores rank no better than chance", auroc);
    out.push_back(text);
  }
  return out;
}

std::vector<std::string> summary_warnings(const nlohmann::json& summary, const std::string& test_label) {
  std::vector<std::string> out;
  if (!summary.is_object()) return out;
  std::vector<std::string> splits;
  for (const char* key : {"val", "test"})
    if (summary.contains(key)) splits.push_back(key);
  for (const auto& item : summary.items())
    if (item.key().rfind("test_", 0) == 0) splits.push_back(item.key());
  for (const auto& key : splits)
    for (const auto& w : degenerate_result_warnings(summary.at(key)))
      out.push_back(split_label(key, test_label) + ": " + w);
  return out;
}

}  // namespace qkv::train
