#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/train/run.h"

namespace qkv::cli {

void register_export_weights(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("export-weights",
                                 "write a checkpoint's weights as a name->tensor dict that Python's torch.load reads");
  auto ckpt = std::make_shared<train::CheckpointFile>();
  auto out = std::make_shared<std::string>();
  auto overwrite = std::make_shared<bool>(false);
  add_checkpoint_option(cmd, *ckpt, "checkpoint to read (REQUIRED)")->required(false);
  cmd->add_option("--output", *out, "the .pt file to write, atomically (REQUIRED)");
  add_overwrite_flag(cmd, *overwrite);
  // The positional form of earlier releases (export-weights CKPT OUT) is
  // still read, from the extra arguments, so that --help does not show it.
  cmd->allow_extras();
  on_run(cmd, action, [=] {
    auto extras = cmd->remaining();
    if (!extras.empty()) {
      if (extras.size() != 2 || !ckpt->path.empty() || !out->empty())
        throw UsageError("export-weights: arguments were not expected: " + join(extras, " ") +
                         " (use --checkpoint CKPT --output FILE)");
      std::fprintf(stderr,
                   "qkv: export-weights CKPT OUT is now spelled --checkpoint CKPT --output OUT (the old "
                   "spelling goes in the next release)\n");
      ckpt->path = extras[0];
      *out = extras[1];
    }
    if (ckpt->path.empty()) throw UsageError("export-weights: --checkpoint is required");
    if (out->empty()) throw UsageError("export-weights: --output is required (the .pt file to write)");
    train::export_checkpoint_weights(*ckpt, *out, *overwrite);
    std::fprintf(stderr, "wrote %s\n", out->c_str());
    return 0;
  });
}

}  // namespace qkv::cli
