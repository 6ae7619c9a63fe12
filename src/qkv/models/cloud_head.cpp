#include "qkv/models/cloud_head.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/core/text.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/models/live_layers.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

int64_t pooled_width(int64_t channels, const std::string& pooling) {
  return pooling == "max+mean" ? sat_mul(2, channels) : channels;  // saturating: also sizes huge options
}

at::Tensor global_pool(const at::Tensor& x, const std::string& pooling) {
  if (pooling == "max") return std::get<0>(x.max(-1));
  if (pooling == "mean") return x.mean(-1);
  return torch::cat({std::get<0>(x.max(-1)), x.mean(-1)}, 1);
}

// Activations: the input, per hidden layer the Linear's, BatchNorm's,
// LeakyReLU's and Dropout's outputs, the logits.
ModelSize classification_head_size(int64_t in_features, const std::vector<int64_t>& hidden, int64_t classes,
                                   double /*dropout: its layer is there at any rate*/) {
  ModelSize s;
  s.activation_floats = in_features;
  int64_t width = in_features;
  for (const int64_t h : hidden) {
    s.parameters = sat_add(s.parameters, linear_parameters(width, h), norm_parameters(h));
    s.activation_floats = sat_add(s.activation_floats, sat_mul(4, h));
    width = h;
  }
  s.parameters = sat_add(s.parameters, linear_parameters(width, classes));
  s.activation_floats = sat_add(s.activation_floats, classes);
  return s;
}

// Activations: the category's one-hot and code (Linear, BatchNorm,
// LeakyReLU), the concatenated per-point input, per hidden layer the
// convolution's, BatchNorm's and activation's outputs (and Dropout's) at every
// point, the part logits.
ModelSize part_segmentation_head_size(int64_t point_features, int64_t global_features, int64_t categories,
                                      int64_t category_dim, const std::vector<int64_t>& hidden, int64_t parts,
                                      double dropout, int64_t points) {
  ModelSize s;
  s.parameters = sat_add(linear_parameters(categories, category_dim, /*bias=*/false), norm_parameters(category_dim));
  int64_t width = sat_add(point_features, global_features, category_dim);
  int64_t per_point = width;
  for (size_t i = 0; i < hidden.size(); ++i) {
    s.parameters =
        sat_add(s.parameters, linear_parameters(width, hidden[i], /*bias=*/false), norm_parameters(hidden[i]));
    per_point = sat_add(per_point, sat_mul(dropout > 0 && i + 1 < hidden.size() ? 4 : 3, hidden[i]));
    width = hidden[i];
  }
  s.parameters = sat_add(s.parameters, linear_parameters(width, parts, /*bias=*/false));
  per_point = sat_add(per_point, parts);
  s.activation_floats = sat_add(categories, sat_mul(3, category_dim), sat_mul(points, per_point));
  return s;
}

ClassificationHeadImpl::ClassificationHeadImpl(int64_t in_features, const std::vector<int64_t>& hidden, int64_t classes,
                                               double dropout, double negative_slope) {
  layers = register_module("layers", LiveSequential());
  int64_t width = in_features;
  for (const int64_t h : hidden) {
    layers->push_back(LiveLinear(width, h));
    layers->push_back(layers::SyncBatchNorm(h));
    layers->push_back(LiveLeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(negative_slope)));
    layers->push_back(LiveDropout(dropout));
    width = h;
  }
  layers->push_back(LiveLinear(width, classes));
}

PartSegmentationHeadImpl::PartSegmentationHeadImpl(int64_t point_features, int64_t global_features, int64_t categories,
                                                   int64_t category_dim, const std::vector<int64_t>& hidden,
                                                   int64_t parts, double dropout, double negative_slope)
    : categories(categories) {
  const auto act = torch::nn::LeakyReLUOptions().negative_slope(negative_slope);
  category_code = register_module(
      "category_code", LiveSequential(LiveLinear(torch::nn::LinearOptions(categories, category_dim).bias(false)),
                                      layers::SyncBatchNorm(category_dim), LiveLeakyReLU(act)));
  layers = register_module("layers", LiveSequential());
  int64_t width = point_features + global_features + category_dim;
  for (size_t i = 0; i < hidden.size(); ++i) {
    layers->push_back(LiveConv1d(torch::nn::Conv1dOptions(width, hidden[i], 1).bias(false)));
    layers->push_back(layers::SyncBatchNorm(hidden[i]));
    layers->push_back(LiveLeakyReLU(act));
    if (dropout > 0 && i + 1 < hidden.size()) layers->push_back(LiveDropout(dropout));
    width = hidden[i];
  }
  layers->push_back(LiveConv1d(torch::nn::Conv1dOptions(width, parts, 1).bias(false)));
}

at::Tensor PartSegmentationHeadImpl::forward(const at::Tensor& point, const at::Tensor& global,
                                             const at::Tensor& category) {
  // (.item() cannot run under a torch.func transform; there a category out
  // of range gives a zero code instead of this error.)
  if (!under_function_transform() && category.numel() > 0 &&
      (category.min().item<int64_t>() < 0 || category.max().item<int64_t>() >= categories))
    throw UsageError("input 'category': values must be in 0.." + std::to_string(categories - 1));
  const int64_t n = point.size(2);
  // The one-hot code as a comparison, which torch.func's vmap can batch.
  const auto one_hot = category.unsqueeze(-1).eq(torch::arange(categories, category.options())).to(point.scalar_type());
  const auto code = category_code->forward(one_hot);  // [B, category_dim]
  const auto per_shape = torch::cat({global, code}, 1).unsqueeze(2).expand({-1, -1, n});
  return observed(*this, {point, global, category}, layers->forward(torch::cat({point, per_shape}, 1)).transpose(1, 2));
}

at::Tensor category_input(const data::Batch& batch) {
  const auto& category = batch.input("category");
  if (category.dim() != 1 || category.scalar_type() != torch::kLong ||
      category.size(0) != batch.input("points").size(0))
    throw UsageError("input 'category': expected [B] int64 category indices, got " + shape_of(category));
  return category;
}

}  // namespace qkv::models
