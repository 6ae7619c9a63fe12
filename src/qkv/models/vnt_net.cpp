#include "qkv/models/vnt_net.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

VNTNetOptions VNTNetOptions::from_json(const nlohmann::json& j, const std::string& name) {
  VNTNetOptions defaults;
  defaults.normals = name == "vnt+n";
  const auto o = read_model_options(name, j, defaults);
  check_vnt_backbone_options(name, o);
  return o;
}

void check_vnt_backbone_options(const std::string& model, const VNTNetOptions& o) {
  if (sat_mul(2, o.blocks, o.linear_dim) < 4)  // saturating: blocks and linear_dim may be huge
    throw UsageError(model + ": the invariant layer needs 2 * blocks * linear_dim >= 4");
}

// Activations of one cloud of N points with k neighbours, C channels, H heads
// of width d, F FFN channels and L blocks (a VN channel is 3 floats): the kNN
// indices (N k int64s, as 2 N k floats); the edge conv's edge features and its
// feature+direction product, batch norm and leaky ReLU on every edge,
// 3 N k (C_edge + 4 C); per block q, k, v and the heads' output (4 H d),
// W_O's output and the two residuals (with the attention input, 4 C), the
// FFN's hidden product, direction and ReLU (3 F), each times 3 N, the
// H N N attention weights, and the layer norms' outputs (2 C 3 N); the
// blocks' concatenation (L C 3 N); the invariant layer on 2 L C channels
// (its two VN layers, the frame coordinates: 4 * 2 L C * 3 N, the frame).
// The attention weights are the naive attention's (transformer_block_size);
// on the CPU the tiled kernel keeps none: the defaults measured 2.5x below
// this at 512 points and 4x at 1024, the rest within 10 %.
ModelSize vnt_backbone_size(const VNTNetOptions& o, int64_t points) {
  check_points("vnt", points);
  return vnt_backbone_size(o, points, sat_mul(o.heads, points, points));
}

ModelSize vnt_backbone_size(const VNTNetOptions& o, int64_t points, int64_t attention_floats) {
  const int64_t n = points, c = o.linear_dim, heads_width = sat_mul(o.heads, o.head_dim);
  const int64_t ffn = o.ffn_hidden > 0 ? o.ffn_hidden : sat_mul(4, c);  // not o.hidden(): 4 * C may overflow
  const int64_t edge_in = sat_mul(vn_input_channels(o.normals, o.point_features), o.edge_cross ? 3 : 2);
  const int64_t invariant_in = sat_mul(2, o.blocks, c);

  ModelSize edge_conv, block, invariant;
  edge_conv.parameters = vn_linear_leaky_relu_parameters(edge_in, c);
  edge_conv.activation_floats =
      sat_add(sat_mul(2, n, o.k), sat_mul(3, n, o.k, sat_add(edge_in, sat_mul(4, c))), sat_mul(3, n, c));
  block.parameters = vnt_block_parameters(c, o.heads, o.head_dim, ffn, o.layer_norm);
  block.activation_floats =
      sat_add(sat_mul(3, n, sat_add(sat_mul(4, heads_width), sat_mul(o.layer_norm ? 6 : 4, c), sat_mul(3, ffn))),
              attention_floats);
  invariant.parameters = vn_std_feature_parameters(invariant_in, o.normalize_frame);
  invariant.activation_floats = sat_add(sat_mul(3, n, o.blocks, c), sat_mul(4, invariant_in, 3, n), sat_mul(18, n));

  ModelSize s = edge_conv;
  accumulate(s, {sat_mul(o.blocks, block.parameters), sat_mul(o.blocks, block.activation_floats)});
  accumulate(s, invariant);
  return s;
}

// The backbone, then the classification head on the pooled 6 L C features.
ModelSize vnt_net_size(const VNTNetOptions& o, int64_t points) {
  auto s = vnt_backbone_size(o, points);
  accumulate(s, classification_head_size(pooled_width(sat_mul(6, o.blocks, o.linear_dim), o.pooling), o.head_hidden,
                                         o.classes, o.dropout));
  return s;
}

