#pragma once
// Part-segmentation scores as ShapeNet-part papers compute them. Each shape
// belongs to one category whose parts are a fixed set of labels; its category
// is read from its ground truth (the category of its labels, as in the
// reference evaluation code). Per shape:
//  - the prediction of a point is the arg-max over its category's parts only;
//  - the IoU of each of those parts is |pred & truth| / |pred | truth|, and 1
//    when the part is in neither (absent and rightly never predicted);
//  - the shape's mIoU is the mean over its category's parts.
// instance_miou is the mean over shapes; class_miou the mean over categories
// (those with shapes) of their shapes' mean.
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "qkv/train/metrics.h"

namespace qkv::train {

// The mIoU of one shape: pred and truth [N] int64 labels, `parts` its
// category's labels. Positions with truth kIgnoreIndex are not scored.
double shape_part_miou(const at::Tensor& pred, const at::Tensor& truth, const std::vector<int64_t>& parts);

class PartIoUMetric : public MetricAccumulator {
 public:
  // category_parts[c]: the labels of category c, named category_names[c].
  PartIoUMetric(std::vector<std::vector<int64_t>> category_parts, std::vector<std::string> category_names);
  // logits [B, N, labels], target [B, N]. DataError for a shape whose labels
  // are not all in one category.
  void add(const at::Tensor& logits, const at::Tensor& target) override;
  // instance_miou, class_miou, accuracy (points, restricted arg-max), shapes,
  // and category_iou: {name: {shapes, miou}} for the categories seen.
  nlohmann::json result() const override;
  // [correct, scored, mIoU sum per category, shapes per category]
  std::vector<double> totals() const override;
  void load_totals(const std::vector<double>& totals) override;

 private:
  std::vector<std::vector<int64_t>> category_parts_;
  std::vector<std::string> category_names_;
  std::vector<int64_t> category_of_label_;  // -1: no category
  at::Tensor category_of_label_tensor_;     // the same, [labels] int64, for whole-shape checks
  std::vector<at::Tensor> part_index_;      // per category: its labels, [parts] int64
  std::vector<double> category_sum_;
  std::vector<int64_t> category_shapes_;
  int64_t correct_ = 0, scored_ = 0;
};

}  // namespace qkv::train
