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
  int64_t linear_dim = 16;  // C: edge-conv output and block width (paper: 16)
  int64_t heads = 24;       // paper: 24
  int64_t head_dim = 16;    // paper: 16
  int64_t blocks = 3;       // paper: 3
  int64_t ffn_hidden = 0;   // VN-FFN hidden channels; 0 = 4 * linear_dim (the paper is silent)
  int64_t k = 20;           // neighbours of the edge-conv graph (as in DGCNN / Vector Neurons)
  bool edge_cross = false;  // add nbr x ctr to the edge features
  bool normals = false;     // "+N": normals as a second vector channel (input "normals")
  int64_t point_features = 0;  // F per-point features (input "features"), as F more vector channels (vn_input)
  bool layer_norm = false;  // VNLayerNorm before attention and FFN (not in the paper)
  bool normalize_frame = false;  // orthonormal frame in the invariant layer
  std::string pooling = "max+mean";
  std::vector<int64_t> head_hidden = {512, 256};
  double dropout = 0.5;
  double negative_slope = 0.2;

  static VNTNetOptions from_json(const nlohmann::json& j, const std::string& name = "vnt");
  static OptionHelpList option_help();  // a line per to_json() key
  nlohmann::json to_json() const;
  int64_t hidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * linear_dim; }
};

// Reads the options of the VNT-Net backbone (all but classes, head_hidden and
// dropout) and checks them; shared by the classifier and the segmenter. Call
// it last: it finishes the reader (unknown keys are errors).
void read_vnt_backbone_options(OptionReader& reader, VNTNetOptions& options);

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

// The option "point_features" (vn_input's F) of every VN classifier that reads
// features: read (0 .. 2^16), and its help line.
void read_point_features_option(OptionReader& r, int64_t& point_features);
OptionHelp point_features_option_help();

}  // namespace qkv::models
