#include "qkv/models/presets.h"

#include <algorithm>

#include "qkv/core/errors.h"
#include "qkv/core/json_file.h"
#include "qkv/core/text.h"

namespace qkv::models {

const std::vector<ModelPreset>& model_presets() {
  // VNT-Net's Table 4 gives VNT+N 1.37M parameters; the text fixes C = 16, 24
  // heads of 16 and 3 blocks but not the VN-FFN's hidden width. qkv's default
  // (4 C = 64) gives 542,560 (vnt); a round hidden width of 512 gives
  // 1,359,776 for vnt+n, 0.75 % below (515 would land within 0.1 %, a width
  // nobody picks). Only the count is the paper's: the width is our reading,
  // and every other option stays vnt's default, several of them our choices.
  static const std::vector<ModelPreset> table = {
      {"vnt-1.37m",
       {"vnt", "vnt+n"},
       {{"ffn_hidden", 512}},
       "VNT-Net near Table 4's 1.37M parameters (VNT+N): VN-FFN hidden width 512 (our reading; the paper gives "
       "none), other options as vnt's defaults"},
  };
  return table;
}

std::vector<const ModelPreset*> presets_for(const std::string& model) {
  std::vector<const ModelPreset*> out;
  for (const auto& p : model_presets())
    if (std::find(p.models.begin(), p.models.end(), model) != p.models.end()) out.push_back(&p);
  return out;
}

const ModelPreset* find_preset(const std::string& model, const std::string& name) {
  for (const auto* p : presets_for(model))
    if (p->name == name) return p;
  return nullptr;
}

nlohmann::json parse_model_options(const std::string& text, const std::string& model) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (!model.empty() && first != std::string::npos && text[first] != '{') {
    if (const auto* preset = find_preset(model, text)) return preset->options;
    std::vector<std::string> known;
    for (const auto* p : presets_for(model)) known.push_back(p->name);
    throw ConfigError("model_options", shortened(text) + ": neither a JSON object nor a preset of " + model +
                                           (known.empty() ? " (it has none)" : " (" + join(known) + ")"));
  }
  if (const int64_t depth = json_nesting_depth(text); depth > kMaxJsonDepth)
    throw ConfigError("model_options", ": JSON nested " + std::to_string(depth) + " levels deep; at most " +
                                           std::to_string(kMaxJsonDepth));
  nlohmann::json options;
  try {
    options = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw ConfigError("model_options", ": not valid JSON: " + shortened(text));
  }
  if (!options.is_object()) throw ConfigError("model_options", ": expected a JSON object");
  return options;
}

}  // namespace qkv::models
