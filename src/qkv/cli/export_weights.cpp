#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/common.h"
#include "qkv/cli/commands.h"
#include "qkv/core/output_policy.h"
#include "qkv/train/run.h"
#include "qkv/train/weights.h"

namespace qkv::cli {

void register_export_weights(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "export-weights", "write a checkpoint's weights as a name->tensor dict that Python's torch.load reads");
  auto ckpt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto overwrite = std::make_shared<bool>(false);
  cmd->add_option("CKPT", *ckpt, "checkpoint (e.g. RUN/checkpoints/best.ckpt)")->required()->check(CLI::ExistingFile);
  cmd->add_option("OUT", *out, "output .pt file (written atomically)")->required();
  add_overwrite_flag(cmd, *overwrite);
  cmd->callback([=, &action] {
    action = [=] {
      check_output_file(*out, "OUT", *overwrite);
      auto model = train::load_model_from_checkpoint(*ckpt);
      claim_output_file(*out, "OUT", *overwrite, {"export-weights", {}});
      train::export_weights(*model, *out);
      std::fprintf(stderr, "wrote %s\n", out->c_str());
      return 0;
    };
  });
}

}  // namespace qkv::cli
