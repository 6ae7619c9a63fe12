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
  static OptionHelpList option_help();  // a line per to_json() key
  nlohmann::json to_json() const;
};

// Reads the encoder's options (all but classes, head_hidden and dropout). Call
// it last: it finishes the reader (unknown keys are errors).
void read_xyz_backbone_options(OptionReader& reader, XYZTransformerOptions& options);

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
