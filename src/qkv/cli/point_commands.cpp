#include "qkv/cli/point_commands.h"

#include <cstdio>
#include <cstdlib>

#include "qkv/core/messages.h"
#include "qkv/core/text.h"
#include "qkv/models/model.h"

namespace qkv::cli {
namespace {

// The run folders, the test shapes of the invariance measurement, --json
// and the common options.
struct CompareOptions {
  CommonOptions common;
  std::vector<std::string> runs;
  int64_t shapes = 0;
  bool json = false;
};

void add_compare_options(CLI::App* cmd, CompareOptions& o, const std::string& train_command, int64_t default_shapes) {
  o.shapes = default_shapes;
  cmd->add_option("runs", o.runs, "run folders of `qkv " + train_command + "`")->required()->check(CLI::ExistingDirectory);
  add_ranged_option(cmd, "--invariance", o.shapes, "test shapes for the invariance measurement (0: skip it)", 0,
                    100000);
  add_old_spelling(cmd, "--shapes", "--invariance", o.shapes);
  cmd->add_flag("--json", o.json, "print JSON instead of a table");
  add_common_options(cmd, o.common, "");
}

}  // namespace


void add_point_eval_options(CLI::App* cmd, tasks::PointEvalSettings& s, const std::string& none,
                            const std::string& logit) {
  cmd->add_option("--data", s.data, "data folder or 'synthetic'; default: the run's own data");
  cmd->add_option("--rotate", s.rotate,
                  "rotations of the evaluated clouds: " + none +
                      ", z or so3 (so3 by default: eval tests invariance; predict takes the file as it is)")
      ->capture_default_str();
  add_ranged_option(cmd, "--invariance", s.invariance_shapes,
                    "also measure the largest " + logit + " change under 4 random rotations on this many shapes", 0,
                    100000);
}

void register_point_compare(CLI::App* parent, Action& action, const std::string& description,
                            const char* train_command, int64_t default_shapes, ComparePointRuns compare,
                            CompareText text) {
  auto* cmd = parent->add_subcommand("compare", description);
  auto o = std::make_shared<CompareOptions>();
  add_compare_options(cmd, *o, train_command, default_shapes);
  cmd->callback([o, compare, text, &action] {
    action = [o, compare, text] {
      const auto rows = compare(o->runs, o->shapes, o->common.seed, apply_common_options(o->common));
      if (o->json)
        print_json(rows);
      else
        std::printf("%s", with_setting_names(text(rows, o->shapes)).c_str());
      return 0;
    };
  });
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

void add_point_model_options(CLI::App* cmd, tasks::PointModelSettings& o, const std::string& task, int64_t paper_linear_dim,
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

}  // namespace qkv::cli
