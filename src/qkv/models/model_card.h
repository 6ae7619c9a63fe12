#pragma once
// What `qkv params` says about a registered model: its task, inputs, options
// with defaults, help and sources, parameter count and presets.
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/models/model.h"

namespace qkv::models {

// The registered models by task, one line each.
std::string model_list_text();

// {model, description, task, inputs, network, options: {key: {value,
// default, help[, source]}}, parameters, presets: [{name, options, summary,
// parameters}]} with `options` (a JSON object; unset keys take their
// defaults) applied; sizes by arithmetic, nothing built. `with_size` false
// leaves out parameters and presets. `qkv params --json` prints it, and the
// Python package's qkv.models.describe returns it.
nlohmann::json model_card(const ModelEntry& entry, const nlohmann::json& options, bool with_size = true);

// Every registered model's card with its default options and no sizes, in
// registry order: `qkv params --list --json`, and qkv.models.names() and
// describe() in the Python package.
nlohmann::json registry_cards();

// model_card as lines for people.
std::string model_card_text(const nlohmann::json& card);

}  // namespace qkv::models
