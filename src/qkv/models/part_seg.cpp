#include "qkv/models/part_seg.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"
#include "qkv/models/vn_dgcnn.h"
#include "qkv/vn/edge_conv.h"

namespace qkv::models {
namespace {

// Vector Neurons divides DGCNN's widths by 3: each VN channel holds 3 numbers.
constexpr int64_t kC = 64 / 3, kWide = 1024 / 3;

}  // namespace

PartSegmentationHead PartHeadOptions::make(int64_t point_features, int64_t global_features) const {
  return PartSegmentationHead(point_features, global_features, categories, category_dim, seg_hidden, parts, dropout,
                              seg_negative_slope);
}

ModelSize PartHeadOptions::size(int64_t point_features, int64_t global_features, int64_t points) const {
  return part_segmentation_head_size(point_features, global_features, categories, category_dim, seg_hidden, parts,
                                     dropout, points);
}

// ---------------------------------------------------------------------------- vnt-seg

VNTSegOptions::VNTSegOptions() {
  // The paper: "Linear Dimension=128, Heads Number=14 and Head Size=16"; its
  // segmentation head has ReLU and batch norm between 4 linear layers.
  backbone.linear_dim = 128;
  backbone.heads = 14;
  backbone.head_dim = 16;
  backbone.pooling = "max";
  head.seg_negative_slope = 0.0;
}

VNTSegOptions VNTSegOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<VNTSegOptions>("vnt-seg", j);
  check_vnt_backbone_options("vnt-seg", o.backbone);
  return o;
}

VNTNetSeg::VNTNetSeg(const VNTSegOptions& o) : VNTBackbone(o.backbone) {
  head_ = register_module("head",
                          o.head.make(point_feature_width(), pooled_width(point_feature_width(), o.backbone.pooling)));
}

// The backbone's size (vnt_backbone_size), then the head on the 6 L C
// per-point features and their pooling.
ModelSize vnt_seg_size(const VNTSegOptions& o, int64_t points) {
  auto s = vnt_backbone_size(o.backbone, points);
  const int64_t features = sat_mul(6, o.backbone.blocks, o.backbone.linear_dim);
  accumulate(s, o.head.size(features, pooled_width(features, o.backbone.pooling), points));
  return s;
}

at::Tensor VNTNetSeg::forward(const data::Batch& batch) {
  const auto category = category_input(batch);
  const auto features = point_features(batch);
  return head_->forward(features, global_pool(features, options_.pooling), category);
}

// ---------------------------------------------------------------------------- vn-dgcnn-seg

VNDGCNNSegOptions::VNDGCNNSegOptions() { head.dropout = 0.5; }

VNDGCNNSeg::VNDGCNNSeg(const VNDGCNNSegOptions& o) : options_(o) {
  // conv1, conv2 | pool | conv3, conv4 | pool | conv5 | pool, as the original.
  const int64_t in[] = {2, kC, 2 * kC, kC, 2 * kC};
  auto convs = torch::nn::ModuleList(), pools = torch::nn::ModuleList();
  for (int i = 0; i < 5; ++i) {
    convs_.push_back(vn::VNLinearLeakyReLU(in[i], kC));
    convs->push_back(convs_.back());
  }
  for (int i = 0; i < 3 && o.pooling == "max"; ++i) {
    max_pools_.push_back(vn::VNMaxPool(kC));
    pools->push_back(max_pools_.back());
  }
  register_module("convs", convs);
  if (o.pooling == "max") register_module("pools", pools);
  conv6_ = register_module("conv6", vn::VNLinearLeakyReLU(3 * kC, kWide, /*share=*/true));
  invariant_ = register_module("invariant", vn::VNStdFeature(2 * kWide));
  head_ = register_module("head", o.head.make(3 * 3 * kC, 3 * 2 * kWide));
}

