#include "qkv/train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/core/interrupt.h"
#include "qkv/core/json_file.h"
#include "qkv/core/messages.h"
#include "qkv/core/output_policy.h"
#include "qkv/core/text.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/runtime/allocator.h"
#include "qkv/train/progress.h"
#include "qkv/train/report.h"
#include "qkv/train/run.h"

namespace qkv::train {
namespace {

using Clock = std::chrono::steady_clock;

// Called from a handler of `e`: LibTorch's out-of-memory error (CPU or CUDA)
// becomes a DataError of one line saying `where` and `advice`; any other error
// passes on.
[[noreturn]] void rethrow_out_of_memory(const c10::Error& e, const std::string& where, const std::string& advice) {
  const auto line = out_of_memory_line(e.what_without_backtrace(), where, advice);
  if (line.empty()) throw;
  throw DataError(line);
}

MetricFactory metrics_or_default(const MetricFactory& f) {
  if (f) return f;
  return [] { return std::make_unique<AccuracyMetric>(); };
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(epoch)};
  std::mt19937_64 rng(seq);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

bool lower_is_better(const std::string& metric) { return metric == "loss"; }

// Whether some layer of `model` keeps running statistics (batch norm's running_mean).
bool has_running_statistics(torch::nn::Module& model) {
  for (const auto& buffer : model.named_buffers(/*recurse=*/true))
    if (ends_with(buffer.key(), "running_mean")) return true;
  return false;
}

// metrics.jsonl, a line an epoch, rewritten whole after each (atomically, as
// every file of a run) from lines kept as they were first printed: an epoch
// costs the write of the file, not the printing of every earlier row again.
class MetricsLines {
 public:
  void write(const RunPaths& paths, const nlohmann::json& history) {
    for (; rows_ < history.size(); ++rows_) text_ += history[rows_].dump() + "\n";
    write_file_atomic(paths.metrics(), text_);
  }

 private:
  std::string text_;
  size_t rows_ = 0;
};

void print_epoch_line(const nlohmann::json& row, int64_t epochs) { say_as_is(epoch_line_text(row, epochs)); }

// Sums an accumulator's counts over ranks (shorter vectors padded with zeros).
void reduce_metric(MetricAccumulator& accumulator, distributed::ProcessGroup& group) {
  auto totals = accumulator.totals();
  auto length = torch::tensor({static_cast<double>(totals.size())}, torch::kDouble);
  group.all_reduce_max(length, "evaluation");
  totals.resize(static_cast<size_t>(length.item<double>()), 0.0);
  if (totals.empty()) return;
  auto t = torch::tensor(totals, torch::kDouble);
  group.all_reduce_sum(t, "evaluation");
  accumulator.load_totals(std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()));
}

// The global RNG states of every rank but 0, for the checkpoint (collective).
std::vector<at::Tensor> gather_rank_rng(distributed::ProcessGroup* group) {
  if (!group) return {};
  auto all = group->all_gather(global_rng_state(), "checkpoint RNG gather");
  return std::vector<at::Tensor>(all.begin() + 1, all.end());
}

// An epoch's row keeps the scalar metrics only: per-class tables and
// confusion matrices (40 x 40 for ModelNet40) are in summary.json once, not
// in every line of metrics.jsonl.
nlohmann::json prefixed(const std::string& prefix, const nlohmann::json& metrics) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& item : metrics.items())
    if (item.value().is_primitive()) out[prefix + item.key()] = item.value();
  return out;
}

}  // namespace

