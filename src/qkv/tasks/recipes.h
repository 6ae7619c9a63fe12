#pragma once
// Training recipes: the settings of a paper or of a reference code, one table
// each, so that a run can reproduce them and config.json says where every
// value came from. A recipe names settings by key with their values as text,
// as a user would type them; the front end (the CLI's --recipe) applies them
// through its own checks, and settings the user gave win. The sources
// and the rows that differ from qkv's defaults are in docs/reproduction.md.
#include <string>
#include <vector>

namespace qkv::tasks {

struct RecipeSetting {
  std::string key;     // "lr", "batch_size"
  std::string value;   // as typed: "0.1"
  std::string source;  // "the paper", "the reference code (train_cls.py)", "our choice (...)"
};

struct Recipe {
  std::string name;                 // "vnn"
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

}  // namespace qkv::tasks
