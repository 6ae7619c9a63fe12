#include "qkv/models/xyz_transformer.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"
#include "qkv/models/vnt_net.h"

namespace qkv::models {
namespace {

// The options of the encoder's blocks (as the constructor sets them).
TransformerLMOptions block_options(const XYZTransformerOptions& o) {
  TransformerLMOptions block;
  block.d_model = o.d_model;
  block.heads = o.heads;
  block.mlp_hidden = o.mlp_hidden;
  return block;
}

}  // namespace

XYZTransformerOptions XYZTransformerOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<XYZTransformerOptions>("xyz-transformer", j);
  check_xyz_backbone_options("xyz-transformer", o);
  return o;
}

void check_xyz_backbone_options(const std::string& model, const XYZTransformerOptions& o) {
  if (o.d_model % o.heads != 0)
    throw UsageError(model + ": d_model " + std::to_string(o.d_model) + " is not divisible by heads " +
                     std::to_string(o.heads));
}

XYZTransformerBackbone::XYZTransformerBackbone(const XYZTransformerOptions& o) : options_(o) {
  embed_in_ = register_module("embed_in", LiveLinear(3, o.embed_hidden));
  embed_out_ = register_module("embed_out", LiveLinear(o.embed_hidden, o.d_model));
  const auto block = block_options(o);
  auto list = torch::nn::ModuleList();
  for (int64_t l = 0; l < o.layers; ++l) {
    blocks_.push_back(TransformerBlock(block, /*causal=*/false));
    list->push_back(blocks_.back());
  }
  register_module("blocks", list);
  ln_final_ = register_module("ln_final", LiveLayerNorm(torch::nn::LayerNormOptions({o.d_model})));
}

// Activations of N points: the points, the embedding's hidden units before
// and after the ReLU and its output, every block (transformer_block_size on N
// tokens: its attention weights grow as N^2), the final LayerNorm.
ModelSize xyz_transformer_backbone_size(const XYZTransformerOptions& o, int64_t points) {
  check_points("xyz-transformer", points);
  const auto block = transformer_block_size(block_options(o), points);
  ModelSize s;
  s.parameters = sat_add(linear_parameters(3, o.embed_hidden), linear_parameters(o.embed_hidden, o.d_model),
                         sat_mul(o.layers, block.parameters), norm_parameters(o.d_model));
  s.activation_floats = sat_add(sat_mul(points, sat_add(3, sat_mul(2, o.embed_hidden), sat_mul(2, o.d_model))),
                                sat_mul(o.layers, block.activation_floats));
  return s;
}

// The encoder, then the classification head on the pooled features.
ModelSize xyz_transformer_size(const XYZTransformerOptions& o, int64_t points) {
  auto s = xyz_transformer_backbone_size(o, points);
  accumulate(s, classification_head_size(pooled_width(o.d_model, o.pooling), o.head_hidden, o.classes, o.dropout));
  return s;
}

at::Tensor XYZTransformerBackbone::point_features(const data::Batch& batch) {
  const auto points = vn_input(batch, false).squeeze(1).transpose(1, 2);  // [B, N, 3]
  auto x = embed_out_->forward(torch::relu(embed_in_->forward(points)));
  for (auto& block : blocks_) x = block->forward(x, nullptr, 0);
  return ln_final_->forward(x).transpose(1, 2);  // [B, d, N]
}

XYZTransformer::XYZTransformer(const XYZTransformerOptions& o) : XYZTransformerBackbone(o) {
  head_ = register_module("head",
                          ClassificationHead(pooled_width(o.d_model, o.pooling), o.head_hidden, o.classes, o.dropout));
}

at::Tensor XYZTransformer::forward(const data::Batch& batch) {
  return head_->forward(global_pool(point_features(batch), options_.pooling));
}

}  // namespace qkv::models
