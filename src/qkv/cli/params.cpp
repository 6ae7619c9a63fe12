#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/models/model.h"
#include "qkv/models/model_card.h"
#include "qkv/models/presets.h"

namespace qkv::cli {
namespace {

// What `qkv params` is asked: a model with options, or the list of them all.
struct ParamsSettings {
  std::string model;
  std::string model_options = "{}";
  bool list = false;
  bool count = false;
};
template <typename V>
void visit_fields(ParamsSettings& s, V&& visit) {
  visit(Field{"model", "model name (see --list)"}, s.model);
  visit(
      Field{"model_options", "model options as a JSON object (unset keys take their defaults), or a preset's name"}.was(
          "options"),
      s.model_options);
  visit(Field{"list", "list the registered models by task"}, s.list);
  visit(Field{"count", "print only the parameter count"}, s.count);
}

int print_model_card(const ParamsSettings& s, bool json) {
  if (s.list) {
    if (json)
      print_json(models::registry_cards());
    else
      std::printf("%s", models::model_list_text().c_str());
    return 0;
  }
  if (s.model.empty()) throw UsageError("params: --model is required (or --list)");
  const auto& entry = models::find_model(s.model);
  const auto card = models::model_card(entry, models::parse_model_options(s.model_options, s.model));
  if (s.count && card.at("parameters").is_null())
    throw UsageError("params: --count: " + s.model + " is not a network; it has no parameters to count");
  if (s.count)
    std::printf("%lld\n", static_cast<long long>(card.at("parameters").get<int64_t>()));
  else if (json)
    print_json(card);
  else
    std::printf("%s", with_setting_names(models::model_card_text(card)).c_str());
  return 0;
}

}  // namespace

void register_params(CLI::App& app, Action& action) {
  auto* cmd = add_settings_command<ParamsSettings>(
      &app, action,
      CommandText("params", "a registered model: its task, inputs, options with defaults and help, and parameter count")
          .heading("Model")
          .json("print it all as JSON")
          .keeps_process_settings(),
      [](const auto& o, const c10::Device&) { return print_model_card(o.settings, o.json); });
  cmd->get_option("--json")->excludes(cmd->get_option("--count"));
}

}  // namespace qkv::cli
