// Part-segmentation mIoU against hand-computed cases: absent parts count 1,
// the arg-max is restricted to the shape's category, instance and class means
// differ as they should.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/train/part_iou.h"

using namespace qkv;

namespace {

at::Tensor labels(std::vector<int64_t> v) { return torch::tensor(v, torch::kLong); }

// Two categories: A has parts {0, 1}, B has parts {2, 3, 4}.
train::PartIoUMetric two_categories() { return train::PartIoUMetric({{0, 1}, {2, 3, 4}}, {"A", "B"}); }

// Logits [1, N, 5] that score label rows[i] highest at point i (value 5),
// with an extra `decoy` column scored 9 everywhere (a label of another category).
at::Tensor logits_for(const std::vector<int64_t>& rows, int64_t decoy) {
  auto l = torch::zeros({1, static_cast<int64_t>(rows.size()), 5});
  for (size_t i = 0; i < rows.size(); ++i) l[0][static_cast<int64_t>(i)][rows[i]] = 5;
  if (decoy >= 0) l.select(2, decoy).fill_(9);
  return l;
}

}  // namespace

TEST(PartIoU, ShapeMiouCountsAbsentPartsAsOne) {
  // part 0: I 1, U 2 -> 1/2; part 1: I 2, U 3 -> 2/3; part 2: in neither -> 1.
  EXPECT_NEAR(train::shape_part_miou(labels({0, 0, 1, 1}), labels({0, 1, 1, 1}), {0, 1, 2}), (0.5 + 2.0 / 3 + 1) / 3,
              1e-12);
  // A part predicted but absent from the truth scores 0.
  EXPECT_NEAR(train::shape_part_miou(labels({0, 1}), labels({0, 0}), {0, 1}), (0.5 + 0.0) / 2, 1e-12);
  // Unscored points (ignore index) take no part.
  EXPECT_NEAR(train::shape_part_miou(labels({1, 0}), labels({-100, 0}), {0, 1}), 1.0, 1e-12);
}

TEST(PartIoU, ArgmaxIsRestrictedToTheCategoryAndMeansAreComputedBothWays) {
  auto metric = two_categories();
  // Shape of A whose best global label is B's part 2 at every point; within
  // A's parts it predicts {0, 1, 1} against truth {0, 0, 1}: IoU 1/2 and 1/2.
  auto a = logits_for({0, 1, 1}, 2);
  metric.add(a, labels({0, 0, 1}).unsqueeze(0));
  // Shape of B predicting 3 where the truth is 2: parts 2 and 3 score 0, part 4 is absent: 1/3.
  metric.add(logits_for({3, 3, 3}, -1), labels({2, 2, 2}).unsqueeze(0));
  // A perfect shape of B: part 2 IoU 1, parts 3 and 4 absent: 1.
  metric.add(logits_for({2, 2, 2}, -1), labels({2, 2, 2}).unsqueeze(0));
  const auto r = metric.result();
  EXPECT_NEAR(r.at("instance_miou").get<double>(), (0.5 + 1.0 / 3 + 1.0) / 3, 1e-12);
  EXPECT_NEAR(r.at("class_miou").get<double>(), (0.5 + (1.0 / 3 + 1.0) / 2) / 2, 1e-12);
  EXPECT_NEAR(r.at("accuracy").get<double>(), (2.0 + 0 + 3) / 9, 1e-12);
  EXPECT_EQ(r.at("shapes").get<int64_t>(), 3);
  EXPECT_NEAR(r.at("category_iou").at("A").at("miou").get<double>(), 0.5, 1e-12);
  EXPECT_EQ(r.at("category_iou").at("B").at("shapes").get<int64_t>(), 2);
}

TEST(PartIoU, BatchesAreScoredShapeByShape) {
  auto one = two_categories(), batched = two_categories();
  const auto l1 = logits_for({0, 1, 1}, 2), l2 = logits_for({3, 4, 2}, -1);
  const auto t1 = labels({0, 0, 1}).unsqueeze(0), t2 = labels({2, 3, 3}).unsqueeze(0);
  one.add(l1, t1);
  one.add(l2, t2);
  batched.add(torch::cat({l1, l2}), torch::cat({t1, t2}));
  EXPECT_EQ(one.result(), batched.result());
}

TEST(PartIoU, LabelsFromTwoCategoriesAreADataError) {
  auto metric = two_categories();
  EXPECT_THROW(metric.add(logits_for({0, 2}, -1), labels({0, 2}).unsqueeze(0)), DataError);
  auto other = train::PartIoUMetric({{0, 1}}, {"A"});
  EXPECT_THROW(other.add(torch::zeros({1, 2, 5}), labels({0, 3}).unsqueeze(0)), DataError);
}