std::string epoch_line_text(const nlohmann::json& row, int64_t epochs, size_t width) {
  std::string line = "epoch " + std::to_string(row.at("epoch").get<int64_t>()) + "/" + std::to_string(epochs);
  std::vector<std::string> parts;
  char buf[96];
  for (const auto& item : row.items()) {
    if (item.key() == "epoch" || item.key() == "seconds" || !item.value().is_number()) continue;
    if (item.value().is_number_integer())  // counts (val_shapes, tokens) read as counts, not 4.0000
      std::snprintf(buf, sizeof buf, " %s %lld", item.key().c_str(), item.value().get<long long>());
    else
      std::snprintf(buf, sizeof buf, item.key() == "lr" ? " %s %.3g" : " %s %.4f", item.key().c_str(),
                    item.value().get<double>());
    parts.push_back(buf);
  }
  std::snprintf(buf, sizeof buf, " (%.1f s)", row.value("seconds", 0.0));
  parts.push_back(buf);
  size_t total = line.size();
  for (const auto& p : parts) total += p.size();
  // Too wide for a terminal: the validation metrics (and what follows) go on
  // a second line, indented.
  const bool wrap = total > width;
  bool wrapped = false;
  for (const auto& p : parts) {
    if (wrap && !wrapped && p.rfind(" val_", 0) == 0) {
      line += "\n   ";
      wrapped = true;
    }
    line += p;
  }
  return line;
}

void TrainConfig::validate() const {
  check_field_ranges(*this);  // the optimizer's fields too
  if (label_smoothing_over == "others" && label_smoothing > 0.5)
    throw ConfigError("label_smoothing",
                      "must be at most 0.5 when spread over the other classes (two classes would swap)");
  if (bn_momentum_min > bn_momentum) throw ConfigError("bn_momentum_min", "must be at most {bn_momentum}");
  optim.validate();
}

double batch_norm_momentum_at(const TrainConfig& c, int64_t epoch) {
  const double decays = static_cast<double>(epoch / std::max<int64_t>(1, c.optim.step_size));
  return std::max(c.bn_momentum_min, c.bn_momentum * std::pow(c.bn_momentum_gamma, decays));
}

void set_batch_norm_momentum(torch::nn::Module& module, double momentum) {
  auto set = [momentum](torch::nn::Module* m) {
    if (auto* sync = dynamic_cast<layers::SyncBatchNormImpl*>(m)) sync->momentum = momentum;
    if (auto* b = dynamic_cast<torch::nn::BatchNorm1dImpl*>(m)) b->options.momentum(momentum);
    if (auto* b = dynamic_cast<torch::nn::BatchNorm2dImpl*>(m)) b->options.momentum(momentum);
    if (auto* b = dynamic_cast<torch::nn::BatchNorm3dImpl*>(m)) b->options.momentum(momentum);
  };
  set(&module);  // the module itself need not live in a shared_ptr, which modules(true) demands
  for (const auto& m : module.modules(/*include_self=*/false)) set(m.get());
}

nlohmann::json evaluate(models::Model& model, const data::Dataset& dataset, int64_t batch_size, c10::Device device,
                        const MetricFactory& metrics, distributed::ProcessGroup* group) {
  auto accumulator = metrics_or_default(metrics)();
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double loss_sum = 0, weight = 0;
  const int64_t world = group ? group->world_size() : 1, rank = group ? group->rank() : 0;
  const int64_t first = dataset.size() * rank / world, n = dataset.size() * (rank + 1) / world;
  // Shown only when an evaluation runs past a second: a small validation set each epoch leaves no flicker.
  const int64_t batches = (n - first + batch_size - 1) / batch_size;
  ProgressBar bar("evaluating", batches, rank == 0 && ProgressBar::stderr_is_terminal(), /*delay_seconds=*/1.0);
  for (int64_t begin = first; begin < n; begin += batch_size) {
    std::vector<int64_t> idx;
    for (int64_t i = begin; i < std::min(n, begin + batch_size); ++i) idx.push_back(i);
    try {
      auto batch = dataset.get(idx).to(device);
      auto logits = model.forward(batch);
      const double scored = (batch.target != kIgnoreIndex).sum().item<double>();
      if (scored > 0) {
        loss_sum += classification_loss(logits, batch.target, 0.0).item<double>() * scored;
        weight += scored;
      }
      accumulator->add(logits.detach(), batch.target);
    } catch (const c10::Error& e) {
      rethrow_out_of_memory(e,
                            "evaluating batch " + std::to_string((begin - first) / batch_size + 1) + " of " +
                                std::to_string(batches) + " at batch size " + std::to_string(batch_size) +
                                (group ? " per rank" : ""),
                            "a smaller {eval_batch_size} may fit");
    }
    bar.update((begin - first) / batch_size + 1, weight > 0 ? loss_sum / weight : 0.0);
  }
  bar.clear();
  model.train(was_training);
  if (group && world > 1) {
    auto sums = torch::tensor({loss_sum, weight}, torch::kDouble);
    group->all_reduce_sum(sums, "evaluation");
    loss_sum = sums[0].item<double>();
    weight = sums[1].item<double>();
    reduce_metric(*accumulator, *group);
  }
  nlohmann::json out = {{"loss", weight > 0 ? loss_sum / weight : 0.0}};
  out.update(accumulator->result());
  return out;
}

