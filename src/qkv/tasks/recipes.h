#pragma once
// Training recipes: the settings of a paper or of a reference code, one table
// each, so that a run can reproduce them and config.json says where every
// value came from. A recipe names settings by key with their values as text,
// as a user would type them; apply_recipe sets them on a command's settings
// structs (core/fields.h), and settings the user gave win. The sources
// and the rows that differ from qkv's defaults are in docs/reproduction.md.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::tasks {

struct RecipeSetting {
  std::string key;     // "lr", "batch_size"
  std::string value;   // as typed: "0.1"
  std::string source;  // "the paper", "the reference code (train_cls.py)", "our choice (...)"
};

struct Recipe {
  std::string name;                   // "vnn"
  std::vector<std::string> commands;  // the commands that take it: "vnt train", "mhca cv"
  // The models it is for; the first is set when --model is not given. Empty: any model.
  std::vector<std::string> models;
  std::string summary;  // one line for --help
  std::string source;   // what it reproduces: paper section, or repository and files
  std::vector<RecipeSetting> settings;
};

const std::vector<Recipe>& recipes();
// The recipes `command` takes, in table order.
std::vector<const Recipe*> recipes_for(const std::string& command);
// UsageError naming --recipe and listing the command's recipes.
const Recipe& find_recipe(const std::string& command, const std::string& name);

// Where a recipe is applied: whether the user gave the setting `key`, and
// how to set it from its text (false where the command has no such setting:
// folds on 'mhca train').
struct RecipeTarget {
  std::function<bool(const std::string& key)> given;
  std::function<bool(const std::string& key, const std::string& value)> set;
};

// Applies `recipe` to the settings the user left unset ("model" first, to the
// recipe's first model) and returns what config.json records: name, source,
// the values it set by key with their sources, and the keys the user kept.
nlohmann::json apply_recipe(const Recipe& recipe, const RecipeTarget& target);

// ConfigError naming "recipe" when a model in `models` is not one of the recipe's.
void check_recipe_models(const Recipe& recipe, const std::vector<std::string>& models);

}  // namespace qkv::tasks
