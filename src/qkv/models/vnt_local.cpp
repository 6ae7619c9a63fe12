#include "qkv/models/vnt_local.h"

#include <torch/torch.h>

#include <algorithm>

#include "qkv/core/errors.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

VNTLocalOptions VNTLocalOptions::from_json(const nlohmann::json& j, const std::string& name) {
  const auto o = read_model_options<VNTLocalOptions>(name, j);
  check_vnt_backbone_options(name, o.net);
  return o;
}

// vnt's backbone and head, the attention of each block being, per head, for
// every one of the N queries: the neighbours' gathered keys and values (2 k
// 3d floats), the scaled query (3d), the softmax's weights (k) and the gather's
// row indices (k int64s, as 2 k floats); and the neighbourhood graph's indices
// when it is not the edge conv's (N k int64s, as 2 N k floats).
ModelSize vnt_local_size(const VNTLocalOptions& options, int64_t points) {
  check_points("vnt-local", points);
  const auto& o = options.net;
  const int64_t n = points, kn = options.neighbours, rows = sat_mul(3, o.head_dim);
  const int64_t per_query = sat_add(sat_mul(2, kn, rows), rows, sat_mul(3, kn));
  auto s = vnt_backbone_size(o, points, sat_mul(o.heads, n, per_query));
  accumulate(s, {0, kn == o.k ? 0 : sat_mul(2, n, kn)});
  accumulate(s, classification_head_size(pooled_width(sat_mul(6, o.blocks, o.linear_dim), o.pooling), o.head_hidden,
                                         o.classes, o.dropout));
  return s;
}

VNTLocalNet::VNTLocalNet(const VNTLocalOptions& options) : options_(options) {
  // Registered in VNTNet's order and under its names: edge_conv, blocks, invariant, head.
  const auto& o = options.net;
  const int64_t in_channels = vn_input_channels(o.normals, o.point_features);
  edge_conv_ =
      register_module("edge_conv", vn::VNEdgeConv(in_channels, o.linear_dim, o.k, o.edge_cross, o.negative_slope));
  auto list = torch::nn::ModuleList();
  for (int64_t i = 0; i < o.blocks; ++i) {
    blocks_.push_back(vn::VNLocalTBlock(o.linear_dim, o.heads, o.head_dim, o.hidden(), o.layer_norm));
    list->push_back(blocks_.back());
  }
  register_module("blocks", list);
  invariant_ = register_module(
      "invariant", vn::VNStdFeature(2 * o.blocks * o.linear_dim, o.normalize_frame, false, o.negative_slope));
  head_ = register_module("head", ClassificationHead(pooled_width(3 * 2 * o.blocks * o.linear_dim, o.pooling),
                                                     o.head_hidden, o.classes, o.dropout, o.negative_slope));
}

at::Tensor VNTLocalNet::point_features(const data::Batch& batch, std::vector<at::Tensor>* attention,
                                       at::Tensor* graph) {
  const auto& o = options_.net;
  const auto x0 = vn_input(batch, o.normals, o.point_features);
  // One kNN search for both graphs: its rows are sorted nearest first, ties
  // by index, so the first k columns of the larger graph are the smaller one.
  const int64_t kn = options_.neighbours, most = std::max(o.k, kn);
  const auto idx = vn::knn_indices(batch.input("points"), most);
  const auto edge_idx = o.k == most ? idx : idx.narrow(2, 0, o.k).contiguous();
  const auto attention_idx = kn == most ? idx : idx.narrow(2, 0, kn).contiguous();
  if (graph) *graph = attention_idx;
  auto x = edge_conv_->forward(x0, edge_idx);
  std::vector<at::Tensor> outputs;
  for (auto& block : blocks_) {
    at::Tensor weights;
    x = block->forward(x, attention_idx, attention ? &weights : nullptr);
    if (attention) attention->push_back(weights);
    outputs.push_back(x);
  }
  const auto features = torch::cat(outputs, 1);                        // [B, blocks*C, 3, N]
  return invariant_->forward_with_mean(features).first.flatten(1, 2);  // [B, F, N]
}

AttentionMaps VNTLocalNet::attention_maps(const data::Batch& batch) {
  AttentionMaps maps;
  point_features(batch, &maps.layers, &maps.keys);
  return maps;
}

at::Tensor VNTLocalNet::features(const data::Batch& batch) {
  return global_pool(point_features(batch), options_.net.pooling);
}

at::Tensor VNTLocalNet::forward(const data::Batch& batch) { return head_->forward(features(batch)); }

}  // namespace qkv::models
