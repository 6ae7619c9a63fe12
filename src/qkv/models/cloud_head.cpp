#include "qkv/models/cloud_head.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"

namespace qkv::models {

void check_pooling(const std::string& model, const std::string& pooling) {
  if (pooling != "max" && pooling != "mean" && pooling != "max+mean")
    throw UsageError(model + " option 'pooling' = \"" + pooling + "\": expected max, mean or max+mean");
}

int64_t pooled_width(int64_t channels, const std::string& pooling) {
  return pooling == "max+mean" ? 2 * channels : channels;
}

at::Tensor global_pool(const at::Tensor& x, const std::string& pooling) {
  if (pooling == "max") return std::get<0>(x.max(-1));
  if (pooling == "mean") return x.mean(-1);
  return torch::cat({std::get<0>(x.max(-1)), x.mean(-1)}, 1);
}

ClassificationHeadImpl::ClassificationHeadImpl(int64_t in_features, const std::vector<int64_t>& hidden,
                                               int64_t classes, double dropout, double negative_slope) {
  layers = register_module("layers", torch::nn::Sequential());
  int64_t width = in_features;
  for (const int64_t h : hidden) {
    layers->push_back(torch::nn::Linear(width, h));
    layers->push_back(torch::nn::BatchNorm1d(h));
    layers->push_back(torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(negative_slope)));
    layers->push_back(torch::nn::Dropout(dropout));
    width = h;
  }
  layers->push_back(torch::nn::Linear(width, classes));
}

}  // namespace qkv::models
