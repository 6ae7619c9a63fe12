// qkv data <what>: writes built-in data sets to disk in the layout of the
// public ones, so that the readers and training commands can be tried with no
// download. synth-shapes: procedural meshes as a ModelNet40-style OFF tree;
// synth-parts: labelled part shapes in ShapeNet-part's text layout.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/interrupt.h"
#include "qkv/tasks/classification.h"
#include "qkv/tasks/part_segmentation.h"

namespace qkv::cli {
namespace {

// A synthetic set's settings as a command: the set's options, and --list.
template <typename Options>
struct SynthSetSettings {
  Options options;
  bool list = false;
};
template <typename Options, typename V>
void visit_fields(SynthSetSettings<Options>& s, V&& visit) {
  visit_fields(s.options, visit);
}

// The synthetic set `Options` as a command: its fields, --out, --overwrite
// and --list; `write(out, options, overwrite)` and `list()` give the lines printed.
template <typename Options>
void register_data_synth(CLI::App* parent, Action& action, const std::string& name, const std::string& description,
                         const std::string& out_help, const std::string& list_help,
                         std::string (*write)(const std::string&, Options, bool), std::string (*list)()) {
  add_settings_command<SynthSetSettings<Options>>(
      parent, action,
      CommandText(name, description).heading("Shapes").out(out_help).run_options({}),  // the set's --seed is its own
      [write, list](const auto& o, const c10::Device&) {
        if (o.settings.list) {
          std::printf("%s", list().c_str());
          return 0;
        }
        // Ctrl-C stops at the next file with one line (the writers poll for
        // it); the folder is made again by the next command that uses it.
        install_interrupt_handler();
        std::printf("%s", write(o.run.out, o.settings.options, o.run.overwrite).c_str());
        return 0;
      },
      [list_help](CLI::App* cmd, auto& o) { cmd->add_flag("--list", o.settings.list, list_help); });
}

}  // namespace

void register_data(CLI::App& app, Action& action) {
  auto* cmd = add_command_group(app, action, "data", "write built-in data sets to disk: synth-shapes, synth-parts", {});
  register_data_synth<pointcloud::SynthShapesOptions>(
      cmd, action, "synth-shapes",
      "write procedural meshes of everyday classes as a ModelNet40-style OFF tree (--list: the classes)",
      "folder to write <class>/{train,test}/<class>_NNNN.off and README.txt into",
      "list the classes and what varies in each", tasks::write_synth_shapes_to, tasks::synth_shapes_list_text);
  register_data_synth<pointcloud::SynthPartsOptions>(
      cmd, action, "synth-parts",
      "write procedural shapes with labelled parts in ShapeNet-part's text layout (--list: classes and parts)",
      "folder to write <synset>/<token>.txt, train_test_split/ and README.txt into",
      "list the classes and their part ids", tasks::write_synth_parts_to, tasks::synth_parts_list_text);
}

}  // namespace qkv::cli
