#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/mhca.h"
#include "qkv/models/mlp.h"
#include "qkv/models/model.h"
#include "qkv/models/part_seg.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/models/vn_dgcnn.h"
#include "qkv/models/vnt_net.h"
#include "qkv/models/xyz_transformer.h"

namespace qkv::models {
namespace {

// One line per model: the registry is explicit so that a static library
// cannot drop an entry at link time.
template <typename Net, typename Options>
ModelEntry entry(std::string name, std::string description) {
  return {std::move(name), std::move(description),
          [](const nlohmann::json& j) -> ModelPtr { return std::make_shared<Net>(Options::from_json(j)); },
          [](const nlohmann::json& j) { return Options::from_json(j).to_json(); }};
}

}  // namespace

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> registry = {
      entry<MLP, MLPOptions>("mlp", "multilayer perceptron on flat features (spirals demo)"),
      entry<TransformerLM, TransformerLMOptions>("transformer-lm", "decoder-only byte-level transformer (qkv lm)"),
      {"vnt", "VNT-Net: rotation-invariant vector-neuron transformer on xyz (qkv vnt)",
       [](const nlohmann::json& j) -> ModelPtr { return std::make_shared<VNTNet>(VNTNetOptions::from_json(j, "vnt")); },
       [](const nlohmann::json& j) { return VNTNetOptions::from_json(j, "vnt").to_json(); }},
      {"vnt+n", "VNT-Net+N: VNT-Net on xyz and normals (qkv vnt)",
       [](const nlohmann::json& j) -> ModelPtr { return std::make_shared<VNTNet>(VNTNetOptions::from_json(j, "vnt+n")); },
       [](const nlohmann::json& j) { return VNTNetOptions::from_json(j, "vnt+n").to_json(); }},
      entry<VNDGCNN, VNDGCNNOptions>("vn-dgcnn", "Vector Neurons' rotation-invariant DGCNN classifier (qkv vnt)"),
      entry<XYZTransformer, XYZTransformerOptions>("xyz-transformer",
                                                   "standard transformer on raw xyz, not rotation invariant (qkv vnt)"),
      entry<VNTNetSeg, VNTSegOptions>("vnt-seg", "VNT-Net part segmentation, rotation invariant per point (qkv seg)"),
      entry<VNDGCNNSeg, VNDGCNNSegOptions>("vn-dgcnn-seg", "Vector Neurons' part-segmentation DGCNN (qkv seg)"),
      entry<XYZTransformerSeg, XYZTransformerSegOptions>(
          "xyz-transformer-seg", "transformer on raw xyz for part segmentation, not rotation invariant (qkv seg)"),
      entry<MHCANet, MHCAOptions>("mhca", "multi-head co-attention between SPECT and DNA methylation (qkv mhca)"),
      entry<ConcatNet, ConcatNetOptions>("concatnet", "SPECT and DNA-methylation features concatenated (qkv mhca)"),
      entry<SpectNet, SpectNetOptions>("spectnet", "SPECT encoder alone (qkv mhca)"),
  };
  return registry;
}

const ModelEntry& find_model(const std::string& name) {
  std::string known;
  for (const auto& e : model_registry()) {
    if (e.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.name;
  }
  throw UsageError("unknown model '" + name + "' (known: " + known + ")");
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace qkv::models
