#include "qkv/train/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

#include "qkv/core/errors.h"
#include "qkv/train/html_kit.h"

namespace qkv::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct ClassTotals {
  int64_t positives = 0, negatives = 0;
};

ClassTotals check_inputs(const char* what, const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  const std::string name(what);
  if (scores.size() != labels.size())
    throw DataError(name + ": " + std::to_string(scores.size()) + " scores but " + std::to_string(labels.size()) +
                    " labels");
  if (scores.empty()) throw DataError(name + ": no samples");
  ClassTotals totals;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) throw DataError(name + ": score " + std::to_string(i) + " is NaN");
    if (labels[i] == 1)
      ++totals.positives;
    else if (labels[i] == 0)
      ++totals.negatives;
    else
      throw DataError(name + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) + ", expected 0 or 1");
  }
  return totals;
}

void require_both_classes(const char* what, const ClassTotals& totals) {
  if (totals.positives > 0 && totals.negatives > 0) return;
  const int64_t n = totals.positives + totals.negatives;
  throw DataError(std::string(what) + " is undefined: all " + std::to_string(n) + " samples are class " +
                  (totals.positives > 0 ? "1" : "0"));
}

// Runs of equal scores, highest first, with the number of positives and
// negatives in each: both the curve and the area are built from these groups,
// which is what makes ties count one half.
struct TieGroup {
  double score;
  int64_t positives, negatives;
};

std::vector<TieGroup> tie_groups(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  std::vector<TieGroup> groups;
  for (size_t i : order) {
    if (groups.empty() || groups.back().score != scores[i]) groups.push_back({scores[i], 0, 0});
    (labels[i] == 1 ? groups.back().positives : groups.back().negatives) += 1;
  }
  return groups;
}

double ratio(int64_t num, int64_t den) { return den == 0 ? kNaN : static_cast<double>(num) / static_cast<double>(den); }

// Coordinates in fixed decimals (html_kit.h's fixed): the SVG stays small and
// its numbers in the plain syntax SVG requires (no exponents).
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

}  // namespace

RocCurve roc_curve(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  const auto totals = check_inputs("ROC curve", scores, labels);
  require_both_classes("ROC curve", totals);
  RocCurve curve;
  curve.fpr.push_back(0);
  curve.tpr.push_back(0);
  curve.thresholds.push_back(std::numeric_limits<double>::infinity());
  int64_t tp = 0, fp = 0;
  for (const auto& g : tie_groups(scores, labels)) {
    tp += g.positives;
    fp += g.negatives;
    curve.fpr.push_back(ratio(fp, totals.negatives));
    curve.tpr.push_back(ratio(tp, totals.positives));
    curve.thresholds.push_back(g.score);
  }
  return curve;
}

double auroc(const std::vector<double>& scores, const std::vector<int64_t>& labels) {
  const auto totals = check_inputs("AUROC", scores, labels);
  require_both_classes("AUROC", totals);
  // Twice the count of (positive, negative) pairs ranked correctly, ties
  // counting one: an integer, so the result is exact up to the one division.
  int64_t twice_wins = 0, positives_above = 0;
  for (const auto& g : tie_groups(scores, labels)) {
    twice_wins += g.negatives * (2 * positives_above + g.positives);
    positives_above += g.positives;
  }
  return static_cast<double>(twice_wins) /
         (2.0 * static_cast<double>(totals.positives) * static_cast<double>(totals.negatives));
}

double BinaryCounts::accuracy() const { return ratio(tp + tn, tp + fp + tn + fn); }
double BinaryCounts::sensitivity() const { return ratio(tp, tp + fn); }
double BinaryCounts::specificity() const { return ratio(tn, tn + fp); }

double auroc_of_labels(const std::vector<double>& scores, const std::vector<int64_t>& labels, double threshold) {
  std::vector<double> hard(scores.size());
  for (size_t i = 0; i < scores.size(); ++i)
    hard[i] = std::isnan(scores[i]) ? scores[i] : (scores[i] >= threshold ? 1.0 : 0.0);
  return auroc(hard, labels);
}

BinaryCounts count_at_threshold(const std::vector<double>& scores, const std::vector<int64_t>& labels,
                                double threshold) {
  check_inputs("binary counts", scores, labels);
  BinaryCounts c;
  for (size_t i = 0; i < scores.size(); ++i) {
    const bool predicted = scores[i] >= threshold;
    if (labels[i] == 1)
      ++(predicted ? c.tp : c.fn);
    else
      ++(predicted ? c.fp : c.tn);
  }
  return c;
}

MeanStd mean_std(const std::vector<double>& values, bool population) {
  MeanStd r;
  double sum = 0;
  for (double v : values)
    if (!std::isnan(v)) sum += v, ++r.n;
  if (r.n == 0) return {kNaN, kNaN, 0};
  r.mean = sum / static_cast<double>(r.n);
  if (r.n == 1) return r;
  // Two passes: the sum of squared deviations from the mean does not cancel
  // catastrophically the way sum(x^2) - n mean^2 does.
  double squares = 0;
  for (double v : values)
    if (!std::isnan(v)) squares += (v - r.mean) * (v - r.mean);
  r.std = std::sqrt(squares / static_cast<double>(population ? r.n : r.n - 1));
  return r;
}

