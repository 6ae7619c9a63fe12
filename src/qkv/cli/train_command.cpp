#include "qkv/cli/train_command.h"

#include <cstdio>
#include <memory>
#include <set>

#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"

namespace qkv::cli {
void register_train_command(CLI::App* parent, Action& action, TrainTask task,
                            const std::function<void(CLI::App* cmd)>& add_data_options,
                            const std::function<void(CLI::App* cmd)>& add_model_options) {
  auto* cmd = parent->add_subcommand("train", task.description);
  struct Opts {
    RunOptions common;
    train::TrainConfig train;
    std::string init_weights, resume, recipe;
    models::ModelLimits limits;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = task.default_out;
  o->train = task.defaults;
  option_section(cmd, "Run", [&] {
    add_common_options(cmd, o->common,
                       "run folder: config.json, metrics.jsonl, summary.json, report.html, checkpoints/");
    add_recipe_option(cmd, o->recipe, task.command);
    cmd->add_option("--resume", o->resume,
                    "continue the run in this folder from its last checkpoint (only --epochs, --threads, --device, "
                    "--json, --max-params and the data-parallel options may be given with it)")
        ->check(CLI::ExistingDirectory);
    cmd->add_flag("--json", o->json, "print the whole summary.json at the end instead of a short summary");
  });
  option_section(cmd, "Data", [&] { add_data_options(cmd); });
  option_section(cmd, "Model", [&] {
    add_model_options(cmd);
    cmd->add_option("--init-weights", o->init_weights,
                    "start from a name->tensor .pt dict (export-weights, torch.save)")
        ->check(CLI::ExistingFile);
    add_max_params_option(cmd, o->limits);
  });
  option_section(cmd, "Training", [&] {
    add_field_options(cmd, o->train, task.batch_norm ? std::set<std::string>{} : kBatchNormFields);
    if (!task.select_metric_shown.empty()) cmd->get_option("--select-metric")->default_str(task.select_metric_shown);
  });
  if (task.data_parallel)
    option_section(cmd, "Data-parallel training (qkv launch, or one process per rank)",
                   [&] { add_field_options(cmd, o->train.parallel); });
  section_options(cmd, "Options");
  auto shared = std::make_shared<TrainTask>(std::move(task));
  on_run(cmd, action, [o, cmd, shared] {
    tasks::TrainCall call;
    call.recipe = o->recipe;
    call.run = o->common;
    call.resume = o->resume;
    call.init_weights = o->init_weights;
    call.train = o->train;
    call.given = given_keys(*cmd);
    call.limits = o->limits;
    // From the start, not only once training begins: Ctrl-C while the data
    // are generated or read stops at the next file with one line (the
    // readers and writers poll for it), where it had killed qkv silently.
    install_interrupt_handler();
    const auto outcome = tasks::train_command(*shared, call);
    if (outcome.interrupted) return kExitInterrupted;
    if (outcome.rank != 0) return 0;
    if (outcome.nothing_to_do) {
      // --json's reader gets one document still: the finished run's summary.
      if (o->json) print_json(read_json_file(train::RunPaths{outcome.dir}.summary()));
      return 0;
    }
    if (o->json)
      print_json(outcome.summary);
    else
      std::printf("%s", train::run_summary_text(outcome.summary, outcome.dir, outcome.test_label).c_str());
    return 0;
  });
}

}  // namespace qkv::cli
