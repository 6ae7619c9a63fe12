#include "qkv/train/binary_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "support/test_files.h"

namespace {

using qkv::train::auroc;
using qkv::train::roc_curve;

double trapezoid(const qkv::train::RocCurve& c) {
  double area = 0;
  for (size_t i = 1; i < c.fpr.size(); ++i) area += (c.fpr[i] - c.fpr[i - 1]) * (c.tpr[i] + c.tpr[i - 1]) / 2;
  return area;
}

// The definition, pair by pair.
double pairwise_auc(const std::vector<double>& s, const std::vector<int64_t>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      }
  return wins / pairs;
}

// Enough of an XML check for an inline SVG: every tag closed in order, quotes
// balanced inside tags, and every '&' in text starts one of the escapes used.
std::string svg_xml_problem(const std::string& s) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      bool known = false;
      for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"})
        if (s.compare(i, std::string(e).size(), e) == 0) known = true;
      if (!known) return "bare & at " + std::to_string(i);
      ++i;
      continue;
    }
    if (s[i] == '>') return "stray > at " + std::to_string(i);
    if (s[i] != '<') {
      ++i;
      continue;
    }
    size_t end = i + 1;
    bool quoted = false;
    while (end < s.size() && (quoted || s[end] != '>')) {
      if (s[end] == '"') quoted = !quoted;
      if (!quoted && s[end] == '<') return "< inside a tag at " + std::to_string(end);
      ++end;
    }
    if (end == s.size()) return "unterminated tag at " + std::to_string(i);
    std::string tag = s.substr(i + 1, end - i - 1);
    const bool closing = !tag.empty() && tag[0] == '/';
    const bool self_closing = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" \n\t/"));
    if (name.empty()) return "empty tag name at " + std::to_string(i);
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> does not close " + (open.empty() ? "anything" : open.back());
      open.pop_back();
      if (open.empty() && s.find('<', end) != std::string::npos) return "content after the root element";
    } else if (!self_closing) {
      if (open.empty() && i != 0) return "text before the root element";
      open.push_back(name);
    }
    i = end + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return "";
}

