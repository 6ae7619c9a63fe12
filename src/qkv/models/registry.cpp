#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/learners/xgboost.h"
#include "qkv/models/mhca.h"
#include "qkv/models/mhca_x.h"
#include "qkv/models/mlp.h"
#include "qkv/models/model.h"
#include "qkv/models/part_seg.h"
#include "qkv/models/recurrent_lm.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/models/vn_dgcnn.h"
#include "qkv/models/vnt_local.h"
#include "qkv/models/vnt_net.h"
#include "qkv/models/xyz_transformer.h"
#include "qkv/runtime/runtime.h"

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
                 std::function<nlohmann::json(const nlohmann::json&)> resolve, const OptionHelpList& help,
                 std::function<ModelSize(const nlohmann::json&, int64_t)> size) {
  auto options = describe_options(resolve(nlohmann::json::object()), help);
  return {std::move(name),    std::move(description), std::move(task),    std::move(inputs),
          std::move(options), std::move(make),        std::move(resolve), std::move(size)};
}

// The usual entry: Options::from_json(j) builds a Net; size(Options, points)
// is its size (the model family's size function).
template <typename Net, typename Options>
ModelEntry entry(std::string name, std::string description, std::string task, std::vector<std::string> inputs,
                 std::function<ModelSize(const Options&, int64_t points)> size) {
  return entry(
      std::move(name), std::move(description), std::move(task), std::move(inputs),
      [](const nlohmann::json& j) -> ModelPtr { return std::make_shared<Net>(Options::from_json(j)); },
      [](const nlohmann::json& j) { return Options::from_json(j).to_json(); }, model_option_help<Options>(),
      [size](const nlohmann::json& j, int64_t points) { return size(Options::from_json(j), points); });
}

// A size function of a model that has no points: it ignores the count.
template <typename Options>
std::function<ModelSize(const Options&, int64_t)> without_points(ModelSize (*size)(const Options&)) {
  return [size](const Options& o, int64_t /*points*/) { return size(o); };
}

// VNT-Net under the name that sets the default of "normals".
ModelEntry vnt_entry(const std::string& name, std::string description, std::vector<std::string> inputs) {
  return entry(
      name, std::move(description), "classification", std::move(inputs),
      [name](const nlohmann::json& j) -> ModelPtr {
        return std::make_shared<VNTNet>(VNTNetOptions::from_json(j, name));
      },
      [name](const nlohmann::json& j) { return VNTNetOptions::from_json(j, name).to_json(); },
      model_option_help<VNTNetOptions>(),
      [name](const nlohmann::json& j, int64_t points) {
        return vnt_net_size(VNTNetOptions::from_json(j, name), points);
      });
}

// mhca-x under a name that sets the defaults of its ablation options.
ModelEntry mhca_x_entry(const std::string& name, std::string description) {
  return entry(
      name, std::move(description), "mhca", {"spect", "methylation"},
      [name](const nlohmann::json& j) -> ModelPtr {
        return std::make_shared<MHCAXNet>(MHCAXOptions::from_json(j, name));
      },
      [name](const nlohmann::json& j) { return MHCAXOptions::from_json(j, name).to_json(); },
      model_option_help<MHCAXOptions>(),
      [name](const nlohmann::json& j, int64_t /*points*/) { return mhca_x_size(MHCAXOptions::from_json(j, name)); });
}

// The recurrent LM under the name that sets the default of "cell".
ModelEntry recurrent_lm_entry(const std::string& name, std::string description) {
  return entry(
      name, std::move(description), "lm", {"tokens"},
      [name](const nlohmann::json& j) -> ModelPtr {
        return std::make_shared<RecurrentLM>(RecurrentLMOptions::from_json(j, name));
      },
      [name](const nlohmann::json& j) { return RecurrentLMOptions::from_json(j, name).to_json(); },
      model_option_help<RecurrentLMOptions>(),
      [name](const nlohmann::json& j, int64_t points) {
        return recurrent_lm_size(RecurrentLMOptions::from_json(j, name), points);
      });
}

