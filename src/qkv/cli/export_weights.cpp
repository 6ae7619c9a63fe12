#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/train/run.h"

namespace qkv::cli {
namespace {

// Where export-weights writes; the checkpoint is the command's --checkpoint,
// --overwrite its run options'.
struct ExportSettings {
  std::string output;
  // The positional form of earlier releases (export-weights CKPT OUT): the
  // arguments left over, which --help does not show.
  std::vector<std::string> old_form;
};
template <typename V>
void visit_fields(ExportSettings& s, V&& visit) {
  visit(Field{"output", "the .pt file to write, atomically (REQUIRED)"}, s.output);
}

int export_weights(train::CheckpointFile checkpoint, ExportSettings s, bool overwrite) {
  if (!s.old_form.empty()) {
    if (s.old_form.size() != 2 || !checkpoint.path.empty() || !s.output.empty())
      throw UsageError("export-weights: arguments were not expected: " + join(s.old_form, " ") +
                       " (use --checkpoint CKPT --output FILE)");
    std::fprintf(stderr,
                 "qkv: export-weights CKPT OUT is now spelled --checkpoint CKPT --output OUT (the old "
                 "spelling goes in the next release)\n");
    checkpoint.path = s.old_form[0];
    s.output = s.old_form[1];
  }
  if (checkpoint.path.empty()) throw UsageError("export-weights: --checkpoint is required");
  if (s.output.empty()) throw UsageError("export-weights: --output is required (the .pt file to write)");
  train::export_checkpoint_weights(checkpoint, s.output, overwrite);
  std::fprintf(stderr, "wrote %s\n", s.output.c_str());
  return 0;
}

}  // namespace

void register_export_weights(CLI::App& app, Action& action) {
  auto* cmd = add_settings_command<ExportSettings>(
      &app, action,
      CommandText("export-weights",
                  "write a checkpoint's weights as a name->tensor dict that Python's torch.load reads")
          .heading("Export")
          .checkpoint("checkpoint to read (REQUIRED)")
          .keeps_process_settings(),
      [](const auto& o, const c10::Device&) { return export_weights(o.checkpoint, o.settings, o.run.overwrite); },
      [](CLI::App* cmd, auto& o) {
        add_overwrite_flag(cmd, o.run.overwrite);
        cmd->allow_extras();
        // o lives as long as the command (its action holds it).
        cmd->parse_complete_callback([cmd, &o] { o.settings.old_form = cmd->remaining(); });
      });
  cmd->get_option("--checkpoint")->required(false);  // or the old positional form
}

}  // namespace qkv::cli