int64_t stored_run_eval_batch_size(const nlohmann::json& run_config, int64_t requested) {
  if (requested > 0) return requested;
  const auto config = TrainConfig::from_json(run_config.at("train"));
  return config.eval_batch_size > 0 ? config.eval_batch_size : config.batch_size;
}

void check_resume_world_size(const std::string& dir, int64_t stored, int64_t now) {
  if (stored != now)
    throw ConfigError("resume", dir + ": the run was trained by " + std::to_string(stored) +
                                    " rank(s); resume it with {world_size} " + std::to_string(stored) + ", not " +
                                    std::to_string(now));
}

void refuse_batches_of_one(torch::nn::Module& model, int64_t batch_size) {
  if (batch_size < 2 && has_running_statistics(model))
    throw ConfigError("batch_size", std::to_string(batch_size) +
                                        ": this model's batch norm needs at least 2 samples per training batch");
}

TrainingBatches plan_training_batches(torch::nn::Module& model, const data::Splits& splits, const TrainConfig& config,
                                      int64_t world, const MetricFactory& metrics) {
  const int64_t n_train = splits.train->size();
  if (n_train == 0) throw DataError("the training split is empty");
  if (n_train < world)
    throw DataError("the training split has " + std::to_string(n_train) + " samples, fewer than the " +
                    std::to_string(world) + " ranks");
  // A global batch is batch_size samples per rank; rank r takes the r-th slice.
  const int64_t global_batch = config.batch_size * world;
  int64_t batches = config.drop_last && n_train >= global_batch ? n_train / global_batch
                                                                : (n_train + global_batch - 1) / global_batch;
  // A last partial batch that would give a rank fewer than two samples is
  // skipped: batch norm's statistics need two (PyTorch's BatchNorm raises on
  // one; here the running variance would turn NaN and stay so).
  if (batches > 1 && n_train % global_batch != 0 && n_train % global_batch < 2 * world) --batches;
  // The selection metric is one evaluate() gives (the loss and the metric's
  // numbers), with or without a validation split.
  nlohmann::json names_of = metrics_or_default(metrics)()->result();
  names_of["loss"] = 0.0;
  if (!names_of.contains(config.select_metric) || !names_of.at(config.select_metric).is_number()) {
    std::string names;
    for (const auto& item : names_of.items())
      if (item.value().is_number()) names += (names.empty() ? "" : ", ") + item.key();
    throw ConfigError("select_metric", config.select_metric + ": the validation metrics have no '" +
                                           config.select_metric + "'; this run's are " + names);
  }
  // Every batch must give each rank two samples where the model has batch
  // norm: with one, the running variance turns NaN and the run trains on for
  // nothing.
  const int64_t smallest_batch = std::min(global_batch, n_train - (batches - 1) * global_batch) / world;
  if (smallest_batch < 2 && has_running_statistics(model)) {
    refuse_batches_of_one(model, config.batch_size);
    throw DataError("the training split has " + counted(n_train, "sample") + ", and this model's batch norm needs " +
                    "at least 2 per rank in every training batch");
  }
  return {global_batch, batches};
}

