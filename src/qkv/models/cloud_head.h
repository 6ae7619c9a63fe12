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

namespace qkv::models {

// "max", "mean" or "max+mean" (concatenated); UsageError otherwise.
void check_pooling(const std::string& model, const std::string& pooling);
// Features per cloud after pooling `channels` per-point features.
int64_t pooled_width(int64_t channels, const std::string& pooling);
// x [B, F, N] -> [B, F] or [B, 2F].
at::Tensor global_pool(const at::Tensor& x, const std::string& pooling);

class ClassificationHeadImpl : public torch::nn::Module {
 public:
  ClassificationHeadImpl(int64_t in_features, const std::vector<int64_t>& hidden, int64_t classes, double dropout,
                         double negative_slope = 0.2);
  at::Tensor forward(const at::Tensor& x) { return layers->forward(x); }
  torch::nn::Sequential layers{nullptr};
};
TORCH_MODULE(ClassificationHead);

}  // namespace qkv::models
