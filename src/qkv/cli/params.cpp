#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "qkv/cli/commands.h"
#include "qkv/core/errors.h"
#include "qkv/models/model.h"

namespace qkv::cli {

void register_params(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("params", "print the parameter count of a registered model");
  struct Opts {
    std::string model;
    std::string options = "{}";
    bool list = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "model name (see --list)");
  cmd->add_option("--options", o->options, "model options as a JSON object; unset keys take their defaults")
      ->capture_default_str();
  cmd->add_flag("--list", o->list, "list the registered models");
  cmd->callback([o, &action] {
    action = [o] {
      if (o->list) {
        for (const auto& e : models::model_registry()) std::printf("%-16s %s\n", e.name.c_str(), e.description.c_str());
        return 0;
      }
      if (o->model.empty()) throw UsageError("params: --model is required (or --list)");
      nlohmann::json options;
      try {
        options = nlohmann::json::parse(o->options);
      } catch (const nlohmann::json::exception&) {
        throw UsageError("--options: not valid JSON: " + o->options);
      }
      auto model = models::find_model(o->model).make(options);
      std::printf("%lld\n", static_cast<long long>(models::count_parameters(*model)));
      return 0;
    };
  });
}

}  // namespace qkv::cli
