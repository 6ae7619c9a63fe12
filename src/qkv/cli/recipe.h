#pragma once
// --recipe NAME (tasks/recipes.h) on the commands that train: the recipe's
// settings are put into the options the command line left unset, through the
// options themselves, so they are checked and bound exactly as typed ones.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace qkv::cli {

// Adds --recipe to `cmd`, its help listing the recipes of `command`; nothing
// when `command` has none.
void add_recipe_option(CLI::App* cmd, std::string& recipe, const std::string& command);

// Applies recipe `name` of `command` to the options of `cmd` not given on the
// command line and returns what config.json records: name, source, the
// values it set with their sources, and the flags the command line kept.
// Settings for options `cmd` does not have (--folds on 'mhca train') are
// skipped. A recipe for other models than the given --model is a UsageError;
// without --model, the recipe's first model is set. Returns null for "".
nlohmann::json apply_recipe(CLI::App* cmd, const std::string& command, const std::string& name);

}  // namespace qkv::cli
