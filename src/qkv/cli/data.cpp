// qkv data <what>: writes built-in data sets to disk in the layout of the
// public ones, so that the readers and training commands can be tried with no
// download. synth-shapes: procedural meshes as a ModelNet40-style OFF tree.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/core/errors.h"
#include "qkv/pointcloud/synth_shapes.h"

namespace qkv::cli {
namespace {

void register_synth_shapes(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "synth-shapes",
      "write procedural meshes of everyday classes as a ModelNet40-style OFF tree (--list: the classes)");
  struct Opts {
    pointcloud::SynthShapesOptions shapes;
    std::string out;
    bool list = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--out", o->out, "folder to write <class>/{train,test}/<class>_NNNN.off and README.txt into");
  cmd->add_option("--train-per-class", o->shapes.train_per_class, "training shapes per class")->capture_default_str();
  cmd->add_option("--test-per-class", o->shapes.test_per_class, "test shapes per class")->capture_default_str();
  cmd->add_option("--seed", o->shapes.seed, "random seed; the same seed writes the same files")
      ->capture_default_str()
      ->check(CLI::Validator(
          // CLI11 would read "-1" into an unsigned as 2^64 - 1.
          [](std::string& value) {
            return value.rfind('-', 0) == 0 ? std::string("must be 0 or more") : std::string();
          },
          ""));
  cmd->add_option("--classes", o->shapes.classes, "comma-separated classes to write (default: all, see --list)")
      ->delimiter(',');
  cmd->add_flag("--overwrite", o->shapes.overwrite, "write into an --out folder that already holds files");
  cmd->add_flag("--list", o->list, "list the classes and what varies in each");
  cmd->callback([o, &action] {
    action = [o] {
      if (o->list) {
        for (const auto& cls : pointcloud::synth_shape_classes())
          std::printf("%-10s %s\n", cls.c_str(), pointcloud::synth_shape_description(cls).c_str());
        return 0;
      }
      if (o->out.empty()) throw UsageError("data synth-shapes: --out is required (or --list)");
      const auto summary = pointcloud::write_synth_shapes(o->out, o->shapes);
      std::printf("synth-shapes: %zu classes, %lld files (%lld train, %lld test) in %s\n", summary.classes.size(),
                  static_cast<long long>(summary.files()), static_cast<long long>(summary.train_files),
                  static_cast<long long>(summary.test_files), summary.out_dir.c_str());
      return 0;
    };
  });
}

}  // namespace

void register_data(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("data", "write built-in data sets to disk: synth-shapes");
  cmd->require_subcommand(1);
  register_synth_shapes(cmd, action);
}

}  // namespace qkv::cli
