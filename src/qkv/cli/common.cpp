#include "qkv/cli/common.h"

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/runtime.h"
#include "qkv/distributed/process_group.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/progress.h"
#include "qkv/train/weights.h"

namespace qkv::cli {

void add_common_options(CLI::App* cmd, CommonOptions& o, const std::string& out_help) {
  cmd->add_option("--seed", o.seed, "random seed (data, initialisation, order)")->capture_default_str();
  cmd->add_option("--threads", o.threads, "intra-op threads for LibTorch and OpenBLAS; 0 = OMP_NUM_THREADS if set, else one per core")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", o.device, "cpu, or cuda[:N] where LibTorch was built with CUDA")->capture_default_str();
  if (!out_help.empty()) cmd->add_option("--out", o.out, out_help)->capture_default_str();
}

c10::Device apply_common_options(const CommonOptions& o) {
  set_threads(o.threads);
  seed_everything(o.seed);
  return parse_device(o.device);
}

void add_train_options(CLI::App* cmd, train::TrainConfig& c) {
  cmd->add_option("--epochs", c.epochs, "training epochs")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "training mini-batch size")->capture_default_str();
  cmd->add_option("--eval-batch-size", c.eval_batch_size, "evaluation batch size; 0 = --batch-size")
      ->capture_default_str();
  cmd->add_option("--drop-last", c.drop_last, "skip a last partial training batch")->capture_default_str();
  cmd->add_option("--optimizer", c.optim.optimizer, "adam, adamw or sgd (with --momentum)")->capture_default_str();
  cmd->add_option("--lr", c.optim.lr, "learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", c.optim.weight_decay, "weight decay (decoupled for adamw)")->capture_default_str();
  cmd->add_option("--momentum", c.optim.momentum, "sgd momentum")->capture_default_str();
  cmd->add_option("--schedule", c.optim.schedule, "learning-rate schedule: constant, step or cosine (per epoch)")
      ->capture_default_str();
  cmd->add_option("--step-size", c.optim.step_size, "step schedule: epochs between decays")->capture_default_str();
  cmd->add_option("--gamma", c.optim.gamma, "step schedule: decay factor")->capture_default_str();
  cmd->add_option("--min-lr", c.optim.min_lr, "cosine schedule: final learning rate")->capture_default_str();
  cmd->add_option("--warmup-epochs", c.optim.warmup_epochs, "linear warm-up epochs before the schedule")
      ->capture_default_str();
  cmd->add_option("--clip-grad-norm", c.clip_grad_norm, "clip the global gradient L2 norm; 0 = off")
      ->capture_default_str();
  cmd->add_option("--label-smoothing", c.label_smoothing, "label smoothing of the cross-entropy loss")
      ->capture_default_str();
  cmd->add_option("--select-metric", c.select_metric,
                  "validation metric that picks the best epoch (loss is minimised, others maximised)")
      ->capture_default_str();
  cmd->add_option("--patience", c.patience,
                  "stop after this many epochs without a better validation score; 0 = train all epochs")
      ->capture_default_str();
  auto& p = c.parallel;
  cmd->add_option("--world-size", p.world_size,
                  "data-parallel ranks in all (env WORLD_SIZE); --batch-size is per rank")
      ->capture_default_str();
  cmd->add_option("--rank", p.rank, "this process's rank, 0..world-size-1 (env RANK); rank 0 writes the run folder")
      ->capture_default_str();
  cmd->add_option("--master", p.master, "ADDR:PORT where rank 0 serves the rendezvous (env MASTER_ADDR, MASTER_PORT; "
                                        "default 127.0.0.1:29500)");
  cmd->add_option("--dist-timeout", p.timeout_seconds,
                  "seconds to wait for peers at rendezvous and in each collective before failing")
      ->capture_default_str();
}

void resolve_parallel(const CLI::App& cmd, train::TrainConfig& config) {
  std::vector<std::string> on_cli;
  if (cmd.count("--world-size")) on_cli.push_back("world_size");
  if (cmd.count("--rank")) on_cli.push_back("rank");
  if (cmd.count("--master")) on_cli.push_back("master");
  config.parallel = distributed::resolve_parallel_options(config.parallel, on_cli);
}

nlohmann::json make_run_config(const TrainRequest& r, const train::TrainConfig& config, const CommonOptions& common) {
  return {{"qkv_version", qkv_version()},
          {"command", r.command},
          {"seed", common.seed},
          {"threads", at::get_num_threads()},
          {"blas", blas_info()},
          {"device", common.device},
          {"model", {{"name", r.model_name}, {"options", models::find_model(r.model_name).resolve(r.model_options)}}},
          {"data", r.data},
          {"train", config.to_json()},
          {"init_weights", r.init_weights}};
}

