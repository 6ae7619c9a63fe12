#include "qkv/cli/point_commands.h"

#include <cstdio>
#include <cstdlib>

#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"

namespace qkv::cli {

namespace {
// What a compare reads: the run folders (the command's positional
// arguments), how many test shapes measure invariance, and the largest
// model it builds.
struct CompareSettings {
  std::vector<std::string> runs;
  int64_t shapes = 0;
  models::ModelLimits limits;
};
template <typename V>
void visit_fields(CompareSettings& s, V&& visit) {
  visit(tasks::invariance_shapes_field("test shapes for the invariance measurement (0: skip it)").was("shapes"),
        s.shapes);
}
}  // namespace

RegisterCommand point_compare_command(const tasks::PointCompare& compare) {
  return [&compare](CLI::App* parent, Action& action) {
    add_settings_command<CompareSettings>(
        parent, action,
        CommandText("compare", compare.description).heading("Runs to compare").json("print JSON instead of a table"),
        [&compare](const auto& o, const c10::Device& device) {
          const auto& s = o.settings;
          const auto rows = compare.rows(s.runs, s.shapes, o.run.seed, s.limits, device);
          if (o.json)
            print_json(rows);
          else
            std::printf("%s", with_setting_names(compare.text(rows, s.shapes)).c_str());
          return 0;
        },
        [&compare](CLI::App* cmd, auto& o) {
          // The task's own default: the value and the one --help shows.
          o.settings.shapes = compare.default_shapes;
          cmd->get_option("--invariance")->default_str(std::to_string(compare.default_shapes));
          cmd->add_option("runs", o.settings.runs, std::string("run folders of `qkv ") + compare.train_command + "`")
              ->required()
              ->check(CLI::ExistingDirectory);
          add_max_params_option(cmd, o.settings.limits);
        });
  };
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

void add_point_model_options(CLI::App* cmd, tasks::PointModelSettings& o, const std::string& task) {
  cmd->add_option("--model", o.model, models::model_help(task))
      ->capture_default_str()
      ->check(CLI::IsMember(models::models_for_task(task)));
  add_field_options(cmd, o);
}

}  // namespace qkv::cli
