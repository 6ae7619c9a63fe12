#pragma once
// The non-invariant baseline: a standard transformer encoder on raw xyz
// (per-point MLP embedding, pre-LayerNorm blocks of the attention core's
// multi-head attention and an MLP, max+mean pooling, the shared head). It
// learns whatever pose the training data shows, so it collapses when the test
// clouds are rotated in ways training never showed (z/SO(3)).
#include <string>
#include <vector>

#include "qkv/models/cloud_head.h"
#include "qkv/models/live_layers.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"
#include "qkv/models/transformer_lm.h"

namespace qkv::models {

struct XYZTransformerOptions {
  int64_t classes = 40;
  int64_t d_model = 96;
  int64_t layers = 3;
  int64_t heads = 4;
  int64_t embed_hidden = 64;
  int64_t mlp_hidden = 0;  // 0 = 4 * d_model
  std::string pooling = "max+mean";
  std::vector<int64_t> head_hidden = {512, 256};
  double dropout = 0.5;  // in the head; the encoder has none

  static XYZTransformerOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

// The encoder's options (all but the head's: classes, head_hidden and dropout).
template <typename V>
void visit_xyz_backbone_fields(XYZTransformerOptions& o, V&& visit) {
  visit(Field{"d_model", "encoder width"}.at_least(1), o.d_model);
  visit(Field{"layers", "pre-LayerNorm encoder blocks"}.at_least(1), o.layers);
  visit(Field{"heads", "attention heads per block (must divide d_model)"}.at_least(1), o.heads);
  visit(Field{"embed_hidden", "hidden width of the per-point xyz embedding MLP"}.at_least(1), o.embed_hidden);
  visit(Field{"mlp_hidden", "hidden units of each block's MLP; 0 = 4 * d_model"}.at_least(0), o.mlp_hidden);
  visit(global_pooling_field().from("the same as vnt"), o.pooling);
}

template <typename V>
void visit_fields(XYZTransformerOptions& o, V&& visit) {
  visit(Field{"classes", "output classes (ModelNet40)"}.at_least(2), o.classes);
  visit_xyz_backbone_fields(o, visit);
  visit(Field{"head_hidden", "hidden widths of the classification head"}.at_least(1).from("the same as vnt"),
        o.head_hidden);
  visit(Field{"dropout", "dropout in the classification head (the encoder has none)"}.range(0, 0.99).from(
            "the same as vnt"),
        o.dropout);
}

// What the encoder's options must satisfy together (UsageError naming `model`).
void check_xyz_backbone_options(const std::string& model, const XYZTransformerOptions& options);

// The encoder's size (embed_in, embed_out, blocks, ln_final) for one cloud of
// `points` points, and the classifier's (the encoder and its head).
// UsageError for points < 1.
ModelSize xyz_transformer_backbone_size(const XYZTransformerOptions& options, int64_t points);
ModelSize xyz_transformer_size(const XYZTransformerOptions& options, int64_t points);

// The encoder the classifier and the part segmenter share (embed_in,
// embed_out, blocks, ln_final).
class XYZTransformerBackbone : public Model {
 public:
  explicit XYZTransformerBackbone(const XYZTransformerOptions& options);
  // inputs "points" [B, 3, N] -> per-point features [B, d_model, N]
  at::Tensor point_features(const data::Batch& batch);

 protected:
  XYZTransformerOptions options_;

 private:
  LiveLinear embed_in_{nullptr}, embed_out_{nullptr};
  std::vector<TransformerBlock> blocks_;
  LiveLayerNorm ln_final_{nullptr};
};

class XYZTransformer : public XYZTransformerBackbone {
 public:
  explicit XYZTransformer(const XYZTransformerOptions& options);
  // inputs "points" [B, 3, N] -> logits [B, classes]
  at::Tensor forward(const data::Batch& batch) override;

 private:
  ClassificationHead head_{nullptr};
};

}  // namespace qkv::models