nlohmann::json adopt_resumed_run(const std::string& dir, const CLI::App& cmd, CommonOptions& common,
                                 train::TrainConfig& config, TrainRequest& request) {
  const std::string ckpt = train::RunPaths{dir}.last_checkpoint();
  if (!std::filesystem::exists(ckpt)) throw UsageError("--resume " + dir + ": no checkpoint at " + ckpt);
  const auto stored = train::read_checkpoint_config(ckpt);
  if (cmd.count("--out") && common.out != dir)
    throw UsageError("--resume " + dir + " continues in that folder; drop --out");
  if (stored.value("command", "") != request.command)
    throw UsageError("--resume " + dir + ": that run was made by '" + stored.value("command", "?") + "', not '" +
                     request.command + "'");
  try {
    common.out = dir;
    common.seed = stored.at("seed");
    const int64_t epochs = cmd.count("--epochs") ? config.epochs : stored.at("train").at("epochs").get<int64_t>();
    const auto parallel = config.parallel;  // where this process runs now
    config = train::TrainConfig::from_json(stored.at("train"));
    train::check_resume_world_size(dir, config.parallel.world_size, parallel.world_size);
    config.epochs = epochs;
    config.parallel = parallel;
    request.model_name = stored.at("model").at("name");
    request.model_options = stored.at("model").at("options");
  } catch (const nlohmann::json::exception& e) {
    throw DataError(ckpt + ": stored run configuration is incomplete (" + e.what() + ")");
  }
  request.init_weights.clear();
  request.resume = true;
  return stored;
}

models::ModelPtr load_model_from_checkpoint(const std::string& checkpoint, nlohmann::json* run_config,
                                            const std::string& expected_command) {
  auto config = train::read_checkpoint_config(checkpoint);
  if (!expected_command.empty() && config.value("command", "") != expected_command)
    throw DataError(checkpoint + ": made by '" + config.value("command", "?") + "', not by '" + expected_command + "'");
  models::ModelPtr model;
  try {
    model = models::find_model(config.at("model").at("name").get<std::string>()).make(config.at("model").at("options"));
  } catch (const nlohmann::json::exception&) {
    throw DataError(checkpoint + ": checkpoint does not name its model");
  }
  train::load_checkpoint(checkpoint, *model, nullptr);
  if (run_config) *run_config = config;
  return model;
}

void add_eval_options(CLI::App* cmd, EvalOptions& o) {
  cmd->add_option("--checkpoint", o.checkpoint, "checkpoint file (RUN/checkpoints/best.ckpt)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--split", o.split, "train, val or test")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "val", "test"}));
  add_common_options(cmd, o.common, "");
}

const data::DatasetPtr& pick_split(const data::Splits& splits, const std::string& name) {
  if (name == "train") return splits.train;
  if (name == "val") return splits.val;
  if (name == "test") return splits.test;
  throw UsageError("--split " + name + ": expected train, val or test");
}

int run_training(const TrainRequest& r, const data::Splits& splits, const train::TrainConfig& config,
                 const CommonOptions& common, train::TrainHooks hooks) {
  config.validate();
  const c10::Device device = parse_device(common.device);
  auto model = models::find_model(r.model_name).make(r.model_options);
  if (!r.init_weights.empty()) train::load_weights(*model, r.init_weights);
  const nlohmann::json run_config = make_run_config(r, config, common);
  hooks.live_progress = train::ProgressBar::stderr_is_terminal();
  if (hooks.title == "qkv run") hooks.title = "qkv " + r.command + ": " + r.model_name;
  install_interrupt_handler();
  std::unique_ptr<distributed::ProcessGroup> group;
  if (config.parallel.distributed()) {
    group = std::make_unique<distributed::ProcessGroup>(config.parallel);
    hooks.group = group.get();
  }
  const bool writer = config.parallel.rank == 0;
  if (writer)
    std::fprintf(stderr, "%s: model %s (%lld parameters), %lld train / %lld val / %lld test, %d threads, %s\n",
               r.command.c_str(), r.model_name.c_str(), static_cast<long long>(models::count_parameters(*model)),
               static_cast<long long>(splits.train->size()), static_cast<long long>(splits.val->size()),
               static_cast<long long>(splits.test->size()), at::get_num_threads(),
               blas_info().value("name", "unknown BLAS").c_str());
  if (group && writer)
    std::fprintf(stderr, "%s: %lld ranks joined at %s, batch %lld per rank (%lld global)\n", r.command.c_str(),
                 static_cast<long long>(config.parallel.world_size), config.parallel.master.c_str(),
                 static_cast<long long>(config.batch_size),
                 static_cast<long long>(config.batch_size * config.parallel.world_size));
  auto result = train::train(*model, splits, config, device, common.out, run_config, r.resume, hooks);
  if (result.interrupted) return kExitInterrupted;
  if (!writer) return 0;
  std::printf("%s\n", result.summary.dump(2).c_str());
  std::fprintf(stderr, "wrote %s/{config.json,metrics.jsonl,summary.json,report.html,checkpoints/}\n",
               common.out.c_str());
  return 0;
}

}  // namespace qkv::cli
