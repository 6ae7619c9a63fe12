#pragma once
// VN-DGCNN, the classifier of Vector Neurons (Deng et al. 2021), with the
// original's layer sizes: four VN edge convolutions on dynamic kNN graphs
// (21, 21, 42, 85 channels: 64/3 ... 256/3), a shared-direction VN layer to
// 341 channels (1024/3), the invariant layer on [x, mean x], max+mean
// pooling and a 512-256 head. 2,899,830 parameters with 40 classes and mean
// pooling of the edge convolutions, the original's default.
#include <string>

#include "qkv/models/cloud_head.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"
#include "qkv/vn/vn_layers.h"

namespace qkv::models {

struct VNDGCNNOptions {
  int64_t classes = 40;
  int64_t k = 20;
  std::string pooling = "mean";  // over neighbours: mean | max (VNMaxPool, adds parameters)
  double dropout = 0.5;
  int64_t point_features = 0;  // F (input "features"), as F more vector channels (vn_input)

  static VNDGCNNOptions from_json(const nlohmann::json& j) { return read_model_options<VNDGCNNOptions>("vn-dgcnn", j); }
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

// The options of the dynamic graphs, which the classifier and the segmenter share.
template <typename V>
void visit_vn_dgcnn_graph_fields(int64_t& k, std::string& pooling, V&& visit) {
  visit(Field{"k", "neighbours of each dynamic kNN graph"}.at_least(1).from("as DGCNN and Vector Neurons"), k);
  visit(Field{"pooling", "pooling over each point's neighbours: mean, or max (VNMaxPool, adds parameters)"}
            .one_of("mean|max")
            .from("the reference code"),
        pooling);
}

template <typename V>
void visit_fields(VNDGCNNOptions& o, V&& visit) {
  visit(Field{"classes", "output classes (ModelNet40)"}.at_least(2), o.classes);
  visit_vn_dgcnn_graph_fields(o.k, o.pooling, visit);
  visit(Field{"dropout", "dropout in the 512-256 classification head"}.range(0, 0.99), o.dropout);
  visit(point_features_field(), o.point_features);
}

// VN-DGCNN's size for one cloud of `points` points (its widths are fixed; the
// options change k, the pooling's parameters and the classes). UsageError for
// points < 1.
ModelSize vn_dgcnn_size(const VNDGCNNOptions& options, int64_t points);

class VNDGCNN : public Model {
 public:
  explicit VNDGCNN(const VNDGCNNOptions& options);
  // inputs "points" [B, 3, N] -> logits [B, classes]
  at::Tensor forward(const data::Batch& batch) override;
  // The pooled invariant features the head reads, [B, 2 * 682 * 3] (max and mean).
  at::Tensor features(const data::Batch& batch) override;

 private:
  at::Tensor pool(size_t i, const at::Tensor& x);

  VNDGCNNOptions options_;
  std::vector<vn::VNLinearLeakyReLU> convs_;  // conv1..conv4
  std::vector<vn::VNMaxPool> max_pools_;      // with pooling = "max"
  vn::VNLinearLeakyReLU conv5_{nullptr};
  vn::VNStdFeature invariant_{nullptr};
  ClassificationHead head_{nullptr};
};

}  // namespace qkv::models