// Activations of one cloud of N points, k neighbours (a VN channel is 3
// floats; C = 21): per graph the kNN indices (2 N k floats); the first two
// graphs' factorised edge conv (gathered and summed feature and direction
// edges, batch norm, leaky ReLU: 6 C 3 N k) and second conv on the edges
// (product, batch norm, leaky ReLU: 4 C 3 N k), then their pooling (mean:
// C 3 N; max: the directions, 1 C 3 N k, and dot products, C N k); the third
// graph's conv as vn_dgcnn_size's (fused mean: 5 C 3 N; max: 7 C 3 N k +
// C N k); conv6's input, products and outputs; the invariant layer on 682
// channels; the per-point frame coordinates (189 N); the head.
ModelSize vn_dgcnn_seg_size(const VNDGCNNSegOptions& o, int64_t points) {
  check_points("vn-dgcnn-seg", points);
  const int64_t n = points, k = o.k;
  const bool max = o.pooling == "max";
  const int64_t in[] = {2, kC, 2 * kC, kC, 2 * kC};
  ModelSize s;
  for (int i = 0; i < 5; ++i) s.parameters = sat_add(s.parameters, vn_linear_leaky_relu_parameters(in[i], kC));
  if (max) s.parameters = sat_add(s.parameters, 3 * kC * kC);
  s.parameters = sat_add(s.parameters, vn_linear_leaky_relu_parameters(3 * kC, kWide, /*share=*/true),
                         vn_std_feature_parameters(2 * kWide));
  const int64_t pool = max ? sat_add(sat_mul(kC, 3, n, k), sat_mul(kC, n, k)) : sat_mul(kC, 3, n);
  const int64_t edge_stage = sat_add(sat_mul(2, n, k), sat_mul(10, kC, 3, n, k), pool);
  const int64_t last_stage =
      sat_add(sat_mul(2, n, k), max ? sat_add(sat_mul(7, kC, 3, n, k), sat_mul(kC, n, k)) : sat_mul(5, kC, 3, n));
  s.activation_floats =
      sat_add(sat_mul(2, edge_stage), last_stage, sat_mul(3, n, 3 * kC + (kWide + 1) + 2 * kWide),  // conv6
              sat_mul(4, 2 * kWide, 3, n), sat_mul(18, n),                                          // invariant
              sat_mul(3 * 3 * kC, n));                                                              // frame coordinates
  accumulate(s, o.head.size(3 * 3 * kC, 3 * 2 * kWide, points));
  return s;
}

at::Tensor VNDGCNNSeg::pool(size_t i, const at::Tensor& x) {
  return options_.pooling == "max" ? max_pools_[i]->forward(x) : vn::vn_mean_pool(x);
}

at::Tensor VNDGCNNSeg::forward(const data::Batch& batch) {
  const auto category = category_input(batch);
  auto x = vn_input(batch, false);  // [B, 1, 3, N]
  // Dynamic graphs: neighbours by distance between the current VN features;
  // each graph's first conv factorised (vn/edge_conv.h), the second on its
  // edges; the last graph's single conv fused with its mean pooling.
  auto graph = [&](const at::Tensor& v) { return vn::knn_indices(v.flatten(1, 2), options_.k); };
  auto edge_conv = [&](size_t i, const at::Tensor& v) { return vn::factorised_edge_conv(*convs_[i], v, graph(v)); };
  const auto x1 = pool(0, convs_[1]->forward(edge_conv(0, x)));
  const auto x2 = pool(1, convs_[3]->forward(edge_conv(2, x1)));
  const auto idx3 = graph(x2);
  const auto x3 = options_.pooling == "mean" ? vn::factorised_edge_conv_mean(*convs_[4], x2, idx3)
                                             : pool(2, vn::factorised_edge_conv(*convs_[4], x2, idx3));
  const auto x123 = torch::cat({x1, x2, x3}, 1);                               // [B, 63, 3, N]
  x = conv6_->forward(x123);                                                   // [B, 341, 3, N]
  const auto [invariant, frame] = invariant_->forward_with_mean(x);            // on [x; mean over N of x]
  const auto global = std::get<0>(invariant.flatten(1, 2).max(-1));            // [B, 2046]
  const auto per_point = vn::vn_frame_coordinates(x123, frame).flatten(1, 2);  // [B, 189, N]
  return head_->forward(per_point, global, category);
}

// ---------------------------------------------------------------------------- xyz-transformer-seg

XYZTransformerSegOptions::XYZTransformerSegOptions() { backbone.pooling = "max"; }

XYZTransformerSegOptions XYZTransformerSegOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<XYZTransformerSegOptions>("xyz-transformer-seg", j);
  check_xyz_backbone_options("xyz-transformer-seg", o.backbone);
  return o;
}

XYZTransformerSeg::XYZTransformerSeg(const XYZTransformerSegOptions& o) : XYZTransformerBackbone(o.backbone) {
  head_ =
      register_module("head", o.head.make(o.backbone.d_model, pooled_width(o.backbone.d_model, o.backbone.pooling)));
}

// The encoder's size (xyz_transformer_backbone_size), then the head on its
// d_model per-point features and their pooling.
ModelSize xyz_transformer_seg_size(const XYZTransformerSegOptions& o, int64_t points) {
  auto s = xyz_transformer_backbone_size(o.backbone, points);
  accumulate(s, o.head.size(o.backbone.d_model, pooled_width(o.backbone.d_model, o.backbone.pooling), points));
  return s;
}

at::Tensor XYZTransformerSeg::forward(const data::Batch& batch) {
  const auto category = category_input(batch);
  const auto features = point_features(batch);
  return head_->forward(features, global_pool(features, options_.pooling), category);
}

}  // namespace qkv::models