std::string roc_svg(const std::vector<std::tuple<std::string, RocCurve, double>>& curves, int width, int height) {
  if (width < 160 || height < 160)
    throw DataError("ROC plot: width and height must be at least 160, got " + std::to_string(width) + "x" +
                    std::to_string(height));
  const double W = width, H = height, L = 46, T = 12;
  // A square plot: the diagonal then sits at 45 degrees, as readers expect.
  const double pw = std::min(W - L - 12, H - T - 40), ph = pw, bottom = T + ph;
  auto px = [&](double x) { return fixed(L + x * pw, 2); };
  auto py = [&](double y) { return fixed(bottom - y * ph, 2); };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << ' ' << height << "\" role=\"img\" aria-label=\"ROC curves\">\n";
  o << "<rect x=\"" << px(0) << "\" y=\"" << py(1) << "\" width=\"" << fixed(pw, 2) << "\" height=\"" << fixed(ph, 2)
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double v = i / 5.0;
    const std::string label = fixed(v, 1);
    o << "<line x1=\"" << px(v) << "\" x2=\"" << px(v) << "\" y1=\"" << py(0) << "\" y2=\"" << fixed(bottom + 4, 2)
      << "\" stroke=\"#999\"/>\n";
    o << "<text x=\"" << px(v) << "\" y=\"" << fixed(bottom + 15, 2) << "\" font-size=\"10\" text-anchor=\"middle\">"
      << label << "</text>\n";
    o << "<line x1=\"" << fixed(L - 4, 2) << "\" x2=\"" << px(0) << "\" y1=\"" << py(v) << "\" y2=\"" << py(v)
      << "\" stroke=\"#999\"/>\n";
    o << "<text x=\"" << fixed(L - 6, 2) << "\" y=\"" << fixed(bottom - v * ph + 3.5, 2)
      << "\" font-size=\"10\" text-anchor=\"end\">" << label << "</text>\n";
  }
  o << "<text x=\"" << fixed(L + pw / 2, 2) << "\" y=\"" << fixed(bottom + 32, 2)
    << "\" font-size=\"11\" text-anchor=\"middle\">false positive rate (1 - specificity)</text>\n";
  o << "<text x=\"12\" y=\"" << fixed(T + ph / 2, 2)
    << "\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 " << fixed(T + ph / 2, 2)
    << ")\">true positive rate (sensitivity)</text>\n";
  o << "<line x1=\"" << px(0) << "\" y1=\"" << py(0) << "\" x2=\"" << px(1) << "\" y2=\"" << py(1)
    << "\" stroke=\"#bbb\" stroke-dasharray=\"4 4\"/>\n";

  size_t longest = 0;
  std::vector<std::string> legend;
  for (size_t i = 0; i < curves.size(); ++i) {
    const auto& [label, curve, auc] = curves[i];
    if (curve.fpr.size() != curve.tpr.size())
      throw DataError("ROC plot: curve '" + label + "' has " + std::to_string(curve.fpr.size()) + " fpr values but " +
                      std::to_string(curve.tpr.size()) + " tpr values");
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (size_t j = 0; j < curve.fpr.size(); ++j) {
      if (!std::isfinite(curve.fpr[j]) || !std::isfinite(curve.tpr[j]))
        throw DataError("ROC plot: curve '" + label + "' has a non-finite point at " + std::to_string(j));
      o << (j ? " " : "") << px(curve.fpr[j]) << ',' << py(curve.tpr[j]);
    }
    o << "\"/>\n";
    legend.push_back(label + " (AUC " + (std::isnan(auc) ? std::string("n/a") : fixed(auc, 3)) + ")");
    longest = std::max(longest, legend.back().size());
  }

  // Lower right is where a useful ROC curve leaves the plot empty.
  if (!legend.empty()) {
    const double line_h = 16;
    const double box_w = std::min(pw - 8, 34 + 6.2 * static_cast<double>(longest));
    const double box_h = 8 + line_h * static_cast<double>(legend.size());
    const double bx = L + pw - box_w - 4, by = T + ph - box_h - 4;
    o << "<rect x=\"" << fixed(bx, 2) << "\" y=\"" << fixed(by, 2) << "\" width=\"" << fixed(box_w, 2) << "\" height=\""
      << fixed(box_h, 2) << "\" fill=\"#fff\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n";
    for (size_t i = 0; i < legend.size(); ++i) {
      const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
      const double ly = by + 4 + line_h * (static_cast<double>(i) + 0.5);
      o << "<line x1=\"" << fixed(bx + 6, 2) << "\" x2=\"" << fixed(bx + 24, 2) << "\" y1=\"" << fixed(ly, 2)
        << "\" y2=\"" << fixed(ly, 2) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
      o << "<text x=\"" << fixed(bx + 28, 2) << "\" y=\"" << fixed(ly + 4, 2) << "\" font-size=\"11\">"
        << escape_html(legend[i]) << "</text>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace qkv::train
