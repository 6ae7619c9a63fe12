#include "qkv/cli/recipe.h"

#include <algorithm>
#include <stdexcept>

#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/tasks/recipes.h"

namespace qkv::cli {
namespace {

// Gives an unset option `value` as if it had been typed: validated, then bound.
void set_as_typed(CLI::Option* opt, const std::string& value) {
  opt->add_result(value);
  try {
    opt->run_callback();
  } catch (const CLI::Error& e) {
    throw std::logic_error(std::string("recipe value '") + value + "' for " + opt->get_name() + ": " + e.what());
  }
}

}  // namespace

void add_recipe_option(CLI::App* cmd, std::string& recipe, const std::string& command) {
  if (tasks::recipes_for(command).empty()) return;  // a command without recipes offers no --recipe
  std::string help = "train with the settings of a paper or a reference code; options given here win (docs/reproduction.md):";
  for (const auto* r : tasks::recipes_for(command)) help += "\n" + r->name + ": " + r->summary;
  cmd->add_option("--recipe", recipe, help);
}

nlohmann::json apply_recipe(CLI::App* cmd, const std::string& command, const std::string& name) {
  if (name.empty()) return nullptr;
  const auto& recipe = tasks::find_recipe(command, name);
  nlohmann::json set = nlohmann::json::object(), kept = nlohmann::json::array();
  if (!recipe.models.empty()) {
    auto* model = cmd->get_option("--model");
    if (model->count() > 0) {
      const auto given = model->as<std::string>();
      if (std::find(recipe.models.begin(), recipe.models.end(), given) == recipe.models.end())
        throw UsageError("--recipe " + name + " is for --model " + join(recipe.models) + ", not " + given);
      kept.push_back("--model");
    } else {
      set_as_typed(model, recipe.models.front());
      set["--model"] = {{"value", recipe.models.front()}, {"source", recipe.source}};
    }
  }
  for (const auto& s : recipe.settings) {
    const std::string flag = flag_of_key(cmd, s.key);
    auto* opt = flag.empty() ? nullptr : cmd->get_option_no_throw(flag);
    if (!opt) continue;  // e.g. folds on 'mhca train'
    if (opt->count() > 0) {
      kept.push_back(flag);
      continue;
    }
    set_as_typed(opt, s.value);
    set[flag] = {{"value", s.value}, {"source", s.source}};
  }
  return {{"name", recipe.name}, {"source", recipe.source}, {"set", set}, {"kept_from_command_line", kept}};
}

}  // namespace qkv::cli