// The MHCA paper's methylation baseline, gradient-boosted trees: in the
// registry for what the registry tells (task, inputs, options), trained by
// the mhca task's own code. Its options are config.json's keys; the command
// line sets them as --xgb-* (learners/xgboost.h).
ModelEntry xgboost_entry() {
  auto resolve = [](const nlohmann::json& j) {
    try {
      const auto params = medical::XGBoostParams::from_json(j);
      params.validate();
      return params.to_json();
    } catch (const DataError& e) {  // the options come from the caller here, not from a file
      throw UsageError(first_line(e.what()));
    }
  };
  const OptionHelpList help = {{"learning_rate", "shrinkage of each tree's contribution (eta)", "the paper"},
                               {"n_estimators", "boosting rounds", "the paper"},
                               {"max_depth", "tree depth", "the paper"},
                               {"min_child_weight", "least hessian weight in a leaf", "the paper"},
                               {"gamma", "least loss reduction a split must make", "the paper"},
                               {"subsample", "share of the rows each tree sees", "the paper"},
                               {"colsample_bytree", "share of the columns each tree sees", "the paper"},
                               {"scale_pos_weight", "weight of the positive class", "the paper"},
                               {"tree_method", "exact, approx or hist", "our choice"},
                               {"max_bin", "histogram bins (hist and approx)", ""},
                               {"threads", "XGBoost's threads; 0 = one per core", "our choice"},
                               {"seed", "XGBoost's seed", ""}};
  ModelEntry e{"xgboost",
               "gradient-boosted trees on the CpG features (XGBoost; the paper's baseline, not a network)",
               "mhca",
               {"methylation"},
               describe_options(resolve(nlohmann::json::object()), help),
               [](const nlohmann::json&) -> ModelPtr {
                 throw UsageError(
                     "xgboost is gradient-boosted trees, not a network: 'qkv mhca train --model xgboost' "
                     "and 'qkv mhca cv' train it");
               },
               resolve,
               [resolve](const nlohmann::json& j, int64_t) {
                 resolve(j);
                 return ModelSize{};
               }};
  e.network = false;
  return e;
}

}  // namespace

bool ModelEntry::reads(const std::string& input) const {
  return std::find(inputs.begin(), inputs.end(), input) != inputs.end();
}