TrainResult train(models::Model& model, const data::Splits& splits, const TrainConfig& config, c10::Device device,
                  const std::string& out_dir, const nlohmann::json& run_config, bool resume, const TrainHooks& hooks) {
  config.validate();
  distributed::ProcessGroup* group = hooks.group && hooks.group->world_size() > 1 ? hooks.group : nullptr;
  const int64_t world = group ? group->world_size() : 1, rank = group ? group->rank() : 0;
  const bool writer = rank == 0;  // rank 0 alone writes the run folder
  const bool quiet = hooks.quiet || !writer;
  layers::RankSumAttachment batch_norm_ranks(model, group);  // SyncBatchNorm layers sum their statistics over the ranks

  const int64_t n_train = splits.train->size();
  const bool have_val = splits.val && splits.val->size() > 0;
  const int64_t eval_batch = config.eval_batch_size > 0 ? config.eval_batch_size : config.batch_size;
  const TrainingBatches plan = plan_training_batches(model, splits, config, world, hooks.metrics);
  const int64_t global_batch = plan.global_batch, batches = plan.batches;
  auto rank_slice = [&](int64_t b) {
    const int64_t begin = b * global_batch, size = std::min(n_train, begin + global_batch) - begin;
    return std::make_pair(begin + size * rank / world, begin + size * (rank + 1) / world);
  };

  RunPaths paths{out_dir};
  const std::string interrupted_line =
      "interrupted: checkpoint written to " + paths.last_checkpoint() +
      (hooks.resume_hint ? " (resume with {resume} " + paths.dir + ")" : std::string());
  if (writer) {
    make_directories(paths.dir + "/checkpoints");
    // A run killed mid-checkpoint left its temporary behind; nothing else
    // writes into this run's folder while it trains.
    remove_stale_temps_of_ledger(paths.dir);
  }
  model.to(device);
  auto optimizer = make_optimizer(model.parameters(), config.optim);

  TrainState state;
  if (resume) {
    if (group) {
      // Rank 0 reads the file and every rank restores from its bytes: one
      // state for all, even where another machine's copy is stale.
      std::string bytes;
      if (writer) {
        const auto file = read_file_bytes(paths.last_checkpoint());
        bytes.assign(file.begin(), file.end());
      }
      bytes = group->broadcast_bytes(bytes, 0);
      state = load_checkpoint_bytes(std::vector<char>(bytes.begin(), bytes.end()), paths.last_checkpoint(), model,
                                    optimizer.get());
    } else {
      state = load_checkpoint(paths.last_checkpoint(), model, optimizer.get());
    }
    check_resume_world_size(paths.dir, state.world_size, world);
    if (rank > 0) {
      if (state.rank_rng.size() != static_cast<size_t>(world - 1))
        throw DataError(paths.last_checkpoint() + ": checkpoint lacks the RNG state of rank " + std::to_string(rank));
      set_global_rng_state(state.rank_rng[static_cast<size_t>(rank - 1)]);
    }
    if (!quiet)
      say_as_is("resuming " + paths.last_checkpoint() + " at epoch " + std::to_string(state.epoch + 1) + ", step " +
                std::to_string(state.step_in_epoch));
  } else if (rank > 0) {
    // Augmentation and dropout draw from the global RNG: each rank its own
    // stream (rank 0 keeps the one a single-process run would use).
    torch::manual_seed(config.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank));
  }
  if (group) group->broadcast_module(model, 0);  // one starting point, whatever each rank built
  state.run_config = run_config;
  if (resume && state.run_config.contains("resumes") && state.run_config["resumes"].is_array() &&
      !state.run_config["resumes"].empty())
    state.run_config["resumes"].back()["from_epoch"] = state.epoch;
  state.world_size = world;
  if (writer) write_file_atomic(paths.config(), json_text(state.run_config) + "\n");

  const std::string select_key = "val_" + config.select_metric;
  const bool minimise = lower_is_better(config.select_metric);
  int64_t steps_this_call = 0;
  MetricsLines metrics_lines;  // state.history only grows from here on
  auto save_progress = [&](const nlohmann::json& summary) {
    state.rank_rng = gather_rank_rng(group);  // collective: every rank calls it
    if (!writer) return;
    save_checkpoint(paths.last_checkpoint(), model, optimizer.get(), state);
    metrics_lines.write(paths, state.history);
    write_report_html(paths.report(), hooks.title, state.history, summary, state.run_config);
  };
  auto interrupted = [&](bool local) { return group ? group->any(local, "interrupt check") : local; };

  bool stopped_early = false;
  for (int64_t epoch = state.epoch; epoch < config.epochs; ++epoch) {
    const double lr = lr_at(config.optim, epoch, config.epochs);
    set_lr(*optimizer, lr);
    set_batch_norm_momentum(model, batch_norm_momentum_at(config, epoch));
    const auto order = epoch_order(n_train, config.seed, epoch);
    model.train();
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config.epochs), batches,
                    hooks.live_progress && writer);
    auto epoch_start = Clock::now();
    for (int64_t b = state.step_in_epoch; b < batches; ++b) {
      try {
        const auto [begin, end] = rank_slice(b);
        std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
        auto batch = splits.train->get(idx);
        if (hooks.augment) batch = hooks.augment(batch);
        batch = batch.to(device);

        auto logits = model.forward(batch);
        auto loss =
            classification_loss(logits, batch.target, config.label_smoothing, config.label_smoothing_over == "others");
        double count = 0, correct = 0;
        {
          torch::NoGradGuard no_grad;
          auto flat_target = batch.target.reshape({-1});
          auto scored = flat_target != kIgnoreIndex;
          count = scored.sum().item<double>();
          auto predicted = hooks.predict ? hooks.predict(batch, logits).reshape({-1})
                                         : logits.reshape({-1, logits.size(-1)}).argmax(-1);
          correct = ((predicted == flat_target) & scored).sum().item<double>();
        }
        double loss_sum = count > 0 ? loss.item<double>() * count : 0.0;
        const bool stop_here =
            interrupt_requested() || (hooks.stop_after_steps >= 0 && steps_this_call + 1 >= hooks.stop_after_steps);
        bool stop = stop_here;
        double weight = 1.0;  // this rank's share of the global batch's scored targets
        if (group) {
          auto sums = torch::tensor({count, loss_sum, correct, stop_here ? 1.0 : 0.0}, torch::kDouble);
          group->all_reduce_sum(sums, "training step");
          weight = sums[0].item<double>() > 0 ? count / sums[0].item<double>() : 0.0;
          count = sums[0].item<double>();
          loss_sum = sums[1].item<double>();
          correct = sums[2].item<double>();
          stop = sums[3].item<double>() > 0;
        }
        const double loss_value = count > 0 ? loss_sum / count : loss.item<double>();
        if (!std::isfinite(loss_value))
          throw DataError("training diverged: loss is " + std::to_string(loss_value) + " at epoch " +
                          std::to_string(epoch + 1) + ", step " + std::to_string(b + 1) +
                          " (check the input data for NaN, or lower {lr})");
        optimizer->zero_grad();
        if (group) {
          // Sum over ranks of (share x local mean) = the mean over the global batch.
          // A rank with nothing to score still runs backward: the batch-norm
          // gradients are collectives every rank must join.
          (weight > 0 ? loss * weight : logits.sum() * 0.0).backward();
          group->all_reduce_gradients(model.parameters());
        } else {
          loss.backward();
        }
        if (config.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(model.parameters(), config.clip_grad_norm);
        optimizer->step();

        state.partial_correct += correct;
        state.partial_loss_sum += loss_sum;
        state.partial_count += count;
        state.step_in_epoch = b + 1;
        ++state.global_step;
        ++steps_this_call;
        bar.update(b + 1, state.partial_count > 0 ? state.partial_loss_sum / state.partial_count : 0.0);

        if (stop && state.step_in_epoch < batches) {
          bar.clear();
          state.partial_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
          state.train_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
          save_progress({{"interrupted", true}, {"epoch", epoch + 1}, {"step_in_epoch", state.step_in_epoch}});
          if (!quiet) say(interrupted_line);
          return {true, nlohmann::json{{"interrupted", true}}};
        }
      } catch (const c10::Error& e) {
        // Out of (GPU) memory: one line naming the step and the batch size; the
        // checkpoints written so far are untouched, so --resume continues.
        rethrow_out_of_memory(e,
                              "in training step " + std::to_string(b + 1) + " of epoch " + std::to_string(epoch + 1) +
                                  " at batch size " + std::to_string(config.batch_size) + (group ? " per rank" : ""),
                              "a smaller {batch_size} may fit; checkpoints written so far are intact, and `train "
                              "--resume` continues from the last");
      }
    }
    bar.clear();

    const double seconds = state.partial_seconds + std::chrono::duration<double>(Clock::now() - epoch_start).count();
    state.train_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
    nlohmann::json row = {{"epoch", epoch + 1},
                          {"lr", lr},
                          {"train_loss", state.partial_loss_sum / std::max(1.0, state.partial_count)},
                          {"train_accuracy", state.partial_correct / std::max(1.0, state.partial_count)}};
    if (have_val) {
      row.update(prefixed("val_", evaluate(model, *splits.val, eval_batch, device, hooks.metrics, group)));
    }
    row["seconds"] = seconds;
    state.history.push_back(row);
    state.epoch = epoch + 1;
    state.step_in_epoch = 0;
    state.partial_loss_sum = state.partial_count = state.partial_correct = state.partial_seconds = 0;

    if (have_val) {
      const double value = row.at(select_key).get<double>();
      // A finite value replaces a NaN one (a diverged first epoch); NaN never replaces anything.
      const bool better = state.best_epoch < 0 || (std::isnan(state.best_value) && !std::isnan(value)) ||
                          (minimise ? value < state.best_value : value > state.best_value);
      if (better) {
        state.best_epoch = epoch + 1;
        state.best_value = value;
        if (writer) save_checkpoint(paths.best_checkpoint(), model, nullptr, state);
      }
    }
    save_progress({{"epochs_done", state.epoch}, {"best_epoch", state.best_epoch}});
    // Freed pages beyond a bound go back to the system once an epoch, so that
    // a long run's memory stays bounded while each step reuses the last's.
    release_cached_memory_above(cached_memory_bound());
    if (!quiet) print_epoch_line(row, config.epochs);
    if (have_val && config.patience > 0 && state.epoch - state.best_epoch >= config.patience) {
      stopped_early = true;
      break;
    }
    if (interrupted(interrupt_requested())) {
      if (!quiet) say(interrupted_line);
      return {true, nlohmann::json{{"interrupted", true}}};
    }
  }

  // Model selection: the best validation epoch's weights, or the last epoch's
  // when there is no validation split. Test data is only looked at here.
  nlohmann::json summary = {
      {"epochs", state.epoch}, {"train_seconds", state.train_seconds}, {"parameters", models::count_parameters(model)}};
  if (world > 1) summary["world_size"] = world;
  if (stopped_early) summary["stopped_early"] = true;
  const MetricFactory& final_metrics = hooks.final_metrics ? hooks.final_metrics : hooks.metrics;
  if (have_val && state.best_epoch > 0) {
    // The run's own best epoch, tested as it is even if its statistics diverged.
    if (writer) load_checkpoint(paths.best_checkpoint(), model, nullptr, /*accept_non_finite=*/true);
    if (group) group->broadcast_module(model, 0);
    summary["selected_epoch"] = state.best_epoch;
    summary["selected_by"] = select_key + (minimise ? " (min)" : " (max)");
    summary["val"] = evaluate(model, *splits.val, eval_batch, device, final_metrics, group);
  } else {
    summary["selected_epoch"] = state.epoch;
    summary["selected_by"] = "last epoch (no validation split)";
    if (writer) save_checkpoint(paths.best_checkpoint(), model, nullptr, state);
  }
  if (!state.history.empty()) summary["final_train_loss"] = state.history.back().at("train_loss");
  const models::ModelPtr tester = hooks.test_model ? hooks.test_model(model) : nullptr;
  models::Model& test_with = tester ? *tester : model;
  if (splits.test && splits.test->size() > 0)
    summary["test"] = evaluate(test_with, *splits.test, eval_batch, device, final_metrics, group);
  for (const auto& [name, dataset] : hooks.extra_tests)
    if (dataset && dataset->size() > 0)
      summary["test_" + name] = evaluate(test_with, *dataset, eval_batch, device, final_metrics, group);
  if (writer) {
    write_file_atomic(paths.summary(), json_text(summary) + "\n");
    metrics_lines.write(paths, state.history);
    write_report_html(paths.report(), hooks.title, state.history, summary, state.run_config);
  }
  return {false, summary};
}

}  // namespace qkv::train
