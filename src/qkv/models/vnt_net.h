#pragma once
// VNT-Net (Vector Neuron Transformer, classification): an edge-convolution
// input block lifts each point's xyz (and normal, "+N") to C vector channels;
// three basic blocks (multi-head VNAttention + residual, VN-FFN + residual)
// keep them SO(3)-equivariant; the concatenated block outputs go through the
// invariant layer and a global pooling to an MLP head. Rotating the input
// cloud leaves the logits unchanged (tests/vn).
#include <string>
#include <vector>

#include "qkv/models/cloud_head.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"
#include "qkv/vn/vn_layers.h"

namespace qkv::models {

struct VNTNetOptions {
  int64_t classes = 40;
  int64_t linear_dim = 16;  // C: edge-conv output and block width
  int64_t heads = 24;
  int64_t head_dim = 16;
  int64_t blocks = 3;
  int64_t ffn_hidden = 0;  // 0 = 4 * linear_dim
  int64_t k = 20;
  bool edge_cross = false;
  bool normals = false;        // "+N" (input "normals")
  int64_t point_features = 0;  // F (input "features"), as F more vector channels (vn_input)
  bool layer_norm = false;
  bool normalize_frame = false;
  std::string pooling = "max+mean";
  std::vector<int64_t> head_hidden = {512, 256};
  double dropout = 0.5;
  double negative_slope = 0.2;

  // `name` is the registry name: errors name it, and "vnt+n" makes normals
  // the default.
  static VNTNetOptions from_json(const nlohmann::json& j, const std::string& name = "vnt");
  nlohmann::json to_json() const { return fields_to_json(*this); }
  int64_t hidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * linear_dim; }
};

inline Field vnt_negative_slope_field() {
  return Field{"negative_slope", "LeakyReLU slope of the edge conv, the invariant layer and the head"}.range(0, 1).from(
      "as DGCNN and Vector Neurons");
}

// The options of the VNT-Net backbone but its LeakyReLU slope
// (vnt_negative_slope_field), which each model lists after its own head's
// options: all but the classifier head's (classes, head_hidden, dropout).
// The classifier and the segmenter share them.
template <typename V>
void visit_vnt_backbone_fields(VNTNetOptions& o, V&& visit) {
  constexpr const char* silent = "our choice (the paper is silent)";
  visit(Field{"linear_dim", "C: vector channels of the edge-conv output and of every block"}.at_least(1).from(
            "the paper (classification)"),
        o.linear_dim);
  visit(Field{"heads", "VNAttention heads per block"}.at_least(1).from("the paper (classification)"), o.heads);
  visit(Field{"head_dim", "channels per head"}.at_least(1).from("the paper"), o.head_dim);
  visit(Field{"blocks", "basic blocks (multi-head VNAttention and VN-FFN, each with a residual)"}.at_least(1).from(
            "the paper"),
        o.blocks);
  visit(Field{"ffn_hidden", "VN-FFN hidden channels; 0 = 4 * linear_dim"}.at_least(0).from(silent), o.ffn_hidden);
  visit(Field{"k", "neighbours of the edge-conv kNN graph"}.at_least(1).from(
            "our choice (the paper is silent), as DGCNN and Vector Neurons"),
        o.k);
  visit(Field{"edge_cross", "add neighbour x centre to the edge features [neighbour - centre, centre]"}.from(silent),
        o.edge_cross);
  visit(Field{"normals", "normals as a second vector channel of the edge conv (reads inputs[\"normals\"])"}, o.normals);
  visit(point_features_field(), o.point_features);
  visit(Field{"layer_norm", "VNLayerNorm before attention and VN-FFN"}.from("the paper (none)"), o.layer_norm);
  visit(Field{"normalize_frame", "Gram-Schmidt-orthonormal frame in the invariant layer"}.from("as Vector Neurons"),
        o.normalize_frame);
  visit(global_pooling_field().from(silent), o.pooling);
}

template <typename V>
void visit_fields(VNTNetOptions& o, V&& visit) {
  visit(Field{"classes", "output classes (ModelNet40)"}.at_least(2), o.classes);
  visit_vnt_backbone_fields(o, visit);
  visit(
      Field{"head_hidden", "hidden widths of the classification head (BatchNorm, LeakyReLU, dropout)"}.at_least(1).from(
          "the paper (3 linear layers), widths as VN-DGCNN"),
      o.head_hidden);
  visit(Field{"dropout", "dropout in the classification head"}.range(0, 0.99).from("the paper"), o.dropout);
  visit(vnt_negative_slope_field(), o.negative_slope);
}

// What the backbone's options must satisfy together (UsageError naming `model`).
void check_vnt_backbone_options(const std::string& model, const VNTNetOptions& options);

// The backbone's size (edge conv, blocks, invariant layer) for one cloud of
// `points` points, and the classifier's (the backbone and its head).
// UsageError for points < 1.
ModelSize vnt_backbone_size(const VNTNetOptions& options, int64_t points);
// The same with attention_floats a block in place of the global attention's
// H N^2 weights (vnt-local's neighbourhood attention); points unchecked.
ModelSize vnt_backbone_size(const VNTNetOptions& options, int64_t points, int64_t attention_floats);
ModelSize vnt_net_size(const VNTNetOptions& options, int64_t points);

// What the classifier and the part segmenter share: the edge-conv input
// block, the basic blocks and the invariant layer, registered as edge_conv,
// blocks and invariant.
class VNTBackbone : public Model {
 public:
  explicit VNTBackbone(const VNTNetOptions& options);
  // Per-point rotation-invariant features before pooling, [B, F, N] with
  // F = point_feature_width() = 3 * 2 * blocks * C. attention, when given,
  // receives each block's [B, H, N, N] attention weights.
  at::Tensor point_features(const data::Batch& batch, std::vector<at::Tensor>* attention = nullptr);
  int64_t point_feature_width() const { return 3 * 2 * options_.blocks * options_.linear_dim; }
  const VNTNetOptions& options() const { return options_; }
  // Each block's [B, H, N, N] weights.
  AttentionMaps attention_maps(const data::Batch& batch) override;

 protected:
  VNTNetOptions options_;

 private:
  vn::VNEdgeConv edge_conv_{nullptr};
  std::vector<vn::VNTBlock> blocks_;
  vn::VNStdFeature invariant_{nullptr};
};

class VNTNet : public VNTBackbone {
 public:
  explicit VNTNet(const VNTNetOptions& options);
  // inputs "points" [B, 3, N] (and "normals" [B, 3, N] for +N) -> logits [B, classes]
  at::Tensor forward(const data::Batch& batch) override;
  // The pooled invariant features the head reads, [B, point_feature_width()]
  // (twice that with max+mean pooling).
  at::Tensor features(const data::Batch& batch) override;

 private:
  ClassificationHead head_{nullptr};
};

// The cloud as VN input: points [B, 3, N] -> [B, 1, 3, N], with normals
// [B, 2, 3, N], and with `features` > 0 per-point features "features"
// [B, F, N] as F more channels f x: each invariant scalar times its point, a
// vector that rotates with the points, so that the network stays exactly
// invariant while the features reach its first layer (our choice; early
// fusion as VN-Transformer's in spirit, without a fourth coordinate the fused
// kernels do not have). Throws UsageError on bad shapes, DataError on NaN/Inf.
at::Tensor vn_input(const data::Batch& batch, bool with_normals, int64_t features = 0);

// The vector channels vn_input gives.
inline int64_t vn_input_channels(bool with_normals, int64_t features) { return (with_normals ? 2 : 1) + features; }

}  // namespace qkv::models
