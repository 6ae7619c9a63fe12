#include "qkv/cli/train_command.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <set>

#include "qkv/cli/recipe.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/messages.h"
#include "qkv/distributed/process_group.h"

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

tasks::GivenSetting given_on(const CLI::App& cmd) {
  return [&cmd](const std::string& key) {
    const std::string flag = flag_of_key(&cmd, key);
    return !flag.empty() && cmd.count(flag) > 0;
  };
}

void register_train_command(CLI::App* parent, Action& action, TrainTask task,
                            const std::function<void(CLI::App* cmd)>& add_data_options,
                            const std::function<void(CLI::App* cmd)>& add_model_options) {
  auto* cmd = parent->add_subcommand("train", task.description);
  struct Opts {
    CommonOptions common;
    train::TrainConfig train;
    std::string init_weights, resume, recipe;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  o->common.out = task.default_out;
  o->train = task.defaults;
  option_section(cmd, "Run", [&] {
    add_common_options(cmd, o->common, "run folder: config.json, metrics.jsonl, summary.json, report.html, checkpoints/");
    add_recipe_option(cmd, o->recipe, task.command);
    cmd->add_option("--resume", o->resume,
                    "continue the run in this folder from its last checkpoint (only --epochs, --threads, --device and "
                    "the data-parallel options may be given with it)")
        ->check(CLI::ExistingDirectory);
    cmd->add_flag("--json", o->json, "print the whole summary.json at the end instead of a short summary");
  });
  option_section(cmd, "Data", [&] { add_data_options(cmd); });
  option_section(cmd, "Model", [&] {
    add_model_options(cmd);
    cmd->add_option("--init-weights", o->init_weights, "start from a name->tensor .pt dict (export-weights, torch.save)")
        ->check(CLI::ExistingFile);
    add_max_params_option(cmd);
  });
  option_section(cmd, "Training", [&] {
    add_field_options(cmd, o->train, task.batch_norm ? std::set<std::string>{} : kBatchNormFields);
    if (!task.select_metric_shown.empty()) cmd->get_option("--select-metric")->default_str(task.select_metric_shown);
  });
  if (task.data_parallel)
    option_section(cmd, "Data-parallel training (qkv launch, or one process per rank)",
                   [&] { add_parallel_options(cmd, o->train.parallel); });
  auto shared = std::make_shared<TrainTask>(std::move(task));
  cmd->callback([o, cmd, shared, &action] {
    action = [o, cmd, shared] {
      const TrainTask& task = *shared;
      const bool resume = !o->resume.empty();
      // A recipe fills the options left unset before anything reads them; a
      // resumed run keeps its stored settings (check_resume_options refuses --recipe).
      const auto recipe = resume ? nlohmann::json() : apply_recipe(cmd, task.command, o->recipe);
      train::TrainConfig config = o->train;
      if (task.data_parallel) resolve_parallel(*cmd, config);
      CommonOptions common = o->common;
      train::RunRequest request;
      if (resume) {
        check_resume_options(*cmd, o->resume, common.out);
        // Before anything is read or written through a link or a changed file.
        train::RunFolder::check(o->resume, train::RunFolderMode::Resume, task.command, "resume");
        request = train::stored_request(o->resume, task.command);
        if (cmd->count("--device")) request.device = common.device;
      } else {
        request.seed = common.seed;
        request.device = common.device;
        request.init_weights = o->init_weights;
        request.train = config;
        request.train.seed = common.seed;
        request.recipe = recipe;
        request = tasks::new_train_request(task, given_on(*cmd), request, common.out);
      }
      const std::string dir = resume ? o->resume : common.out;
      request.train.parallel.rank = config.parallel.rank;  // where this process runs now
      request.train.parallel.master = config.parallel.master;
      request.train.parallel.timeout_seconds = config.parallel.timeout_seconds;
      common.seed = request.seed;
      common.device = request.device;
      apply_common_options(common);
      if (resume) {
        train::record_resume(request, dir, cmd->count("--epochs") ? config.epochs : 0, config.parallel.world_size);
        const auto note = tasks::finished_run_note(request, dir, cmd->count("--epochs") > 0);
        if (!note.empty()) {
          say(note);
          return 0;
        }
      } else {
        request.train.parallel.world_size = config.parallel.world_size;
      }
      const auto outcome = tasks::run_train_task(task, request, dir, resume, common.overwrite);
      if (outcome.interrupted) return kExitInterrupted;
      if (config.parallel.rank != 0) return 0;
      if (o->json)
        print_json(outcome.summary);
      else
        std::printf("%s", train::run_summary_text(outcome.summary, dir, outcome.test_label).c_str());
      return 0;
    };
  });
}

}  // namespace qkv::cli
