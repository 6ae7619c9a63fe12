#pragma once
// Binary classification metrics from predicted probabilities (MHCA's
// SPECT + methylation classifier reports AUROC, sensitivity and specificity,
// averaged over repeated cross-validation). Labels are 0 (negative) or
// 1 (positive); anything else, a NaN score or mismatched sizes is a DataError.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace qkv::train {

// One point per distinct score, highest score first, after a leading (0, 0)
// whose threshold is +infinity; the last point is (1, 1) at the lowest score.
// Point i counts a sample as predicted positive when score >= thresholds[i], so
// tied scores enter together and make one diagonal step.
struct RocCurve {
  std::vector<double> fpr, tpr, thresholds;
};

// DataError when the labels hold only one class (the curve is undefined).
RocCurve roc_curve(const std::vector<double>& scores, const std::vector<int64_t>& labels);

// P(score of a random positive > score of a random negative) + 0.5 P(equal):
// the Mann-Whitney statistic with ties, equal to the trapezoidal area under
// roc_curve. Computed exactly in integers before the final division.
// DataError "AUROC is undefined: all N samples are class c" for one class.
double auroc(const std::vector<double>& scores, const std::vector<int64_t>& labels);

// AUROC of the hard predictions (score >= threshold -> 1, else 0), as the MHCA
// authors' code computes it from argmax labels: for two classes it equals the
// balanced accuracy, (sensitivity + specificity) / 2. DataError as auroc.
double auroc_of_labels(const std::vector<double>& scores, const std::vector<int64_t>& labels, double threshold = 0.5);

struct BinaryCounts {
  int64_t tp = 0, fp = 0, tn = 0, fn = 0;
  double accuracy() const;     // (tp + tn) / all; NaN when there are no samples
  double sensitivity() const;  // tp / (tp + fn); NaN when there are no positives
  double specificity() const;  // tn / (tn + fp); NaN when there are no negatives
};

// A sample is predicted positive when score >= threshold (the same rule as
// roc_curve's thresholds, so a point of the curve can be reproduced here).
BinaryCounts count_at_threshold(const std::vector<double>& scores, const std::vector<int64_t>& labels,
                                double threshold = 0.5);

// NaN values are skipped and not counted in n. std is the sample standard
// deviation (divisor n - 1), or with `population` numpy's np.std (divisor n),
// 0 for n = 1; with n = 0 both mean and std are NaN.
struct MeanStd {
  double mean = 0, std = 0;
  int64_t n = 0;
};
MeanStd mean_std(const std::vector<double>& values, bool population = false);

// An ROC plot as one inline <svg> element for report.html: well-formed XML, no
// scripts. Each entry is (label, curve, AUC) and becomes a coloured curve and a
// legend line "label (AUC 0.873)"; the AUC is printed as given (NaN: "n/a").
// The chance diagonal and both axes (0..1, ticks every 0.2) are drawn.
// DataError when a curve's fpr and tpr differ in length or width/height < 160.
std::string roc_svg(const std::vector<std::tuple<std::string, RocCurve, double>>& curves, int width = 420,
                    int height = 420);

}  // namespace qkv::train
