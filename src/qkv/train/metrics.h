#pragma once
// Metrics accumulated over an evaluation pass. The trainer owns the loss; an
// accumulator turns (logits, target) pairs into named numbers. Tasks with
// their own measures (mIoU, exact match) provide their own accumulator.
#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/data/dataset.h"

namespace qkv::train {

using data::kIgnoreIndex;

class MetricAccumulator {
 public:
  virtual ~MetricAccumulator() = default;
  // logits [..., C], target [...] with kIgnoreIndex for positions not scored.
  virtual void add(const at::Tensor& logits, const at::Tensor& target) = 0;
  virtual nlohmann::json result() const = 0;  // e.g. {"accuracy": 0.93}

  // Distributed evaluation: counts whose element-wise sum over accumulators
  // of disjoint shards, loaded into one accumulator, gives the result of the
  // whole set. An accumulator that saw nothing may return an empty vector
  // (shorter vectors are padded with zeros before summing).
  virtual std::vector<double> totals() const = 0;
  virtual void load_totals(const std::vector<double>& totals) = 0;
};
using MetricFactory = std::function<std::unique_ptr<MetricAccumulator>()>;

// Fraction of scored positions whose arg-max is the target, and the mean of
// per-class recall ("balanced_accuracy").
// Balanced accuracy is the "mean class accuracy" of point-cloud papers.
// With class names, the result also holds "classes", the classification
// report (per_class, macro_avg, weighted_avg) and, up to
// kDenseConfusionClasses classes, "confusion" (rows: true class, columns:
// predicted). Above that the n x n matrix would be most of a run's files (3,000
// classes: a 298 MB summary.json, a report past 3.5 GB to build): the result
// holds "top_confusions" instead, the kTopConfusions most frequent (true,
// predicted) pairs of different classes, so that summaries and reports grow
// linearly with the classes.
inline constexpr size_t kDenseConfusionClasses = 50;  // our choice: ModelNet40's 40 stay a matrix
inline constexpr size_t kTopConfusions = 20;
class AccuracyMetric : public MetricAccumulator {
 public:
  AccuracyMetric() = default;
  explicit AccuracyMetric(std::vector<std::string> class_names) : class_names_(std::move(class_names)) {}
  void add(const at::Tensor& logits, const at::Tensor& target) override;
  nlohmann::json result() const override;
  // [correct, total, class_correct[K], class_total[K], class_predicted[K],
  // confusion[n*n] (with class names, n <= kDenseConfusionClasses)]. Above
  // that the confusion pairs stay with each rank: a data-parallel result has
  // no top_confusions.
  std::vector<double> totals() const override;
  void load_totals(const std::vector<double>& totals) override;

 private:
  // The confusion's side n where one is kept (0: none).
  size_t confusion_side(size_t classes) const;
  int64_t correct_ = 0, total_ = 0;
  std::vector<int64_t> class_correct_, class_total_, class_predicted_;
  std::vector<std::string> class_names_;  // non-empty: keep the confusion (matrix or pairs)
  std::vector<std::vector<int64_t>> confusion_;
  std::map<std::pair<int64_t, int64_t>, int64_t> confusion_pairs_;  // (true, predicted) -> count, off the diagonal
  bool pairs_kept_ = true;  // false once loaded from summed totals, which carry no pairs
};

// scikit-learn's classification report from a confusion matrix (rows: true
// class, columns: predicted): {"per_class": [{"class", "precision",
// "recall", "f1", "support"}...], "macro_avg": {...}, "weighted_avg": {...}}.
// A class with no predictions has precision 0, one with no shapes recall 0
// (scikit-learn's zero_division=0); classes neither present nor predicted are
// left out of the rows and the averages.
nlohmann::json classification_report(const std::vector<std::vector<int64_t>>& confusion,
                                     const std::vector<std::string>& classes);
// The same from what it needs of the matrix, per class: its diagonal (hits),
// row sums (support) and column sums (predicted).
nlohmann::json classification_report(const std::vector<int64_t>& hits, const std::vector<int64_t>& support,
                                     const std::vector<int64_t>& predicted, const std::vector<std::string>& classes);

// The same as text, laid out as scikit-learn prints it (one row per class,
// then accuracy, macro avg and weighted avg).
std::string format_classification_report(const nlohmann::json& report, double accuracy);

// Mean cross entropy over the scored positions, with label smoothing: spread
// over all classes (PyTorch), or with smooth_over_others over the classes but
// the target (DGCNN's loss; the same as PyTorch's at smoothing x C / (C - 1)).
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& target, double label_smoothing,
                               bool smooth_over_others = false);

}  // namespace qkv::train