TEST(BinaryMetrics, AurocOfPerfectReversedAndConstantScores) {
  const std::vector<double> s = {0.1, 0.3, 0.35, 0.8, 0.9};
  EXPECT_DOUBLE_EQ(auroc(s, {0, 0, 1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auroc(s, {1, 1, 0, 0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(auroc({0.4, 0.4, 0.4, 0.4}, {0, 1, 1, 0}), 0.5);
}

TEST(BinaryMetrics, AurocCountsTiesAsHalf) {
  // Positives 0.35, 0.8, 0.4 against negatives 0.1, 0.4:
  // 0.35 beats 0.1, loses to 0.4 (1); 0.8 beats both (2); 0.4 beats 0.1 and
  // ties 0.4 (1.5). 4.5 of 6 pairs.
  EXPECT_DOUBLE_EQ(auroc({0.1, 0.4, 0.35, 0.8, 0.4}, {0, 0, 1, 1, 1}), 0.75);
}

TEST(BinaryMetrics, RocCurveOfTheTiedCase) {
  const auto c = roc_curve({0.1, 0.4, 0.35, 0.8, 0.4}, {0, 0, 1, 1, 1});
  // (0,0); 0.8 takes one positive; 0.4 one positive and one negative together
  // (the diagonal step); 0.35 the last positive; 0.1 the last negative.
  const std::vector<double> fpr = {0, 0, 0.5, 0.5, 1}, tpr = {0, 1.0 / 3, 2.0 / 3, 1, 1};
  const std::vector<double> thr = {INFINITY, 0.8, 0.4, 0.35, 0.1};
  ASSERT_EQ(c.fpr.size(), fpr.size());
  ASSERT_EQ(c.tpr.size(), tpr.size());
  ASSERT_EQ(c.thresholds.size(), thr.size());
  for (size_t i = 0; i < fpr.size(); ++i) {
    EXPECT_DOUBLE_EQ(c.fpr[i], fpr[i]) << i;
    EXPECT_DOUBLE_EQ(c.tpr[i], tpr[i]) << i;
    EXPECT_EQ(c.thresholds[i], thr[i]) << i;
  }
  EXPECT_DOUBLE_EQ(trapezoid(c), 0.75);
}

TEST(BinaryMetrics, OneClassIsADataErrorThatSaysSo) {
  qkv::testing::expect_data_error(
      [] {
        auroc({0.2, 0.5, 0.9}, {1, 1, 1});
      },
      "AUROC is undefined", "all 3 samples are class 1");
  qkv::testing::expect_data_error([] { auroc({0.2, 0.5}, {0, 0}); }, "AUROC is undefined", "all 2 samples are class 0");
  qkv::testing::expect_data_error([] { roc_curve({0.2, 0.5}, {0, 0}); }, "ROC curve", "class 0");
}

TEST(BinaryMetrics, BadInputsAreDataErrors) {
  qkv::testing::expect_data_error([] { auroc({0.2, 0.5, 0.9}, {0, 1}); }, "AUROC", "3 scores but 2 labels");
  qkv::testing::expect_data_error([] { auroc({0.2, NAN, 0.9}, {0, 1, 1}); }, "AUROC", "score 1 is NaN");
  qkv::testing::expect_data_error([] { auroc({0.2, 0.5, 0.9}, {0, 1, 2}); }, "label 2", "expected 0 or 1");
  qkv::testing::expect_data_error([] { qkv::train::count_at_threshold({0.2, NAN}, {0, 1}); }, "binary counts", "NaN");
}

TEST(BinaryMetrics, AurocEqualsTrapezoidAndPairCountOnRandomData) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 5 + trial * 13;
    std::vector<double> s(n);
    std::vector<int64_t> y(n);
    for (int i = 0; i < n; ++i) {
      y[i] = static_cast<int64_t>(rng() % 3 == 0);
      // Scores on a coarse grid, shifted by the label, so there are many ties
      // and an AUC well away from 0.5.
      s[i] = static_cast<double>(rng() % 10) / 10.0 + 0.15 * static_cast<double>(y[i]);
    }
    y[0] = 0, y[1] = 1;  // both classes present
    const auto c = roc_curve(s, y);
    EXPECT_EQ(c.fpr.front(), 0);
    EXPECT_EQ(c.tpr.front(), 0);
    EXPECT_EQ(c.fpr.back(), 1);
    EXPECT_EQ(c.tpr.back(), 1);
    for (size_t i = 1; i < c.fpr.size(); ++i) {
      EXPECT_GE(c.fpr[i], c.fpr[i - 1]);
      EXPECT_GE(c.tpr[i], c.tpr[i - 1]);
      EXPECT_GT(c.thresholds[i - 1], c.thresholds[i]);  // one point per distinct score
      EXPECT_TRUE(c.fpr[i] > c.fpr[i - 1] || c.tpr[i] > c.tpr[i - 1]);
    }
    const double a = auroc(s, y);
    EXPECT_NEAR(a, trapezoid(c), 1e-12) << "trial " << trial;
    EXPECT_NEAR(a, pairwise_auc(s, y), 1e-12) << "trial " << trial;
  }
}

TEST(BinaryMetrics, CountsAtAThreshold) {
  // Predicted positive when score >= 0.5, so 0.5 itself is positive.
  //   score 0.2 0.5 0.7 0.4 0.9 0.1 0.3
  //   label 0   1   1   1   0   0   0
  //         tn  tp  tp  fn  fp  tn  tn
  const auto c = qkv::train::count_at_threshold({0.2, 0.5, 0.7, 0.4, 0.9, 0.1, 0.3}, {0, 1, 1, 1, 0, 0, 0});
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.fn, 1);
  EXPECT_EQ(c.fp, 1);
  EXPECT_EQ(c.tn, 3);
  EXPECT_DOUBLE_EQ(c.accuracy(), 5.0 / 7);
  EXPECT_DOUBLE_EQ(c.sensitivity(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(c.specificity(), 3.0 / 4);

  const auto high = qkv::train::count_at_threshold({0.2, 0.5, 0.7, 0.4, 0.9, 0.1, 0.3}, {0, 1, 1, 1, 0, 0, 0}, 0.8);
  EXPECT_EQ(high.tp, 0);
  EXPECT_EQ(high.fp, 1);
  EXPECT_DOUBLE_EQ(high.sensitivity(), 0.0);
  EXPECT_DOUBLE_EQ(high.specificity(), 3.0 / 4);

  const auto negatives_only = qkv::train::count_at_threshold({0.2, 0.7}, {0, 0});
  EXPECT_TRUE(std::isnan(negatives_only.sensitivity()));
  EXPECT_DOUBLE_EQ(negatives_only.specificity(), 0.5);
  const auto positives_only = qkv::train::count_at_threshold({0.2, 0.7}, {1, 1});
  EXPECT_TRUE(std::isnan(positives_only.specificity()));
  EXPECT_DOUBLE_EQ(positives_only.sensitivity(), 0.5);
}

TEST(BinaryMetrics, CountsReproduceEveryRocPoint) {
  const std::vector<double> s = {0.1, 0.4, 0.35, 0.8, 0.4, 0.6, 0.2};
  const std::vector<int64_t> y = {0, 0, 1, 1, 1, 0, 1};
  const auto c = roc_curve(s, y);
  for (size_t i = 1; i < c.thresholds.size(); ++i) {
    const auto k = qkv::train::count_at_threshold(s, y, c.thresholds[i]);
    EXPECT_DOUBLE_EQ(k.sensitivity(), c.tpr[i]) << "threshold " << c.thresholds[i];
    EXPECT_DOUBLE_EQ(1 - k.specificity(), c.fpr[i]) << "threshold " << c.thresholds[i];
  }
}

TEST(BinaryMetrics, AurocOfLabelsIsTheBalancedAccuracy) {
  std::mt19937 gen(4);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> scores;
  std::vector<int64_t> labels;
  for (int i = 0; i < 57; ++i) {
    labels.push_back(i % 3 == 0);
    scores.push_back(u(gen) * 0.7 + 0.3 * static_cast<double>(labels.back()));
  }
  const auto c = qkv::train::count_at_threshold(scores, labels, 0.5);
  EXPECT_GT(c.tp * c.tn * c.fp * c.fn, 0);  // every cell filled: not a trivial case
  EXPECT_NEAR(qkv::train::auroc_of_labels(scores, labels, 0.5), (c.sensitivity() + c.specificity()) / 2, 1e-12);
}

TEST(BinaryMetrics, MeanStdKnownValues) {
  // Mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32; sample variance 32/7.
  const auto m = qkv::train::mean_std({2, 4, NAN, 4, 4, 5, 5, 7, 9, NAN});
  EXPECT_EQ(m.n, 8);
  EXPECT_DOUBLE_EQ(m.mean, 5.0);
  EXPECT_DOUBLE_EQ(m.std, std::sqrt(32.0 / 7.0));

  // numpy's np.std (the MHCA authors'): divisor n.
  EXPECT_DOUBLE_EQ(qkv::train::mean_std({2, 4, NAN, 4, 4, 5, 5, 7, 9}, true).std, 2.0);

  const auto one = qkv::train::mean_std({NAN, 0.8});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.mean, 0.8);
  EXPECT_EQ(one.std, 0.0);

  const auto none = qkv::train::mean_std({NAN});
  EXPECT_EQ(none.n, 0);
  EXPECT_TRUE(std::isnan(none.mean));

  // A large offset: a one-pass sum of squares would lose these digits.
  const auto shifted = qkv::train::mean_std({1e9 + 1, 1e9 + 2, 1e9 + 3});
  EXPECT_DOUBLE_EQ(shifted.std, 1.0);
}

TEST(BinaryMetrics, RocSvgIsWellFormedAndLabelled) {
  const auto a = roc_curve({0.1, 0.4, 0.35, 0.8, 0.4}, {0, 0, 1, 1, 1});
  const auto b = roc_curve({0.9, 0.2, 0.6, 0.3}, {1, 0, 1, 0});
  const std::string svg = qkv::train::roc_svg({{"MHCA <fused> & co", a, 0.75}, {"SPECT only", b, 1.0}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 40);
  EXPECT_EQ(svg_xml_problem(svg), "") << svg;
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("MHCA &lt;fused&gt; &amp; co (AUC 0.750)"), std::string::npos) << svg;
  EXPECT_NE(svg.find("SPECT only (AUC 1.000)"), std::string::npos) << svg;
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++polylines;
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the chance diagonal

  // The checker itself must reject broken markup.
  EXPECT_NE(svg_xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(svg_xml_problem("<svg><text>a & b</text></svg>"), "");
}

TEST(BinaryMetrics, RocSvgRejectsMismatchedCurves) {
  qkv::train::RocCurve bad;
  bad.fpr = {0, 1};
  bad.tpr = {0};
  qkv::testing::expect_data_error([&] { qkv::train::roc_svg({{"broken", bad, 0.5}}); }, "broken", "2 fpr values");
}

}  // namespace