at::Tensor vn_input(const data::Batch& batch, bool with_normals, int64_t features) {
  const auto& points = batch.input("points");
  if (points.dim() != 3 || points.size(1) != 3)
    throw UsageError(
        "input 'points': expected [B, 3, N], got " + shape_of(points) +
        (points.dim() == 3 && points.size(2) == 3 ? " (points as rows: pass points.transpose(1, 2))" : ""));
  // (.item() cannot run under a torch.func transform: there a non-finite value propagates.)
  const bool checkable = !under_function_transform();
  if (checkable && !torch::isfinite(points).all().item<bool>())
    throw DataError("input 'points' holds NaN or Inf coordinates");
  std::vector<at::Tensor> channels = {points.unsqueeze(1)};
  if (with_normals) {
    const auto& normals = batch.input("normals");
    if (!normals.sizes().equals(points.sizes()))
      throw UsageError("input 'normals' " + shape_of(normals) + " does not match 'points' " + shape_of(points));
    if (checkable && !torch::isfinite(normals).all().item<bool>())
      throw DataError("input 'normals' holds NaN or Inf values");
    channels.push_back(normals.unsqueeze(1));
  }
  if (features > 0) {
    const auto& f = batch.input("features");
    if (f.dim() != 3 || f.size(0) != points.size(0) || f.size(1) != features || f.size(2) != points.size(2))
      throw UsageError("input 'features': expected [B, F, N] = [" + std::to_string(points.size(0)) + ", " +
                       std::to_string(features) + ", " + std::to_string(points.size(2)) + "] for points " +
                       shape_of(points) + ", got " + shape_of(f));
    if (checkable && !torch::isfinite(f).all().item<bool>())
      throw DataError("input 'features' holds NaN or Inf values");
    channels.push_back(f.to(points.scalar_type()).unsqueeze(2) * points.unsqueeze(1));  // [B, F, 3, N]: f x
  }
  return channels.size() == 1 ? channels[0] : torch::cat(channels, 1);
}

VNTBackbone::VNTBackbone(const VNTNetOptions& o) : options_(o) {
  const int64_t in_channels = vn_input_channels(o.normals, o.point_features);
  edge_conv_ =
      register_module("edge_conv", vn::VNEdgeConv(in_channels, o.linear_dim, o.k, o.edge_cross, o.negative_slope));
  auto list = torch::nn::ModuleList();
  for (int64_t i = 0; i < o.blocks; ++i) {
    blocks_.push_back(vn::VNTBlock(o.linear_dim, o.heads, o.head_dim, o.hidden(), o.layer_norm));
    list->push_back(blocks_.back());
  }
  register_module("blocks", list);
  // The invariant layer sees the block outputs and their mean over the cloud,
  // as in Vector Neurons: the mean gives the frame a global reference.
  const int64_t vn_channels = 2 * o.blocks * o.linear_dim;
  invariant_ = register_module("invariant", vn::VNStdFeature(vn_channels, o.normalize_frame, false, o.negative_slope));
}

VNTNet::VNTNet(const VNTNetOptions& o) : VNTBackbone(o) {
  head_ = register_module("head", ClassificationHead(pooled_width(point_feature_width(), o.pooling), o.head_hidden,
                                                     o.classes, o.dropout, o.negative_slope));
}

at::Tensor VNTBackbone::point_features(const data::Batch& batch, std::vector<at::Tensor>* attention) {
  const auto x0 = vn_input(batch, options_.normals, options_.point_features);
  const auto idx = vn::knn_indices(batch.input("points"), options_.k);
  auto x = edge_conv_->forward(x0, idx);
  std::vector<at::Tensor> outputs;
  for (auto& block : blocks_) {
    at::Tensor weights;
    x = block->forward(x, attention ? &weights : nullptr);
    if (attention) attention->push_back(weights);
    outputs.push_back(x);
  }
  const auto features = torch::cat(outputs, 1);  // [B, blocks*C, 3, N]
  // The invariant layer on [features; their mean over N].
  const auto invariant = invariant_->forward_with_mean(features).first;  // [B, 2*blocks*C, 3, N]
  return invariant.flatten(1, 2);                                        // [B, F, N]
}

AttentionMaps VNTBackbone::attention_maps(const data::Batch& batch) {
  AttentionMaps maps;
  point_features(batch, &maps.layers);
  return maps;
}

at::Tensor VNTNet::features(const data::Batch& batch) { return global_pool(point_features(batch), options_.pooling); }

at::Tensor VNTNet::forward(const data::Batch& batch) { return head_->forward(features(batch)); }

}  // namespace qkv::models
