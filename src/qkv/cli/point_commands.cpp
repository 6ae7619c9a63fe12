#include "qkv/cli/point_commands.h"

#include <cstdlib>

#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"

namespace qkv::cli {

void add_compare_options(CLI::App* cmd, CompareOptions& o, const std::string& train_command, int64_t default_shapes) {
  o.shapes = default_shapes;
  cmd->add_option("runs", o.runs, "run folders of `qkv " + train_command + "`")->required()->check(CLI::ExistingDirectory);
  add_ranged_option(cmd, "--invariance", o.shapes, "test shapes for the invariance measurement (0: skip it)", 0,
                    100000);
  add_old_spelling(cmd, "--shapes", "--invariance", o.shapes);
  cmd->add_flag("--json", o.json, "print JSON instead of a table");
  add_common_options(cmd, o.common, "");
}

void accept_axis_names(CLI::App* cmd) {
  cmd->get_option("--up-axis")
      ->transform(
          [](std::string text) {
            if (const auto axis = tasks::up_axis_of_name(std::string(trim(text)))) return std::to_string(*axis);
            char* end = nullptr;
            std::strtol(text.c_str(), &end, 10);
            if (text.empty() || *end != '\0')
              throw CLI::ValidationError(text + ": expected x, y, z, layout or auto (or 0, 1, 2, -1, -2)");
            return text;
          },
          "", "axis")
      ->type_name("AXIS")
      ->default_str("layout");
}

void add_point_model_options(CLI::App* cmd, PointModelOptions& o, const std::string& task, int64_t paper_linear_dim,
                             int64_t paper_heads) {
  const auto names = models::models_for_task(task);
  cmd->add_option("--model", o.model, models::model_help(task))->capture_default_str()->check(CLI::IsMember(names));
  add_ranged_option(cmd, "--linear-dim", o.linear_dim,
                    "VNT-Net: linear dimension C (paper: " + std::to_string(paper_linear_dim) + "); 0 = model default",
                    0, 4096);
  add_ranged_option(cmd, "--heads", o.heads,
                    "models with attention: heads (VNT paper: " + std::to_string(paper_heads) + "); 0 = model default",
                    0, 1024);
  add_ranged_option(cmd, "--head-dim", o.head_dim, "VNT-Net: head size (paper: 16); 0 = model default", 0, 4096);
  cmd->add_option("--model-options", o.model_options,
                  "any other model option as JSON, e.g. '{\"k\":16,\"pooling\":\"max\"}', or a preset such as "
                  "vnt-1.37m (qkv params --model M lists both)")
      ->capture_default_str();
}

nlohmann::json model_options_from_cli(const PointModelOptions& o) {
  nlohmann::json options = parse_model_options(o.model_options, o.model);
  const nlohmann::json defaults = models::find_model(o.model).resolve({});
  auto set = [&](const char* flag, const char* key, int64_t value) {
    if (value < 0) throw UsageError(std::string(flag) + " must be positive (0 = the model's default)");
    if (value == 0) return;
    if (!defaults.contains(key)) throw UsageError(std::string(flag) + " does not apply to " + o.model);
    if (options.contains(key) && options.at(key) != nlohmann::json(value))
      throw UsageError(std::string(flag) + " " + std::to_string(value) + " and --model-options' \"" + key +
                       "\": " + shortened(options.at(key).dump()) + " set the same option; give it once");
    options[key] = value;
  };
  set("--linear-dim", "linear_dim", o.linear_dim);
  set("--head-dim", "head_dim", o.head_dim);
  set("--heads", "heads", o.heads);
  return options;
}

void print_compare_table(const nlohmann::json& rows, const char* scores_key,
                         const std::function<std::string(const nlohmann::json& row)>& protocol,
                         const std::vector<std::string>& score_headers,
                         const std::function<std::vector<std::string>(const nlohmann::json& scores)>& scores,
                         const std::string& note) {
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    std::vector<std::string> cells = {r.at("run").get<std::string>(), r.at("model").get<std::string>(), protocol(r),
                                      std::to_string(r.at("parameters").get<long long>())};
    for (auto& cell : scores(r.at(scores_key))) cells.push_back(std::move(cell));
    char invariance[32] = "-";
    if (r.contains("invariance"))
      std::snprintf(invariance, sizeof invariance, "%.3g",
                    r.at("invariance").at("float32").at("max_abs_logit_change").get<double>());
    cells.push_back(invariance);
    table.push_back(cells);
  }
  std::vector<std::string> header = {"run", "model", "protocol", "params"};
  header.insert(header.end(), score_headers.begin(), score_headers.end());
  header.push_back("max |dlogit|");
  print_table(header, table);
  if (!note.empty()) std::printf("%s\n", note.c_str());
}

}  // namespace qkv::cli
