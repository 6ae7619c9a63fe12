#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/json_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"
#include "qkv/models/presets.h"

namespace qkv::cli {
namespace {

const models::ModelTask& task_of(const models::ModelEntry& e) {
  for (const auto& t : models::model_tasks())
    if (t.name == e.task) return t;
  throw std::logic_error("model '" + e.name + "' has unknown task '" + e.task + "'");
}

// Everything `params` says about a model but its parameter count, with the
// options after `options` are applied.
nlohmann::json describe(const models::ModelEntry& e, const nlohmann::json& options) {
  const auto resolved = e.resolve(options);
  nlohmann::json opts = nlohmann::json::object();
  for (const auto& o : e.options) {
    nlohmann::json item = {{"value", resolved.at(o.key)}, {"default", o.default_value}, {"help", o.help}};
    if (!o.source.empty()) item["source"] = o.source;
    opts[o.key] = item;
  }
  return {{"model", e.name},
          {"description", e.description},
          {"task", e.task},
          {"inputs", e.inputs_with(options)},
          {"options", opts}};
}

void print_list() {
  const char* sep = "";
  for (const auto& t : models::model_tasks()) {
    std::printf("%s%s: %s\n", sep, t.name.c_str(), t.description.c_str());
    for (const auto& name : models::models_for_task(t.name))
      std::printf("  %-20s %s\n", name.c_str(), models::find_model(name).description.c_str());
    sep = "\n";
  }
}

// The options as rows: key, value (and the default where it differs), help
// [where the default comes from].
void print_options(const models::ModelEntry& e, const nlohmann::json& described) {
  size_t key_width = 0, value_width = 0;
  std::vector<std::string> values;
  for (const auto& o : e.options) {
    const auto& item = described.at("options").at(o.key);
    auto value = item.at("value").dump();
    if (item.at("value") != item.at("default")) value += " (default " + item.at("default").dump() + ")";
    key_width = std::max(key_width, o.key.size());
    value_width = std::max(value_width, value.size());
    values.push_back(value);
  }
  for (size_t i = 0; i < e.options.size(); ++i) {
    const auto& o = e.options[i];
    const auto source = o.source.empty() ? "" : " [default: " + o.source + "]";
    std::printf("  %-*s  %-*s  %s%s\n", static_cast<int>(key_width), o.key.c_str(), static_cast<int>(value_width),
                values[i].c_str(), o.help.c_str(), source.c_str());
  }
}

}  // namespace

void register_params(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("params", "a registered model: its task, inputs, options with defaults and help, "
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
  cmd->callback([o, &action] {
    action = [o] {
      if (o->list) {
        if (!o->json) {
          print_list();
          return 0;
        }
        auto list = nlohmann::json::array();
        for (const auto& e : models::model_registry()) list.push_back(describe(e, nlohmann::json::object()));
        std::printf("%s\n", json_text(list).c_str());
        return 0;
      }
      if (o->model.empty()) throw UsageError("params: --model is required (or --list)");
      const auto& entry = models::find_model(o->model);
      const nlohmann::json options = parse_model_options(o->options, o->model);
      // By arithmetic: a size is said without building (or allocating) the model.
      const auto parameters = entry.size(options, 1).parameters;
      if (o->count) {
        std::printf("%lld\n", static_cast<long long>(parameters));
        return 0;
      }
      auto described = describe(entry, options);
      described["parameters"] = parameters;
      // Each preset with the count it gives, so a paper's size is one look away.
      auto presets = nlohmann::json::array();
      for (const auto* p : models::presets_for(entry.name))
        presets.push_back({{"name", p->name},
                           {"options", p->options},
                           {"summary", p->summary},
                           {"parameters", entry.size(p->options, 1).parameters}});
      if (!presets.empty()) described["presets"] = presets;
      if (o->json) {
        std::printf("%s\n", json_text(described).c_str());
        return 0;
      }
      std::printf("model       %s: %s\n", entry.name.c_str(), entry.description.c_str());
      std::printf("task        %s: %s\n", entry.task.c_str(), task_of(entry).description.c_str());
      std::printf("inputs      %s\n", join(described.at("inputs").get<std::vector<std::string>>(), ", ").c_str());
      std::printf("options     (--model-options '{\"key\": value}')\n");
      print_options(entry, described);
      std::printf("parameters  %lld\n", static_cast<long long>(parameters));
      if (!presets.empty()) std::printf("presets     (--model-options NAME)\n");
      for (const auto& p : presets)
        std::printf("  %-12s %-10lld %s %s\n", p.at("name").get<std::string>().c_str(),
                    static_cast<long long>(p.at("parameters").get<int64_t>()), p.at("options").dump().c_str(),
                    p.at("summary").get<std::string>().c_str());
      return 0;
    };
  });
}

}  // namespace qkv::cli
