#include "qkv/cli/point_commands.h"

#include <cstdio>
#include <cstdlib>

#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"

namespace qkv::cli {

RegisterCommand point_compare_command(const tasks::PointCompare& compare) {
  return [&compare](CLI::App* parent, Action& action) {
    auto* cmd = parent->add_subcommand("compare", compare.description);
    struct Opts {
      RunOptions common;
      std::vector<std::string> runs;
      int64_t shapes = 0;
      bool json = false;
    };
    auto o = std::make_shared<Opts>();
    o->shapes = compare.default_shapes;
    cmd->add_option("runs", o->runs, std::string("run folders of `qkv ") + compare.train_command + "`")
        ->required()
        ->check(CLI::ExistingDirectory);
    const Field invariance = tasks::invariance_shapes_field("test shapes for the invariance measurement (0: skip it)");
    field_option_adder(cmd)(invariance, o->shapes);
    add_old_spelling(cmd, "--shapes", "--invariance", o->shapes);
    cmd->add_flag("--json", o->json, "print JSON instead of a table");
    add_common_options(cmd, o->common, "");
    on_run(cmd, action, [o, &compare] {
      const auto rows = compare.rows(o->runs, o->shapes, o->common.seed, apply_run_options(o->common));
      if (o->json)
        print_json(rows);
      else
        std::printf("%s", with_setting_names(compare.text(rows, o->shapes)).c_str());
      return 0;
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
