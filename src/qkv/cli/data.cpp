// qkv data <what>: writes built-in data sets to disk in the layout of the
// public ones, so that the readers and training commands can be tried with no
// download. synth-shapes: procedural meshes as a ModelNet40-style OFF tree;
// synth-parts: labelled part shapes in ShapeNet-part's text layout.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/output_policy.h"
#include "qkv/pointcloud/shapenet_part.h"
#include "qkv/pointcloud/synth_parts.h"
#include "qkv/pointcloud/synth_shapes.h"
#include "qkv/tasks/classification.h"
#include "qkv/tasks/part_segmentation.h"

namespace qkv::cli {
namespace {

void add_seed_option(CLI::App* cmd, uint64_t& seed) {
  add_ranged_option(cmd, "--seed", seed, "random seed; the same seed writes the same files", 0, kMaxSeed);
}

void register_synth_shapes(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "synth-shapes",
      "write procedural meshes of everyday classes as a ModelNet40-style OFF tree (--list: the classes)");
  struct Opts {
    pointcloud::SynthShapesOptions shapes;
    std::string out;
    bool list = false, overwrite = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--out", o->out, "folder to write <class>/{train,test}/<class>_NNNN.off and README.txt into");
  add_ranged_option(cmd, "--train-per-class", o->shapes.train_per_class, "training shapes per class", 1, 100000);
  add_ranged_option(cmd, "--test-per-class", o->shapes.test_per_class, "test shapes per class", 1, 100000);
  add_seed_option(cmd, o->shapes.seed);
  cmd->add_option("--classes", o->shapes.classes, "comma-separated classes to write (default: all, see --list)")
      ->delimiter(',');
  add_overwrite_flag(cmd, o->overwrite);
  cmd->add_flag("--list", o->list, "list the classes and what varies in each");
  cmd->callback([o, &action] {
    action = [o] {
      if (o->list) {
        for (const auto& cls : pointcloud::synth_shape_classes())
          std::printf("%-10s %s\n", cls.c_str(), pointcloud::synth_shape_description(cls).c_str());
        return 0;
      }
      if (o->out.empty()) throw UsageError("data synth-shapes: --out is required (or --list)");
      pointcloud::check_synth_shapes_options(o->shapes);
      claim_output_dir(o->out, "--out", o->overwrite, tasks::synth_shapes_marker(o->shapes));
      auto options = o->shapes;
      options.overwrite = true;  // the claim decided what may be replaced
      const auto summary = pointcloud::write_synth_shapes(o->out, options);
      mark_output_complete(o->out);
      std::printf("synth-shapes: %zu classes, %lld files (%lld train, %lld test) in %s\n", summary.classes.size(),
                  static_cast<long long>(summary.files()), static_cast<long long>(summary.train_files),
                  static_cast<long long>(summary.test_files), summary.out_dir.c_str());
      return 0;
    };
  });
}

void register_synth_parts(CLI::App* parent, Action& action) {
  auto* cmd = parent->add_subcommand(
      "synth-parts",
      "write procedural shapes with labelled parts in ShapeNet-part's text layout (--list: classes and parts)");
  struct Opts {
    pointcloud::SynthPartsOptions parts;
    std::string out;
    bool list = false, overwrite = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--out", o->out, "folder to write <synset>/<token>.txt, train_test_split/ and README.txt into");
  // ShapeNet-part's categories are classes here, as in every qkv command.
  add_ranged_option(cmd, "--train-per-class", o->parts.train_per_category, "training shapes per class", 1, 100000);
  add_ranged_option(cmd, "--val-per-class", o->parts.val_per_category, "validation shapes per class", 0, 100000);
  add_ranged_option(cmd, "--test-per-class", o->parts.test_per_category, "test shapes per class", 1, 100000);
  add_old_spelling(cmd, "--train-per-category", "--train-per-class", o->parts.train_per_category);
  add_old_spelling(cmd, "--val-per-category", "--val-per-class", o->parts.val_per_category);
  add_old_spelling(cmd, "--test-per-category", "--test-per-class", o->parts.test_per_category);
  add_ranged_option(cmd, "--points-per-shape", o->parts.points_per_shape, "surface points written per shape", 1,
                    1 << 20);
  add_seed_option(cmd, o->parts.seed);
  cmd->add_option("--classes", o->parts.categories, "comma-separated classes (default: all, see --list)")
      ->delimiter(',');
  add_old_spelling(cmd, "--categories", "--classes", o->parts.categories);
  add_overwrite_flag(cmd, o->overwrite);
  cmd->add_flag("--list", o->list, "list the classes and their part ids");
  cmd->callback([o, &action] {
    action = [o] {
      if (o->list) {
        for (const auto& name : pointcloud::synth_part_categories()) {
          const auto& cat =
              pointcloud::shapenet_part_categories()[static_cast<size_t>(pointcloud::find_part_category(name))];
          std::printf("%-10s %s ", cat.name.c_str(), cat.synset.c_str());
          const auto parts = pointcloud::synth_part_names(name);
          for (size_t i = 0; i < parts.size(); ++i)
            std::printf(" %lld %s", static_cast<long long>(cat.first_part + static_cast<int64_t>(i)), parts[i].c_str());
          std::printf("\n");
        }
        return 0;
      }
      if (o->out.empty()) throw UsageError("data synth-parts: --out is required (or --list)");
      pointcloud::check_synth_parts_options(o->parts);
      claim_output_dir(o->out, "--out", o->overwrite, tasks::synth_parts_marker(o->parts));
      auto options = o->parts;
      options.overwrite = true;  // the claim decided what may be replaced
      const auto summary = pointcloud::write_synth_parts(o->out, options);
      mark_output_complete(o->out);
      std::printf("synth-parts: %zu categories, %lld shapes (%lld train, %lld val, %lld test) in %s\n",
                  summary.categories.size(), static_cast<long long>(summary.files()),
                  static_cast<long long>(summary.shapes[0]), static_cast<long long>(summary.shapes[1]),
                  static_cast<long long>(summary.shapes[2]), o->out.c_str());
      return 0;
    };
  });
}

}  // namespace

void register_data(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("data", "write built-in data sets to disk: synth-shapes, synth-parts");
  cmd->require_subcommand(1);
  register_synth_shapes(cmd, action);
  register_synth_parts(cmd, action);
}

}  // namespace qkv::cli
