#include "qkv/train/metrics.h"

#include <algorithm>

#include <torch/torch.h>

#include <cmath>
#include <cstdio>

namespace qkv::train {

void AccuracyMetric::add(const at::Tensor& logits, const at::Tensor& target) {
  const int64_t classes = logits.size(-1);
  auto flat_target = target.reshape({-1}).to(torch::kCPU);
  auto predicted = logits.reshape({-1, classes}).argmax(-1).to(torch::kCPU);
  auto scored = flat_target != kIgnoreIndex;
  auto t = flat_target.masked_select(scored);
  auto p = predicted.masked_select(scored);
  if (class_total_.size() < static_cast<size_t>(classes)) {
    class_total_.resize(static_cast<size_t>(classes), 0);
    class_correct_.resize(static_cast<size_t>(classes), 0);
    class_predicted_.resize(static_cast<size_t>(classes), 0);
  }
  auto hit = (p == t);
  correct_ += hit.sum().item<int64_t>();
  total_ += t.numel();
  const auto per_class_total = torch::bincount(t, {}, classes);
  const auto per_class_hit = torch::bincount(t.masked_select(hit), {}, classes);
  const auto per_class_predicted = torch::bincount(p, {}, classes);
  for (int64_t c = 0; c < classes; ++c) {
    class_total_[static_cast<size_t>(c)] += per_class_total[c].item<int64_t>();
    class_correct_[static_cast<size_t>(c)] += per_class_hit[c].item<int64_t>();
    class_predicted_[static_cast<size_t>(c)] += per_class_predicted[c].item<int64_t>();
  }
  if (class_names_.empty()) return;
  const auto n = static_cast<int64_t>(confusion_side(static_cast<size_t>(classes)));
  if (n == 0) {
    // Pairs, not a matrix: what a batch adds is at most its size.
    const auto missed = ~hit;
    const auto mt = t.masked_select(missed), mp = p.masked_select(missed);
    const auto* tv = mt.data_ptr<int64_t>();
    const auto* pv = mp.data_ptr<int64_t>();
    for (int64_t i = 0; i < mt.numel(); ++i) ++confusion_pairs_[{tv[i], pv[i]}];
    return;
  }
  if (confusion_.empty()) confusion_.assign(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
  const auto counts = torch::bincount(t * n + p, {}, n * n);
  const auto* c = counts.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) confusion_[static_cast<size_t>(i)][static_cast<size_t>(j)] += c[i * n + j];
}

size_t AccuracyMetric::confusion_side(size_t classes) const {
  if (class_names_.empty()) return 0;
  const size_t n = std::max(class_names_.size(), classes);
  return n <= kDenseConfusionClasses ? n : 0;
}

nlohmann::json AccuracyMetric::result() const {
  double recall_sum = 0;
  int present = 0;
  for (size_t c = 0; c < class_total_.size(); ++c) {
    if (class_total_[c] == 0) continue;
    recall_sum += static_cast<double>(class_correct_[c]) / static_cast<double>(class_total_[c]);
    ++present;
  }
  nlohmann::json out = {{"accuracy", total_ ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0},
                        {"balanced_accuracy", present ? recall_sum / present : 0.0}};
  if (class_names_.empty()) return out;
  out["classes"] = class_names_;
  if (!confusion_.empty() || confusion_side(class_total_.size()) > 0) {
    out["confusion"] = confusion_;
    if (!confusion_.empty()) out.update(classification_report(confusion_, class_names_));
    return out;
  }
  if (class_total_.empty()) return out;
  out.update(classification_report(class_correct_, class_total_, class_predicted_, class_names_));
  if (!pairs_kept_) return out;
  std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>> pairs(confusion_pairs_.begin(), confusion_pairs_.end());
  const size_t kept = std::min(kTopConfusions, pairs.size());
  std::partial_sort(
      pairs.begin(), pairs.begin() + static_cast<long>(kept), pairs.end(),
      [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  nlohmann::json top = nlohmann::json::array();
  const auto name = [&](int64_t c) {
    return static_cast<size_t>(c) < class_names_.size() ? class_names_[static_cast<size_t>(c)] : std::to_string(c);
  };
  for (size_t k = 0; k < kept; ++k)
    top.push_back(
        {{"true", name(pairs[k].first.first)}, {"predicted", name(pairs[k].first.second)}, {"count", pairs[k].second}});
  out["top_confusions"] = top;
  return out;
}

nlohmann::json classification_report(const std::vector<std::vector<int64_t>>& confusion,
                                     const std::vector<std::string>& classes) {
  const size_t n = confusion.size();
  std::vector<int64_t> hits(n, 0), support(n, 0), predicted(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < confusion[i].size(); ++j) {
      support[i] += confusion[i][j];
      if (j < n) predicted[j] += confusion[i][j];
      if (j == i) hits[i] = confusion[i][j];
    }
  return classification_report(hits, support, predicted, classes);
}

nlohmann::json classification_report(const std::vector<int64_t>& hits, const std::vector<int64_t>& supports,
                                     const std::vector<int64_t>& predicted, const std::vector<std::string>& classes) {
  const size_t n = supports.size();
  auto ratio = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  nlohmann::json rows = nlohmann::json::array();
  double macro[3] = {0, 0, 0}, weighted[3] = {0, 0, 0};
  int64_t counted = 0, support_total = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t support = supports[i], predicted_i = i < predicted.size() ? predicted[i] : 0;
    if (support == 0 && predicted_i == 0) continue;
    const int64_t hit = i < hits.size() ? hits[i] : 0;
    const double precision = ratio(hit, predicted_i), recall = ratio(hit, support);
    const double f1 = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
    rows.push_back({{"class", i < classes.size() ? classes[i] : std::to_string(i)},
                    {"precision", precision},
                    {"recall", recall},
                    {"f1", f1},
                    {"support", support}});
    const double values[3] = {precision, recall, f1};
    for (int k = 0; k < 3; ++k) {
      macro[k] += values[k];
      weighted[k] += values[k] * static_cast<double>(support);
    }
    ++counted;
    support_total += support;
  }
  auto average = [&](const double* sums, double by) {
    return nlohmann::json{{"precision", by > 0 ? sums[0] / by : 0.0},
                          {"recall", by > 0 ? sums[1] / by : 0.0},
                          {"f1", by > 0 ? sums[2] / by : 0.0},
                          {"support", support_total}};
  };
  return {{"per_class", rows},
          {"macro_avg", average(macro, static_cast<double>(counted))},
          {"weighted_avg", average(weighted, static_cast<double>(support_total))}};
}

std::string format_classification_report(const nlohmann::json& report, double accuracy) {
  size_t width = std::string("weighted avg").size();
  for (const auto& row : report.at("per_class")) width = std::max(width, row.at("class").get<std::string>().size());
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%*s %10s %10s %10s %10s\n\n", static_cast<int>(width), "", "precision", "recall",
                "f1-score", "support");
  out += line;
  auto add_row = [&](const std::string& name, const nlohmann::json& r) {
    std::snprintf(line, sizeof line, "%*s %10.4f %10.4f %10.4f %10lld\n", static_cast<int>(width), name.c_str(),
                  r.at("precision").get<double>(), r.at("recall").get<double>(), r.at("f1").get<double>(),
                  static_cast<long long>(r.at("support").get<int64_t>()));
    out += line;
  };
  for (const auto& row : report.at("per_class")) add_row(row.at("class").get<std::string>(), row);
  const auto support = report.at("macro_avg").at("support").get<int64_t>();
  std::snprintf(line, sizeof line, "\n%*s %10s %10s %10.4f %10lld\n", static_cast<int>(width), "accuracy", "", "",
                accuracy, static_cast<long long>(support));
  out += line;
  add_row("macro avg", report.at("macro_avg"));
  add_row("weighted avg", report.at("weighted_avg"));
  return out;
}

std::vector<double> AccuracyMetric::totals() const {
  if (class_total_.empty()) return {};
  std::vector<double> v{static_cast<double>(correct_), static_cast<double>(total_)};
  for (const auto* counts : {&class_correct_, &class_total_, &class_predicted_})
    for (const auto c : *counts) v.push_back(static_cast<double>(c));
  for (const auto& row : confusion_)
    for (const auto c : row) v.push_back(static_cast<double>(c));
  return v;
}

void AccuracyMetric::load_totals(const std::vector<double>& v) {
  correct_ = total_ = 0;
  class_correct_.clear();
  class_total_.clear();
  class_predicted_.clear();
  confusion_.clear();
  confusion_pairs_.clear();  // each rank's own: not summed
  pairs_kept_ = false;
  if (v.empty()) return;
  // The length fixes K: 2 + 3K, plus n^2 with n = confusion_side(K) when
  // the confusion matrix is kept.
  size_t k = 0, n = 0;
  for (;; ++k) {
    n = confusion_side(k);
    const size_t length = 2 + 3 * k + n * n;
    if (length == v.size()) break;
    TORCH_CHECK(k < v.size(), "AccuracyMetric::load_totals: ", v.size(), " values fit no class count");
  }
  auto count = [&](size_t i) { return static_cast<int64_t>(std::llround(v[i])); };
  correct_ = count(0);
  total_ = count(1);
  for (size_t c = 0; c < k; ++c) {
    class_correct_.push_back(count(2 + c));
    class_total_.push_back(count(2 + k + c));
    class_predicted_.push_back(count(2 + 2 * k + c));
  }
  if (n > 0) {
    confusion_.assign(n, std::vector<int64_t>(n, 0));
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) confusion_[i][j] = count(2 + 3 * k + i * n + j);
  }
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& target, double label_smoothing,
                               bool smooth_over_others) {
  const int64_t classes = logits.size(-1);
  if (smooth_over_others && classes > 1)
    label_smoothing = std::min(1.0, label_smoothing * static_cast<double>(classes) / static_cast<double>(classes - 1));
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits.reshape({-1, classes}), target.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex).label_smoothing(label_smoothing));
}

}  // namespace qkv::train
