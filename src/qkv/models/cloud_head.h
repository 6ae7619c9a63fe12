#pragma once
// What the point-cloud classifiers share after their (invariant or not)
// per-point features: a global pooling over the points and the MLP head of
// DGCNN / Vector Neurons / VNT-Net (Linear, BatchNorm, LeakyReLU, Dropout per
// hidden layer, then a Linear to the classes).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/models/live_layers.h"
#include "qkv/models/model.h"

namespace qkv::models {

// The option "pooling" of the classifiers that pool over the points: "max",
// "mean" or "max+mean" (concatenated).
inline Field global_pooling_field() {
  return Field{"pooling", "global pooling over the points: max, mean or max+mean"}.one_of("max|mean|max+mean");
}

// The option "point_features" (vn_input's F) of every VN classifier that reads
// per-point features.
inline Field point_features_field() {
  return Field{"point_features",
               "F per-point invariant features (input \"features\" [B, F, N]), each fused as the vector channel f x "
               "(an invariant scalar times the point: exactly rotation-invariant)"}
      .range(0, 1 << 16)
      .from("our choice (the paper reads xyz only)");
}

// Features per cloud after pooling `channels` per-point features.
int64_t pooled_width(int64_t channels, const std::string& pooling);
// x [B, F, N] -> [B, F] or [B, 2F].
at::Tensor global_pool(const at::Tensor& x, const std::string& pooling);

// The size of ClassificationHeadImpl(in_features, hidden, classes, dropout, ...)
// for one sample.
ModelSize classification_head_size(int64_t in_features, const std::vector<int64_t>& hidden, int64_t classes,
                                   double dropout);

class ClassificationHeadImpl : public torch::nn::Module {
 public:
  ClassificationHeadImpl(int64_t in_features, const std::vector<int64_t>& hidden, int64_t classes, double dropout,
                         double negative_slope = 0.2);
  at::Tensor forward(const at::Tensor& x) { return observed(*this, {x}, layers->forward(x)); }
  LiveSequential layers{nullptr};
};
TORCH_MODULE(ClassificationHead);

// The size of PartSegmentationHeadImpl(point_features, global_features,
// categories, category_dim, hidden, parts, dropout, ...) for one sample of
// `points` points.
ModelSize part_segmentation_head_size(int64_t point_features, int64_t global_features, int64_t categories,
                                      int64_t category_dim, const std::vector<int64_t>& hidden, int64_t parts,
                                      double dropout, int64_t points);

// The part-segmentation head of DGCNN / Vector Neurons / VNT-Net: the object
// category (one-hot) through a linear layer with BatchNorm and LeakyReLU; the
// global feature and the category code repeated at every point and
// concatenated to its own features; then per-point linear layers (1x1
// convolutions without bias) each with BatchNorm and LeakyReLU (ReLU for slope
// 0), Dropout after each but the last hidden one, and a last linear layer
// without bias to the part logits.
class PartSegmentationHeadImpl : public torch::nn::Module {
 public:
  PartSegmentationHeadImpl(int64_t point_features, int64_t global_features, int64_t categories, int64_t category_dim,
                           const std::vector<int64_t>& hidden, int64_t parts, double dropout,
                           double negative_slope = 0.2);
  // point [B, Fp, N], global [B, Fg], category [B] int64 -> logits [B, N, parts].
  // UsageError for a category outside 0..categories-1.
  at::Tensor forward(const at::Tensor& point, const at::Tensor& global, const at::Tensor& category);
  LiveSequential category_code{nullptr}, layers{nullptr};
  int64_t categories;
};
TORCH_MODULE(PartSegmentationHead);

// The "category" input of a part-segmentation batch, checked: [B] int64.
at::Tensor category_input(const data::Batch& batch);

}  // namespace qkv::models
