#include "qkv/train/part_iou.h"

#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"

namespace qkv::train {

double shape_part_miou(const at::Tensor& pred, const at::Tensor& truth, const std::vector<int64_t>& parts) {
  TORCH_CHECK(pred.sizes() == truth.sizes() && pred.dim() == 1, "shape_part_miou: pred and truth must be [N]");
  TORCH_CHECK(!parts.empty(), "shape_part_miou: no parts");
  const auto scored = truth != kIgnoreIndex;
  double sum = 0;
  for (const int64_t part : parts) {
    const auto p = (pred == part) & scored, t = (truth == part) & scored;
    const double inter = (p & t).sum().item<double>(), uni = (p | t).sum().item<double>();
    sum += uni == 0 ? 1.0 : inter / uni;
  }
  return sum / static_cast<double>(parts.size());
}

PartIoUMetric::PartIoUMetric(std::vector<std::vector<int64_t>> category_parts, std::vector<std::string> category_names)
    : category_parts_(std::move(category_parts)), category_names_(std::move(category_names)) {
  TORCH_CHECK(category_parts_.size() == category_names_.size(), "PartIoUMetric: one name per category");
  for (size_t c = 0; c < category_parts_.size(); ++c)
    for (const int64_t label : category_parts_[c]) {
      TORCH_CHECK(label >= 0, "PartIoUMetric: negative label");
      if (static_cast<size_t>(label) >= category_of_label_.size())
        category_of_label_.resize(static_cast<size_t>(label) + 1, -1);
      TORCH_CHECK(category_of_label_[static_cast<size_t>(label)] < 0, "PartIoUMetric: label ", label,
                  " is in two categories");
      category_of_label_[static_cast<size_t>(label)] = static_cast<int64_t>(c);
    }
  category_of_label_tensor_ = torch::tensor(category_of_label_, torch::kLong);
  for (const auto& parts : category_parts_) part_index_.push_back(torch::tensor(parts, torch::kLong));
  category_sum_.assign(category_parts_.size(), 0.0);
  category_shapes_.assign(category_parts_.size(), 0);
}

void PartIoUMetric::add(const at::Tensor& logits_in, const at::Tensor& target_in) {
  TORCH_CHECK(logits_in.dim() == 3 && target_in.dim() == 2 && logits_in.size(0) == target_in.size(0) &&
                  logits_in.size(1) == target_in.size(1),
              "PartIoUMetric: expected logits [B, N, labels] and target [B, N]");
  const auto logits = logits_in.detach().to(torch::kCPU, torch::kFloat);
  const auto target = target_in.to(torch::kCPU, torch::kLong);
  const auto labels = static_cast<int64_t>(category_of_label_.size());
  TORCH_CHECK(logits.size(2) >= labels, "PartIoUMetric: logits have ", logits.size(2), " labels, the categories use ",
              labels);
  for (int64_t b = 0; b < target.size(0); ++b) {
    const auto truth = target[b];
    const auto valid = truth.masked_select(truth != kIgnoreIndex);
    if (valid.numel() == 0) continue;
    const int64_t lo = valid.min().item<int64_t>(), hi = valid.max().item<int64_t>();
    if (lo < 0 || hi >= labels || category_of_label_[static_cast<size_t>(lo)] < 0)
      throw DataError("part label " + std::to_string(lo < 0 ? lo : hi) + " belongs to no category");
    const int64_t c = category_of_label_[static_cast<size_t>(lo)];
    const auto& parts = category_parts_[static_cast<size_t>(c)];
    for (const int64_t label : {lo, hi})
      if (category_of_label_[static_cast<size_t>(label)] != c)
        throw DataError("a shape's part labels span two categories (" + category_names_[static_cast<size_t>(c)] +
                        " and " + category_names_[static_cast<size_t>(category_of_label_[static_cast<size_t>(label)])] +
                        ")");
    // Parts are not always contiguous in general: check every label.
    if (!(category_of_label_tensor_.index_select(0, valid) == c).all().item<bool>())
      throw DataError("a shape's part labels are not all parts of " + category_names_[static_cast<size_t>(c)]);
    const auto& part_index = part_index_[static_cast<size_t>(c)];
    const auto pred = part_index.index_select(0, logits[b].index_select(1, part_index).argmax(1));
    category_sum_[static_cast<size_t>(c)] += shape_part_miou(pred, truth, parts);
    ++category_shapes_[static_cast<size_t>(c)];
    const auto scored = truth != kIgnoreIndex;
    correct_ += ((pred == truth) & scored).sum().item<int64_t>();
    scored_ += scored.sum().item<int64_t>();
  }
}

nlohmann::json PartIoUMetric::result() const {
  double instance = 0, per_class = 0;
  int64_t shapes = 0, categories = 0;
  nlohmann::json table = nlohmann::json::object();
  for (size_t c = 0; c < category_parts_.size(); ++c) {
    if (category_shapes_[c] == 0) continue;
    const double mean = category_sum_[c] / static_cast<double>(category_shapes_[c]);
    table[category_names_[c]] = {{"shapes", category_shapes_[c]}, {"miou", mean}};
    instance += category_sum_[c];
    shapes += category_shapes_[c];
    per_class += mean;
    ++categories;
  }
  return {{"instance_miou", shapes > 0 ? instance / static_cast<double>(shapes) : 0.0},
          {"class_miou", categories > 0 ? per_class / static_cast<double>(categories) : 0.0},
          {"accuracy", scored_ > 0 ? static_cast<double>(correct_) / static_cast<double>(scored_) : 0.0},
          {"shapes", shapes},
          {"category_iou", table}};
}

std::vector<double> PartIoUMetric::totals() const {
  std::vector<double> v{static_cast<double>(correct_), static_cast<double>(scored_)};
  v.insert(v.end(), category_sum_.begin(), category_sum_.end());
  for (const auto n : category_shapes_) v.push_back(static_cast<double>(n));
  return v;
}

void PartIoUMetric::load_totals(const std::vector<double>& v) {
  const size_t c = category_parts_.size();
  TORCH_CHECK(v.size() == 2 + 2 * c, "PartIoUMetric::load_totals: expected ", 2 + 2 * c, " values, got ", v.size());
  correct_ = std::llround(v[0]);
  scored_ = std::llround(v[1]);
  for (size_t i = 0; i < c; ++i) {
    category_sum_[i] = v[2 + i];
    category_shapes_[i] = std::llround(v[2 + c + i]);
  }
}

}  // namespace qkv::train
