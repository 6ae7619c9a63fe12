#pragma once
// Part segmentation (ShapeNet-part): per-point part logits from a point cloud
// and its object category. Three models share PartSegmentationHead:
//  - vnt-seg: VNT-Net's backbone (the paper's segmentation settings: C 128,
//    14 heads of 16), per-point invariant features, their global pooling and
//    the category code; rotation invariant per point.
//  - vn-dgcnn-seg: Vector Neurons' part-segmentation DGCNN with the original's
//    sizes (1,306,090 parameters): three VN edge-conv stages on dynamic
//    graphs, a shared-direction VN layer to 341 channels, the invariant layer,
//    the stage features in its frame per point, their max over the cloud.
//  - xyz-transformer-seg: the non-invariant baseline's encoder with the same
//    head.
// Inputs "points" [B, 3, N] (and "normals" for vnt-seg with normals),
// "category" [B] int64 -> logits [B, N, parts].
#include <string>
#include <vector>

#include "qkv/models/cloud_head.h"
#include "qkv/models/model.h"
#include "qkv/models/vnt_net.h"
#include "qkv/models/xyz_transformer.h"
#include "qkv/vn/vn_layers.h"

namespace qkv::models {

// What every segmenter's head takes.
struct PartHeadOptions {
  int64_t categories = 16;
  int64_t parts = 50;
  int64_t category_dim = 64;
  std::vector<int64_t> seg_hidden = {256, 256, 128};
  double dropout = 0.0;
  double seg_negative_slope = 0.2;

  void read(OptionReader& reader);
  void write(nlohmann::json& j) const;
  static OptionHelpList option_help();  // a line per key write() sets
  PartSegmentationHead make(int64_t point_features, int64_t global_features) const;
  // The size of make(point_features, global_features) on one cloud of `points` points.
  ModelSize size(int64_t point_features, int64_t global_features, int64_t points) const;
};

struct VNTSegOptions {
  VNTNetOptions backbone;  // its classes, head_hidden and dropout are not used
  PartHeadOptions head;
  VNTSegOptions();  // the paper's segmentation settings
  static VNTSegOptions from_json(const nlohmann::json& j);
  static OptionHelpList option_help();  // a line per to_json() key
  nlohmann::json to_json() const;
};

// The segmenters' sizes for one cloud of `points` points: the backbone and
// the head. UsageError for points < 1.
ModelSize vnt_seg_size(const VNTSegOptions& options, int64_t points);

class VNTNetSeg : public VNTBackbone {
 public:
  explicit VNTNetSeg(const VNTSegOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  PartSegmentationHead head_{nullptr};
};

struct VNDGCNNSegOptions {
  int64_t k = 40;                // DGCNN's part-segmentation graphs use 40 neighbours
  std::string pooling = "mean";  // over neighbours: mean | max (VNMaxPool, adds parameters)
  PartHeadOptions head;
  VNDGCNNSegOptions();  // the original's head: dropout 0.5, LeakyReLU 0.2
  static VNDGCNNSegOptions from_json(const nlohmann::json& j);
  static OptionHelpList option_help();  // a line per to_json() key
  nlohmann::json to_json() const;
};

ModelSize vn_dgcnn_seg_size(const VNDGCNNSegOptions& options, int64_t points);

class VNDGCNNSeg : public Model {
 public:
  explicit VNDGCNNSeg(const VNDGCNNSegOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  at::Tensor pool(size_t i, const at::Tensor& x);

  VNDGCNNSegOptions options_;
  std::vector<vn::VNLinearLeakyReLU> convs_;  // conv1..conv5
  std::vector<vn::VNMaxPool> max_pools_;      // with pooling = "max"
  vn::VNLinearLeakyReLU conv6_{nullptr};
  vn::VNStdFeature invariant_{nullptr};
  PartSegmentationHead head_{nullptr};
};

struct XYZTransformerSegOptions {
  XYZTransformerOptions backbone;  // its classes, head_hidden and dropout are not used
  PartHeadOptions head;
  XYZTransformerSegOptions();
  static XYZTransformerSegOptions from_json(const nlohmann::json& j);
  static OptionHelpList option_help();  // a line per to_json() key
  nlohmann::json to_json() const;
};

ModelSize xyz_transformer_seg_size(const XYZTransformerSegOptions& options, int64_t points);

class XYZTransformerSeg : public XYZTransformerBackbone {
 public:
  explicit XYZTransformerSeg(const XYZTransformerSegOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  PartSegmentationHead head_{nullptr};
};

}  // namespace qkv::models
