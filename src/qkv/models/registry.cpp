#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/mlp.h"
#include "qkv/models/model.h"
#include "qkv/models/transformer_lm.h"

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
