#pragma once
// vnt-local: VNT-Net whose VNAttention is local (our design, not the paper's).
// Each point attends to its `neighbours` nearest points on xyz (the kNN graph
// of vn::knn_indices, rotation invariant since it depends only on distances)
// instead of to every point, so memory and time grow as N k C instead of N^2:
// scans of 100,000 points fit. Everything else is VNT-Net's: the edge-conv
// input block, the VN-FFN, the residuals, the invariant layer, the pooling and
// the head, with the same parameter names and counts, so a vnt checkpoint
// loads into vnt-local. With neighbours = N it computes what vnt computes
// (tests/vn/vnt_local_test.cpp).
#include <string>
#include <vector>

#include "qkv/models/cloud_head.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"
#include "qkv/models/vnt_net.h"
#include "qkv/vn/local_attention.h"
#include "qkv/vn/vn_layers.h"

namespace qkv::models {

struct VNTLocalOptions {
  VNTNetOptions net;        // every VNT-Net option, with its default ("normals" false)
  int64_t neighbours = 16;  // k of the local attention

  static VNTLocalOptions from_json(const nlohmann::json& j, const std::string& name = "vnt-local");
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

// VNT-Net's options, with "neighbours" after its "k".
template <typename V>
void visit_fields(VNTLocalOptions& o, V&& visit) {
  visit_fields(o.net, [&](const Field& f, auto& member) {
    visit(f, member);
    if (std::string(f.key) == "k")
      visit(Field{"neighbours",
                  "k of the local VNAttention: each point attends to its k nearest points on xyz (one kNN graph "
                  "with the edge conv's)"}
                .at_least(1)
                .from("our choice (vnt-local is not in the paper)"),
            o.neighbours);
  });
}

// Parameters as vnt's with the same options; activations as vnt's backbone
// and head with the N^2 attention weights replaced by the local attention's.
// UsageError for points < 1.
ModelSize vnt_local_size(const VNTLocalOptions& options, int64_t points);

class VNTLocalNet : public Model {
 public:
  explicit VNTLocalNet(const VNTLocalOptions& options);
  // inputs "points" [B, 3, N] (and "normals" with {"normals": true}) -> logits [B, classes].
  // N must be at least max(k, neighbours) (DataError otherwise, from the kNN).
  at::Tensor forward(const data::Batch& batch) override;
  at::Tensor features(const data::Batch& batch) override;
  // Per-point invariant features [B, 3 * 2 * blocks * C, N]. attention, when
  // given, receives each block's [B, H, N, neighbours] weights; graph, when
  // given, the [B, N, neighbours] indices their columns refer to.
  at::Tensor point_features(const data::Batch& batch, std::vector<at::Tensor>* attention = nullptr,
                            at::Tensor* graph = nullptr);
  const VNTLocalOptions& options() const { return options_; }
  // Each block's [B, H, N, neighbours] weights, keys the [B, N, neighbours] points they weigh.
  AttentionMaps attention_maps(const data::Batch& batch) override;

 private:
  VNTLocalOptions options_;
  vn::VNEdgeConv edge_conv_{nullptr};
  std::vector<vn::VNLocalTBlock> blocks_;
  vn::VNStdFeature invariant_{nullptr};
  ClassificationHead head_{nullptr};
};

}  // namespace qkv::models
