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

void register_params(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("params",
                                 "a registered model: its task, inputs, options with defaults and help, "
                                 "and parameter count");
  struct Opts {
    std::string model;
    std::string options = "{}";
    bool list = false;
    bool count = false;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "model name (see --list)");
  cmd->add_option("--model-options", o->options,
                  "model options as a JSON object (unset keys take their defaults), or a preset's name")
      ->capture_default_str();
  add_old_spelling(cmd, "--options", "--model-options", o->options);
  cmd->add_flag("--list", o->list, "list the registered models by task");
  auto* count = cmd->add_flag("--count", o->count, "print only the parameter count");
  cmd->add_flag("--json", o->json, "print it all as JSON")->excludes(count);
  on_run(cmd, action, [o] {
    if (o->list) {
      if (o->json)
        print_json(models::registry_cards());
      else
        std::printf("%s", models::model_list_text().c_str());
      return 0;
    }
    if (o->model.empty()) throw UsageError("params: --model is required (or --list)");
    const auto& entry = models::find_model(o->model);
    const auto card = models::model_card(entry, models::parse_model_options(o->options, o->model));
    if (o->count && card.at("parameters").is_null())
      throw UsageError("params: --count: " + o->model + " is not a network; it has no parameters to count");
    if (o->count)
      std::printf("%lld\n", static_cast<long long>(card.at("parameters").get<int64_t>()));
    else if (o->json)
      print_json(card);
    else
      std::printf("%s", with_setting_names(models::model_card_text(card)).c_str());
    return 0;
  });
}

}  // namespace qkv::cli
