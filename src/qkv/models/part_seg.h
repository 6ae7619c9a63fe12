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
#include "qkv/models/vn_dgcnn.h"
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

  PartSegmentationHead make(int64_t point_features, int64_t global_features) const;
  // The size of make(point_features, global_features) on one cloud of `points` points.
  ModelSize size(int64_t point_features, int64_t global_features, int64_t points) const;
};

template <typename V>
void visit_fields(PartHeadOptions& o, V&& visit) {
  visit(Field{"categories", "object categories, one-hot into the category code (ShapeNet-part: 16)"}.at_least(1),
        o.categories);
  visit(Field{"parts", "part classes over all categories (ShapeNet-part: 50)"}.at_least(2), o.parts);
  visit(Field{"category_dim", "width of the category code (Linear, BatchNorm, LeakyReLU)"}.at_least(1), o.category_dim);
  visit(Field{"seg_hidden", "hidden widths of the per-point segmentation layers"}.at_least(1), o.seg_hidden);
  visit(Field{"dropout", "dropout after each hidden segmentation layer but the last"}.range(0, 0.99), o.dropout);
  visit(Field{"seg_negative_slope", "LeakyReLU slope of the segmentation head (0: ReLU)"}.range(0, 1),
        o.seg_negative_slope);
}

struct VNTSegOptions {
  VNTNetOptions backbone;  // its classes, head_hidden and dropout are not used
  PartHeadOptions head;
  VNTSegOptions();  // the paper's segmentation settings
  static VNTSegOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(VNTSegOptions& o, V&& visit) {
  auto sourced = with_sources(visit, {{"linear_dim", "the paper (segmentation)"},
                                      {"heads", "the paper (segmentation)"},
                                      {"k",
                                       "our choice (the paper is silent), as vnt's (Vector Neurons' part "
                                       "segmentation takes 40)"},
                                      {"pooling", "our choice (the paper is silent)"},
                                      {"category_dim",
                                       "as Vector Neurons' part segmentation (the paper: a linear "
                                       "layer, no width)"},
                                      {"seg_hidden",
                                       "widths as Vector Neurons' part segmentation (the paper: 4 "
                                       "linear layers, no widths)"},
                                      {"dropout", "the paper (no dropout in its head)"},
                                      {"seg_negative_slope", "the paper (ReLU)"}});
  visit_vnt_backbone_fields(o.backbone, sourced);
  sourced(vnt_negative_slope_field(), o.backbone.negative_slope);
  visit_fields(o.head, sourced);
}

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
  static VNDGCNNSegOptions from_json(const nlohmann::json& j) {
    return read_model_options<VNDGCNNSegOptions>("vn-dgcnn-seg", j);
  }
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(VNDGCNNSegOptions& o, V&& visit) {
  auto sourced = with_sources(visit, {{"k", "as DGCNN's part segmentation"},
                                      {"dropout", "the reference code"},
                                      {"seg_negative_slope", "the reference code"}});
  visit_vn_dgcnn_graph_fields(o.k, o.pooling, sourced);
  visit_fields(o.head, sourced);
}

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
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(XYZTransformerSegOptions& o, V&& visit) {
  auto sourced = with_sources(visit, {{"pooling", "the same as vnt-seg"}});
  visit_xyz_backbone_fields(o.backbone, sourced);
  visit_fields(o.head, sourced);
}

ModelSize xyz_transformer_seg_size(const XYZTransformerSegOptions& options, int64_t points);

class XYZTransformerSeg : public XYZTransformerBackbone {
 public:
  explicit XYZTransformerSeg(const XYZTransformerSegOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  PartSegmentationHead head_{nullptr};
};

}  // namespace qkv::models
