#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

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

// The options as `qkv params` lists them: the help table's order, each key's
// default from resolve({}). A key without help, or help without a key, shows
// as an empty help or a null default (the registry test rejects both).
std::vector<ModelOption> describe_options(const nlohmann::json& defaults, const OptionHelpList& help) {
  std::vector<ModelOption> out;
  for (const auto& h : help)
    out.push_back({h.key, defaults.contains(h.key) ? defaults.at(h.key) : nlohmann::json(), h.help, h.source});
  for (const auto& item : defaults.items()) {
    const auto described = std::any_of(help.begin(), help.end(), [&](const auto& h) { return h.key == item.key(); });
    if (!described) out.push_back({item.key(), item.value(), "", ""});
  }
  return out;
}

ModelEntry entry(std::string name, std::string description, std::string task, std::vector<std::string> inputs,
                 std::function<ModelPtr(const nlohmann::json&)> make,
                 std::function<nlohmann::json(const nlohmann::json&)> resolve, const OptionHelpList& help) {
  auto options = describe_options(resolve(nlohmann::json::object()), help);
  return {std::move(name), std::move(description), std::move(task), std::move(inputs), std::move(options),
          std::move(make), std::move(resolve)};
}

// The usual entry: Options::from_json(j) builds a Net.
template <typename Net, typename Options>
ModelEntry entry(std::string name, std::string description, std::string task, std::vector<std::string> inputs) {
  return entry(
      std::move(name), std::move(description), std::move(task), std::move(inputs),
      [](const nlohmann::json& j) -> ModelPtr { return std::make_shared<Net>(Options::from_json(j)); },
      [](const nlohmann::json& j) { return Options::from_json(j).to_json(); }, Options::option_help());
}

// VNT-Net under the name that sets the default of "normals".
ModelEntry vnt_entry(const std::string& name, std::string description, std::vector<std::string> inputs) {
  return entry(
      name, std::move(description), "classification", std::move(inputs),
      [name](const nlohmann::json& j) -> ModelPtr {
        return std::make_shared<VNTNet>(VNTNetOptions::from_json(j, name));
      },
      [name](const nlohmann::json& j) { return VNTNetOptions::from_json(j, name).to_json(); },
      VNTNetOptions::option_help());
}

}  // namespace

std::vector<std::string> ModelEntry::inputs_with(const nlohmann::json& options) const {
  const auto resolved = resolve(options);
  if (!resolved.contains("normals") || !resolved.at("normals").is_boolean()) return inputs;
  std::vector<std::string> out;
  for (const auto& name : inputs) {
    if (name == "normals") continue;
    out.push_back(name);
    if (name == "points" && resolved.at("normals").get<bool>()) out.push_back("normals");
  }
  return out;
}

const std::vector<ModelTask>& model_tasks() {
  static const std::vector<ModelTask> tasks = {
      {"classification", "point-cloud classification (qkv vnt)"},
      {"segmentation", "point-cloud part segmentation (qkv seg)"},
      {"lm", "byte-level language modelling (qkv lm)"},
      {"mhca", "Parkinson's disease from SPECT and DNA methylation (qkv mhca)"},
      {"spirals", "classification of flat feature vectors (qkv spirals)"},
  };
  return tasks;
}

const std::vector<ModelEntry>& model_registry() {
  // One entry per model: the registry is explicit so that a static library
  // cannot drop an entry at link time. Inputs are the Batch inputs forward()
  // reads with the default options.
  static const std::vector<ModelEntry> registry = {
      entry<MLP, MLPOptions>("mlp", "multilayer perceptron on flat features", "spirals", {"x"}),
      entry<TransformerLM, TransformerLMOptions>("transformer-lm", "decoder-only byte-level transformer", "lm",
                                                 {"tokens"}),
      vnt_entry("vnt", "VNT-Net: rotation-invariant vector-neuron transformer on xyz", {"points"}),
      vnt_entry("vnt+n", "VNT-Net+N: VNT-Net on xyz and normals", {"points", "normals"}),
      entry<VNDGCNN, VNDGCNNOptions>("vn-dgcnn", "Vector Neurons' rotation-invariant DGCNN classifier",
                                     "classification", {"points"}),
      entry<XYZTransformer, XYZTransformerOptions>(
          "xyz-transformer", "standard transformer on raw xyz, not rotation invariant", "classification", {"points"}),
      entry<VNTNetSeg, VNTSegOptions>("vnt-seg", "VNT-Net part segmentation, rotation invariant per point",
                                      "segmentation", {"points", "category"}),
      entry<VNDGCNNSeg, VNDGCNNSegOptions>("vn-dgcnn-seg", "Vector Neurons' part-segmentation DGCNN", "segmentation",
                                           {"points", "category"}),
      entry<XYZTransformerSeg, XYZTransformerSegOptions>(
          "xyz-transformer-seg", "transformer on raw xyz for part segmentation, not rotation invariant",
          "segmentation", {"points", "category"}),
      entry<MHCANet, MHCAOptions>("mhca", "multi-head co-attention between SPECT and DNA methylation", "mhca",
                                  {"spect", "methylation"}),
      entry<ConcatNet, ConcatNetOptions>("concatnet", "SPECT and DNA-methylation features concatenated", "mhca",
                                         {"spect", "methylation"}),
      entry<SpectNet, SpectNetOptions>("spectnet", "SPECT encoder alone", "mhca", {"spect"}),
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

std::vector<std::string> models_for_task(const std::string& task) {
  const auto& tasks = model_tasks();
  if (std::none_of(tasks.begin(), tasks.end(), [&](const ModelTask& t) { return t.name == task; }))
    throw std::invalid_argument("models_for_task: unknown task '" + task + "'");
  std::vector<std::string> names;
  for (const auto& e : model_registry())
    if (e.task == task) names.push_back(e.name);
  return names;
}

std::string model_help(const std::string& task) {
  const auto names = models_for_task(task);
  size_t width = 0;
  for (const auto& n : names) width = std::max(width, n.size());
  std::string help;
  for (const auto& n : names) {
    if (!help.empty()) help += "\n";
    help += n + std::string(width + 2 - n.size(), ' ') + find_model(n).description;
  }
  return help;
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace qkv::models
