#include "qkv/models/vn_dgcnn.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"
#include "qkv/models/vnt_net.h"
#include "qkv/vn/edge_conv.h"

namespace qkv::models {
namespace {

// Vector Neurons divides DGCNN's widths by 3: each VN channel holds 3 numbers.
constexpr int64_t kC1 = 64 / 3, kC2 = 64 / 3, kC3 = 128 / 3, kC4 = 256 / 3, kC5 = 1024 / 3;

}  // namespace

// Activations of one cloud of N points, k neighbours (a VN channel is 3
// floats): per edge convolution of C_out channels the kNN indices (2 N k
// floats for N k int64s) and, with mean pooling, the fused pass's four
// per-point products and its output (5 C_out 3 N: it keeps nothing
// edge-sized), with max pooling the gathered and summed feature and direction
// edges, the batch norm, the leaky ReLU and the pool's directions
// (7 C_out 3 N k) and its dot products (C_out N k); conv5's input, products
// and outputs; the invariant layer on 682 channels; the head.
ModelSize vn_dgcnn_size(const VNDGCNNOptions& o, int64_t points) {
  check_points("vn-dgcnn", points);
  const int64_t n = points, k = o.k;
  const bool max = o.pooling == "max";
  const int64_t in[] = {vn_input_channels(false, o.point_features), kC1, kC2, kC3}, out[] = {kC1, kC2, kC3, kC4};
  ModelSize s;
  for (int i = 0; i < 4; ++i) {
    s.parameters = sat_add(s.parameters, vn_linear_leaky_relu_parameters(2 * in[i], out[i]), max ? out[i] * out[i] : 0);
    const int64_t edges = max ? sat_add(sat_mul(7, out[i], 3, n, k), sat_mul(out[i], n, k)) : sat_mul(5, out[i], 3, n);
    s.activation_floats = sat_add(s.activation_floats, sat_mul(2, n, k), edges);
  }
  const int64_t levels = kC1 + kC2 + kC3 + kC4;
  s.parameters = sat_add(s.parameters, vn_linear_leaky_relu_parameters(levels, kC5, /*share=*/true),
                         vn_std_feature_parameters(2 * kC5));
  s.activation_floats = sat_add(s.activation_floats, sat_mul(3, n, levels + (kC5 + 1) + 2 * kC5),  // conv5
                                sat_mul(4, 2 * kC5, 3, n), sat_mul(18, n));  // the invariant layer
  accumulate(s, classification_head_size(2 * 3 * 2 * kC5, {512, 256}, o.classes, o.dropout));
  return s;
}

VNDGCNN::VNDGCNN(const VNDGCNNOptions& o) : options_(o) {
  const int64_t in[] = {vn_input_channels(false, o.point_features), kC1, kC2, kC3}, out[] = {kC1, kC2, kC3, kC4};
  auto convs = torch::nn::ModuleList(), pools = torch::nn::ModuleList();
  for (int i = 0; i < 4; ++i) {
    convs_.push_back(vn::VNLinearLeakyReLU(2 * in[i], out[i]));
    convs->push_back(convs_.back());
    if (o.pooling == "max") {
      max_pools_.push_back(vn::VNMaxPool(out[i]));
      pools->push_back(max_pools_.back());
    }
  }
  register_module("convs", convs);
  if (o.pooling == "max") register_module("pools", pools);
  conv5_ = register_module("conv5", vn::VNLinearLeakyReLU(kC1 + kC2 + kC3 + kC4, kC5, /*share=*/true));
  invariant_ = register_module("invariant", vn::VNStdFeature(2 * kC5));
  head_ = register_module("head",
                          ClassificationHead(2 * 3 * 2 * kC5, std::vector<int64_t>{512, 256}, o.classes, o.dropout));
}

at::Tensor VNDGCNN::pool(size_t i, const at::Tensor& x) {
  return options_.pooling == "max" ? max_pools_[i]->forward(x) : vn::vn_mean_pool(x);
}

at::Tensor VNDGCNN::forward(const data::Batch& batch) { return head_->forward(features(batch)); }

at::Tensor VNDGCNN::features(const data::Batch& batch) {
  auto x = vn_input(batch, false, options_.point_features);  // [B, 1 + F, 3, N]
  std::vector<at::Tensor> levels;
  for (size_t i = 0; i < convs_.size(); ++i) {
    // Dynamic graph: neighbours by distance between the current VN features;
    // the first one by the points alone (the feature channels f x left out).
    const auto graph = i == 0 ? x.narrow(1, 0, 1) : x;
    const auto idx = vn::knn_indices(graph.flatten(1, 2), options_.k);
    x = options_.pooling == "mean" ? vn::factorised_edge_conv_mean(*convs_[i], x, idx)
                                   : pool(i, vn::factorised_edge_conv(*convs_[i], x, idx));
    levels.push_back(x);
  }
  x = conv5_->forward(torch::cat(levels, 1));  // [B, 341, 3, N]
  // The invariant layer on [x; mean over N of x] ([B, 682, 3, N], never built).
  const auto invariant = invariant_->forward_with_mean(x).first.flatten(1, 2);  // [B, 682*3, N]
  return global_pool(invariant, "max+mean");
}

}  // namespace qkv::models