std::vector<std::string> ModelEntry::inputs_with(const nlohmann::json& options) const {
  const auto resolved = resolve(options);
  const bool has_normals_option = resolved.contains("normals") && resolved.at("normals").is_boolean();
  const bool normals = has_normals_option && resolved.at("normals").get<bool>();
  const bool features = resolved.contains("point_features") && resolved.at("point_features").is_number_integer() &&
                        resolved.at("point_features").get<int64_t>() > 0;
  if (!has_normals_option && !features) return inputs;
  std::vector<std::string> out;
  for (const auto& name : inputs) {
    if (name == "normals" && has_normals_option) continue;
    out.push_back(name);
    if (name == "points" && normals) out.push_back("normals");
    if (name == "points" && features) out.push_back("features");
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
      entry<MLP, MLPOptions>("mlp", "multilayer perceptron on flat features", "spirals", {"x"},
                             without_points(&mlp_size)),
      entry<TransformerLM, TransformerLMOptions>("transformer-lm", "decoder-only byte-level transformer", "lm",
                                                 {"tokens"}, &transformer_lm_size),
      recurrent_lm_entry("lstm-lm", "byte-level LSTM: the fixed-memory baseline of transformer-lm"),
      recurrent_lm_entry("gru-lm", "byte-level GRU: the fixed-memory baseline of transformer-lm"),
      vnt_entry("vnt", "VNT-Net: rotation-invariant vector-neuron transformer on xyz", {"points"}),
      vnt_entry("vnt+n", "VNT-Net+N: VNT-Net on xyz and normals", {"points", "normals"}),
      entry<VNTLocalNet, VNTLocalOptions>(
          "vnt-local", "VNT-Net with each point attending to its k nearest points only: linear in N (our design)",
          "classification", {"points"}, &vnt_local_size),
      entry<VNDGCNN, VNDGCNNOptions>("vn-dgcnn", "Vector Neurons' rotation-invariant DGCNN classifier",
                                     "classification", {"points"}, &vn_dgcnn_size),
      entry<XYZTransformer, XYZTransformerOptions>("xyz-transformer",
                                                   "standard transformer on raw xyz, not rotation invariant",
                                                   "classification", {"points"}, &xyz_transformer_size),
      entry<VNTNetSeg, VNTSegOptions>("vnt-seg", "VNT-Net part segmentation, rotation invariant per point",
                                      "segmentation", {"points", "category"}, &vnt_seg_size),
      entry<VNDGCNNSeg, VNDGCNNSegOptions>("vn-dgcnn-seg", "Vector Neurons' part-segmentation DGCNN", "segmentation",
                                           {"points", "category"}, &vn_dgcnn_seg_size),
      entry<XYZTransformerSeg, XYZTransformerSegOptions>(
          "xyz-transformer-seg", "transformer on raw xyz for part segmentation, not rotation invariant", "segmentation",
          {"points", "category"}, &xyz_transformer_seg_size),
      entry<MHCANet, MHCAOptions>("mhca", "multi-head co-attention between SPECT and DNA methylation", "mhca",
                                  {"spect", "methylation"}, without_points(&mhca_size)),
      entry<ConcatNet, ConcatNetOptions>("concatnet", "SPECT and DNA-methylation features concatenated", "mhca",
                                         {"spect", "methylation"}, without_points(&concatnet_size)),
      entry<SpectNet, SpectNetOptions>("spectnet", "SPECT encoder alone", "mhca", {"spect"},
                                       without_points(&spectnet_size)),
      mhca_x_entry("mhca-x",
                   "co-attention as the only path from a CpG site to the volume (no bypass, cosine scores, "
                   "token positions; our design)"),
      mhca_x_entry("mhca-x-uniform", "mhca-x with its attention frozen to uniform (ablation)"),
      mhca_x_entry("mhca-x-no-values", "mhca-x with the attended values zeroed (ablation)"),
      xgboost_entry(),
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

void ModelEntry::check_parameter_limit(const nlohmann::json& options, const ModelLimits& limits) const {
  check_parameter_count(name, size(options, 1), limits);
}

ModelPtr ModelEntry::make(const nlohmann::json& options, const ModelLimits& limits) const {
  // Every build is sized first: options asking for billions of parameters
  // fail in microseconds instead of growing until the kernel kills qkv.
  check_parameter_limit(options, limits);
  return build(options);
}

namespace {

// "1,234,567": counts that people read at a glance.
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}
}  // namespace

void check_parameter_count(const std::string& model, const ModelSize& size, const ModelLimits& limits) {
  const int64_t limit = limits.max_parameters;
  if (size.parameters <= limit) return;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::string count = size.parameters == kMax
                                ? "more than 9.2e18 parameters"
                                : grouped(size.parameters) + " parameters (" +
                                      (size.parameters > kMax / 4 ? "over 8 EiB" : binary_size(size.parameters * 4)) +
                                      " of float32)";
  throw UsageError(model + ": these options make a model of " + count + ", more than {max_params} " +
                   std::to_string(limit) + "; make the model smaller, or raise {max_params} if it is meant");
}

void check_activation_memory(const ModelEntry& entry, const nlohmann::json& options, int64_t points, int64_t batch_size,
                             const ModelLimits& limits) {
  const ModelSize size = entry.size(options, points);
  check_parameter_count(entry.name, size, limits);  // the parameters first: their limit is the one a user sets
  const int64_t memory = physical_memory_bytes();
  const int64_t per_sample = size.activation_floats > memory / 4 ? memory : size.activation_floats * 4;
  const bool clouds = entry.task == "classification" || entry.task == "segmentation";
  const std::string sample = clouds               ? "one cloud of " + std::to_string(points) + " points"
                             : entry.task == "lm" ? "one window of " + std::to_string(points) + " tokens"
                                                  : std::string("one sample");
  if (size.activation_floats > memory / 4)
    throw UsageError(entry.name + ": " + sample +
                     " would need more memory for its activations than this machine has (" + binary_size(memory) +
                     "); use " +
                     (clouds               ? "fewer points or "
                      : entry.task == "lm" ? "a shorter {context} or "
                                           : "") +
                     "smaller model options (" + shortened(options.dump()) + ")");
  if (batch_size > 0 && per_sample > memory / batch_size)
    say("qkv: warning: " + entry.name + ": a batch of " + std::to_string(batch_size) +
        " may need more memory than this machine's " + binary_size(memory) + " (about " + binary_size(per_sample) +
        " a sample, an estimate that runs high); a smaller {batch_size} would fit");
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace qkv::models
