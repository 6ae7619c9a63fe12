#pragma once
// Named sets of model options ("presets") for sizes a paper reports, so that
// `--model-options NAME` (or `qkv params --options NAME`) builds them. Each
// says where its numbers come from; docs/models.md lists them.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::models {

struct ModelPreset {
  std::string name;                 // "vnt-1.37m"
  std::vector<std::string> models;  // the registered models it applies to
  nlohmann::json options;           // merged over the defaults
  std::string summary;              // one line: what it reproduces and how close
};

const std::vector<ModelPreset>& model_presets();
// The presets of `model`, in table order.
std::vector<const ModelPreset*> presets_for(const std::string& model);
// The preset `name` of `model`, or nullptr.
const ModelPreset* find_preset(const std::string& model, const std::string& name);

// A model's options as the user gives them: a JSON object, or, given the
// model, the name of one of its presets. ConfigError naming "model_options".
nlohmann::json parse_model_options(const std::string& text, const std::string& model = "");

}  // namespace qkv::models
