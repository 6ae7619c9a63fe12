#include "qkv/models/model_card.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>

#include "qkv/core/text.h"
#include "qkv/models/presets.h"

namespace qkv::models {
namespace {

const ModelTask& task_of(const std::string& task) {
  for (const auto& t : model_tasks())
    if (t.name == task) return t;
  throw std::logic_error("unknown model task '" + task + "'");
}

std::string line_of(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line_of(const char* format, ...) {
  char line[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  return line;
}

}  // namespace

std::string model_list_text() {
  std::string text;
  const char* sep = "";
  for (const auto& t : model_tasks()) {
    text += line_of("%s%s: %s\n", sep, t.name.c_str(), t.description.c_str());
    for (const auto& name : models_for_task(t.name))
      text += line_of("  %-20s %s\n", name.c_str(), find_model(name).description.c_str());
    sep = "\n";
  }
  return text;
}

nlohmann::json registry_cards() {
  auto cards = nlohmann::json::array();
  for (const auto& e : model_registry()) cards.push_back(model_card(e, nlohmann::json::object(), false));
  return cards;
}

nlohmann::json model_card(const ModelEntry& e, const nlohmann::json& options, bool with_size) {
  const auto resolved = e.resolve(options);
  nlohmann::json opts = nlohmann::json::object();
  for (const auto& o : e.options) {
    nlohmann::json item = {{"value", resolved.at(o.key)}, {"default", o.default_value}, {"help", o.help}};
    if (!o.source.empty()) item["source"] = o.source;
    opts[o.key] = item;
  }
  nlohmann::json card = {{"model", e.name},      {"description", e.description},
                         {"task", e.task},       {"inputs", e.inputs_with(options)},
                         {"network", e.network}, {"options", opts}};
  if (!with_size) return card;
  if (!e.network) {  // trees: no parameters to count (null, as mhca cv's summary says)
    card["parameters"] = nullptr;
    return card;
  }
  card["parameters"] = e.size(options, 1).parameters;
  // Each preset with the count it gives, so a paper's size is one look away.
  auto presets = nlohmann::json::array();
  for (const auto* p : presets_for(e.name))
    presets.push_back({{"name", p->name},
                       {"options", p->options},
                       {"summary", p->summary},
                       {"parameters", e.size(p->options, 1).parameters}});
  if (!presets.empty()) card["presets"] = presets;
  return card;
}

std::string model_card_text(const nlohmann::json& card) {
  const auto& e = find_model(card.at("model"));
  std::string text = line_of("model       %s: %s\n", e.name.c_str(), e.description.c_str());
  text += line_of("task        %s: %s\n", e.task.c_str(), task_of(e.task).description.c_str());
  text += line_of("inputs      %s\n", join(card.at("inputs").get<std::vector<std::string>>(), ", ").c_str());
  text += "options     ({model_options} '{\"key\": value}')\n";
  // key, value (and the default where it differs), help [where the default comes from]
  size_t key_width = 0, value_width = 0;
  std::vector<std::string> values;
  for (const auto& o : e.options) {
    const auto& item = card.at("options").at(o.key);
    auto value = item.at("value").dump();
    if (item.at("value") != item.at("default")) value += " (default " + item.at("default").dump() + ")";
    key_width = std::max(key_width, o.key.size());
    value_width = std::max(value_width, value.size());
    values.push_back(value);
  }
  for (size_t i = 0; i < e.options.size(); ++i) {
    const auto& o = e.options[i];
    const auto source = o.source.empty() ? "" : " [default: " + o.source + "]";
    text += line_of("  %-*s  %-*s  %s%s\n", static_cast<int>(key_width), o.key.c_str(), static_cast<int>(value_width),
                    values[i].c_str(), o.help.c_str(), source.c_str());
  }
  if (card.at("parameters").is_null())
    text += "parameters  none: not a network\n";
  else
    text += line_of("parameters  %lld\n", static_cast<long long>(card.at("parameters").get<int64_t>()));
  if (!card.contains("presets")) return text;
  text += "presets     ({model_options} NAME)\n";
  for (const auto& p : card.at("presets"))
    text += line_of("  %-12s %-10lld %s %s\n", p.at("name").get<std::string>().c_str(),
                    static_cast<long long>(p.at("parameters").get<int64_t>()), p.at("options").dump().c_str(),
                    p.at("summary").get<std::string>().c_str());
  return text;
}

}  // namespace qkv::models
