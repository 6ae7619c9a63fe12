#include "qkv/cli/train_command.h"

#include <optional>

#include <functional>

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "qkv/cli/recipe.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/runtime.h"
#include "qkv/core/text.h"
#include "qkv/distributed/process_group.h"
#include "qkv/train/checkpoint.h"

namespace qkv::cli {
namespace {

// What --resume may be given with: where and how long the run goes on, never
// how it trains.
const std::set<std::string>& resume_compatible_options() {
  static const std::set<std::string> names = {"--resume", "--epochs",       "--threads", "--device",
                                              "--json",   "--world-size",   "--rank",    "--dist-timeout",
                                              "--master", "--out",          "--max-params"};
  return names;
}

void check_resume_options(const CLI::App& cmd, const std::string& dir, const std::string& out) {
  for (const auto* opt : cmd.get_options()) {
    if (opt->count() == 0) continue;
    const std::string name = opt->get_name();
    if (!resume_compatible_options().count(name))
      throw UsageError("--resume " + dir + ": " + name +
                       " cannot be changed on a resumed run (it keeps its stored settings; only --epochs, --threads, "
                       "--device and the data-parallel options may be given)");
  }
  if (cmd.count("--out") && out != dir) throw UsageError("--resume " + dir + " continues in that folder; drop --out");
}

// A resumed run whose epochs are all done: true after saying so (exit 0,
// nothing written). --epochs below the epochs done is a usage error: the
// total cannot shrink, and "3 more" is not what --epochs means.
bool nothing_to_resume(const train::RunRequest& request, const std::string& dir, bool epochs_given) {
  const train::TrainState done = train::read_checkpoint_state(train::RunPaths{dir}.last_checkpoint());
  const int64_t target = train::effective_train_config(request).epochs;
  if (epochs_given && target < done.epoch)
    throw UsageError("--epochs " + std::to_string(target) + ": --resume " + dir + " has already trained " +
                     counted(done.epoch, "epoch") + "; --epochs is the total, give more than " +
                     std::to_string(done.epoch) + " to train further (nothing was changed)");
  if (target > done.epoch || done.step_in_epoch > 0) return false;
  std::fprintf(stderr, "%s: nothing to do: %s has finished all %s; give --epochs above %lld to train further\n",
               request.command.c_str(), dir.c_str(), counted(done.epoch, "epoch").c_str(),
               static_cast<long long>(done.epoch));
  return true;
}

// Completes the data-parallel options from WORLD_SIZE, RANK, MASTER_ADDR,
// MASTER_PORT where the command line is silent, and checks them.
void resolve_parallel(const CLI::App& cmd, train::TrainConfig& config) {
  std::vector<std::string> on_cli;
  if (cmd.count("--world-size")) on_cli.push_back("world_size");
  if (cmd.count("--rank")) on_cli.push_back("rank");
  if (cmd.count("--master")) on_cli.push_back("master");
  config.parallel = distributed::resolve_parallel_options(config.parallel, on_cli);
}

void add_parallel_options(CLI::App* cmd, distributed::ParallelOptions& p) {
  add_ranged_option(cmd, "--world-size", p.world_size,
                    "data-parallel ranks in all (env WORLD_SIZE); --batch-size is per rank", 1, 65536);
  add_ranged_option(cmd, "--rank", p.rank,
                    "this process's rank, 0..world-size-1 (env RANK); rank 0 writes the run folder", 0, 65535);
  cmd->add_option("--master", p.master, "ADDR:PORT where rank 0 serves the rendezvous (env MASTER_ADDR, MASTER_PORT; "
                                        "default 127.0.0.1:29500)");
  add_ranged_option(cmd, "--dist-timeout", p.timeout_seconds,
                    "seconds to wait for peers at rendezvous and in each collective before failing", 0.1, 86400);
}

}  // namespace

void register_train_command(CLI::App* parent, Action& action, TrainCommand spec) {
  auto* cmd = parent->add_subcommand("train", spec.description);
  struct Opts {
    CommonOptions common;
    train::TrainConfig train;
    std::string init_weights, resume, recipe;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = spec.default_out;
  o->train = spec.defaults;
  // --help in sections, in this order (CLI11 lists groups by first use).
  auto section = [cmd](const std::string& heading, const std::function<void()>& add) { option_section(cmd, heading, add); };
  section("Run", [&] {
    add_common_options(cmd, o->common, "run folder: config.json, metrics.jsonl, summary.json, report.html, checkpoints/");
    add_recipe_option(cmd, o->recipe, spec.command);
    cmd->add_option("--resume", o->resume,
                    "continue the run in this folder from its last checkpoint (only --epochs, --threads, --device and "
                    "the data-parallel options may be given with it)")
        ->check(CLI::ExistingDirectory);
    cmd->add_flag("--json", o->json, "print the whole summary.json at the end instead of a short summary");
  });
  section("Data", [&] { spec.add_data_options(cmd); });
  section("Model", [&] {
    spec.add_model_options(cmd);
    cmd->add_option("--init-weights", o->init_weights, "start from a name->tensor .pt dict (export-weights, torch.save)")
        ->check(CLI::ExistingFile);
    add_max_params_option(cmd);
  });
  section("Training", [&] {
    add_field_options(cmd, o->train, spec.batch_norm ? std::set<std::string>{} : kBatchNormFields);
    if (!spec.select_metric_shown.empty()) cmd->get_option("--select-metric")->default_str(spec.select_metric_shown);
  });
  if (spec.data_parallel)
    section("Data-parallel training (qkv launch, or one process per rank)",
            [&] { add_parallel_options(cmd, o->train.parallel); });
  auto shared = std::make_shared<TrainCommand>(std::move(spec));
  cmd->callback([o, cmd, shared, &action] {
    action = [o, cmd, shared] {
      const TrainCommand& spec = *shared;
      const bool resume = !o->resume.empty();
      // A recipe fills the options left unset before anything reads them; a
      // resumed run keeps its stored settings (check_resume_options refuses --recipe).
      const auto recipe = resume ? nlohmann::json() : apply_recipe(cmd, spec.command, o->recipe);
      train::TrainConfig config = o->train;
      if (shared->data_parallel) resolve_parallel(*cmd, config);
      CommonOptions common = o->common;
      train::RunRequest request;
      std::string dir;
      if (resume) {
        check_resume_options(*cmd, o->resume, common.out);
        // Before anything is read or written through a link or a changed file.
        train::RunFolder::check(o->resume, train::RunFolderMode::Resume, spec.command, "resume");
        request = train::stored_request(o->resume, spec.command);
        if (cmd->count("--device")) request.device = common.device;
        dir = o->resume;
      } else {
        request.command = spec.command;
        request.seed = common.seed;
        request.device = common.device;
        request.init_weights = o->init_weights;
        request.train = config;
        request.train.seed = common.seed;
        request.recipe = recipe;
        spec.prepare(*cmd, request, common.out);
        request.train.validate();
        if (!spec.model_options_from_data && train::is_registered_model(request.model_name)) {
          // Bad or huge model options fail here, before any data are read or written.
          const auto& entry = models::find_model(request.model_name);
          entry.resolve(request.model_options);
          models::check_parameter_count(entry.name, entry.size(request.model_options, 1));
        }
        dir = common.out;
      }
      request.train.parallel.rank = config.parallel.rank;  // where this process runs now
      request.train.parallel.master = config.parallel.master;
      request.train.parallel.timeout_seconds = config.parallel.timeout_seconds;
      common.seed = request.seed;
      common.device = request.device;
      apply_common_options(common);
      if (resume) {
        train::record_resume(request, dir, cmd->count("--epochs") ? config.epochs : 0, config.parallel.world_size);
        if (nothing_to_resume(request, dir, cmd->count("--epochs") > 0)) return 0;
      } else
        request.train.parallel.world_size = config.parallel.world_size;
      const bool writer = config.parallel.rank == 0;
      std::optional<train::RunFolder> folder;
      if (writer) {
        const auto mode = train::run_folder_mode(resume, common.overwrite);
        if (!resume) {
          train::RunFolder::check(dir, mode, spec.command);
          if (spec.check_outputs) spec.check_outputs(request, common.overwrite);
        }
        folder = train::RunFolder::open(dir, mode, spec.command, resume ? "resume" : "out");
      }
      TaskRun task;
      try {
        task = spec.load(request, {config.parallel.rank, common.overwrite, resume, dir});
      } catch (...) {
        // Data that cannot be loaded leave no run folder holding only a ledger.
        if (folder) folder->release_if_unused();
        throw;
      }
      if (task.fit) {
        const auto summary = task.fit(dir);
        train::write_fitted_run(request, dir, summary);
        if (o->json)
          print_json(summary);
        else
          std::printf("%s", train::run_summary_text(summary, dir, task.test_label).c_str());
        return 0;
      }
      const auto result = train::execute_run(request, dir, resume, task.splits, task.hooks);
      if (result.interrupted) return kExitInterrupted;
      if (!writer) return 0;
      if (o->json)
        print_json(result.summary);
      else
        std::printf("%s", train::run_summary_text(result.summary, dir, task.test_label).c_str());
      return 0;
    };
  });
}

}  // namespace qkv::cli
