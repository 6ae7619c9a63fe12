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
#include "qkv/train/progress.h"
#include "qkv/train/report.h"

namespace qkv::train {
namespace {

using Clock = std::chrono::steady_clock;

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

void write_metrics_jsonl(const RunPaths& paths, const nlohmann::json& history) {
  std::string text;
  for (const auto& row : history) text += row.dump() + "\n";
  write_file_atomic(paths.metrics(), text);
}

void print_epoch_line(const nlohmann::json& row, int64_t epochs) {
  std::string line = "epoch " + std::to_string(row.at("epoch").get<int64_t>()) + "/" + std::to_string(epochs);
  char buf[64];
  for (const auto& item : row.items()) {
    if (item.key() == "epoch" || item.key() == "seconds" || !item.value().is_number()) continue;
    std::snprintf(buf, sizeof buf, item.key() == "lr" ? " %s %.3g" : " %s %.4f", item.key().c_str(),
                  item.value().get<double>());
    line += buf;
  }
  std::snprintf(buf, sizeof buf, " (%.1f s)", row.value("seconds", 0.0));
  line += buf;
  std::fprintf(stderr, "%s\n", line.c_str());
}

nlohmann::json prefixed(const std::string& prefix, const nlohmann::json& metrics) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& item : metrics.items()) out[prefix + item.key()] = item.value();
  return out;
}

}  // namespace

void TrainConfig::validate() const {
  if (epochs < 1) throw UsageError("--epochs must be at least 1 (got " + std::to_string(epochs) + ")");
  if (batch_size < 1) throw UsageError("--batch-size must be at least 1 (got " + std::to_string(batch_size) + ")");
  if (eval_batch_size < 0) throw UsageError("--eval-batch-size must be >= 0");
  if (!(clip_grad_norm >= 0)) throw UsageError("--clip-grad-norm must be >= 0");
  if (!(label_smoothing >= 0 && label_smoothing < 1)) throw UsageError("--label-smoothing must be in [0, 1)");
  optim.validate();
}

nlohmann::json TrainConfig::to_json() const {
  return {{"epochs", epochs},
          {"batch_size", batch_size},
          {"eval_batch_size", eval_batch_size},
          {"drop_last", drop_last},
          {"optimizer", optim.optimizer},
          {"lr", optim.lr},
          {"weight_decay", optim.weight_decay},
          {"momentum", optim.momentum},
          {"schedule", optim.schedule},
          {"step_size", optim.step_size},
          {"gamma", optim.gamma},
          {"min_lr", optim.min_lr},
          {"warmup_epochs", optim.warmup_epochs},
          {"clip_grad_norm", clip_grad_norm},
          {"label_smoothing", label_smoothing},
          {"select_metric", select_metric},
          {"seed", seed}};
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  TrainConfig c;
  c.epochs = j.at("epochs");
  c.batch_size = j.at("batch_size");
  c.eval_batch_size = j.at("eval_batch_size");
  c.drop_last = j.at("drop_last");
  c.optim.optimizer = j.at("optimizer");
  c.optim.lr = j.at("lr");
  c.optim.weight_decay = j.at("weight_decay");
  c.optim.momentum = j.at("momentum");
  c.optim.schedule = j.at("schedule");
  c.optim.step_size = j.at("step_size");
  c.optim.gamma = j.at("gamma");
  c.optim.min_lr = j.at("min_lr");
  c.optim.warmup_epochs = j.at("warmup_epochs");
  c.clip_grad_norm = j.at("clip_grad_norm");
  c.label_smoothing = j.at("label_smoothing");
  c.select_metric = j.at("select_metric");
  c.seed = j.at("seed");
  return c;
}

nlohmann::json evaluate(models::Model& model, const data::Dataset& dataset, int64_t batch_size, c10::Device device,
                        const MetricFactory& metrics) {
  auto accumulator = metrics_or_default(metrics)();
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double loss_sum = 0, weight = 0;
  const int64_t n = dataset.size();
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    std::vector<int64_t> idx;
    for (int64_t i = begin; i < std::min(n, begin + batch_size); ++i) idx.push_back(i);
    auto batch = dataset.get(idx).to(device);
    auto logits = model.forward(batch);
    const double scored = (batch.target != kIgnoreIndex).sum().item<double>();
    if (scored > 0) {
      loss_sum += classification_loss(logits, batch.target, 0.0).item<double>() * scored;
      weight += scored;
    }
    accumulator->add(logits.detach(), batch.target);
  }
  model.train(was_training);
  nlohmann::json out = {{"loss", weight > 0 ? loss_sum / weight : 0.0}};
  out.update(accumulator->result());
  return out;
}

TrainResult train(models::Model& model, const data::Splits& splits, const TrainConfig& config, c10::Device device,
                  const std::string& out_dir, const nlohmann::json& run_config, bool resume,
                  const TrainHooks& hooks) {
  config.validate();
  const int64_t n_train = splits.train->size();
  if (n_train == 0) throw DataError("the training split is empty");
  const bool have_val = splits.val && splits.val->size() > 0;
  const int64_t eval_batch = config.eval_batch_size > 0 ? config.eval_batch_size : config.batch_size;
  const int64_t batches = config.drop_last && n_train >= config.batch_size
                              ? n_train / config.batch_size
                              : (n_train + config.batch_size - 1) / config.batch_size;

  RunPaths paths{out_dir};
  make_directories(paths.dir + "/checkpoints");
  model.to(device);
  auto optimizer = make_optimizer(model.parameters(), config.optim);

  TrainState state;
  if (resume) {
    state = load_checkpoint(paths.last_checkpoint(), model, optimizer.get());
    if (!hooks.quiet)
      std::fprintf(stderr, "resuming %s at epoch %lld, step %lld\n", paths.last_checkpoint().c_str(),
                   static_cast<long long>(state.epoch + 1), static_cast<long long>(state.step_in_epoch));
  }
  state.run_config = run_config;
  write_file_atomic(paths.config(), run_config.dump(2) + "\n");

  const std::string select_key = "val_" + config.select_metric;
  const bool minimise = lower_is_better(config.select_metric);
  int64_t steps_this_call = 0;
  auto save_progress = [&](const nlohmann::json& summary) {
    save_checkpoint(paths.last_checkpoint(), model, optimizer.get(), state);
    write_metrics_jsonl(paths, state.history);
    write_report_html(paths.report(), hooks.title, state.history, summary, run_config);
  };

  for (int64_t epoch = state.epoch; epoch < config.epochs; ++epoch) {
    const double lr = lr_at(config.optim, epoch, config.epochs);
    set_lr(*optimizer, lr);
    const auto order = epoch_order(n_train, config.seed, epoch);
    model.train();
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(config.epochs), batches,
                    hooks.live_progress);
    auto epoch_start = Clock::now();
    for (int64_t b = state.step_in_epoch; b < batches; ++b) {
      const int64_t begin = b * config.batch_size;
      const int64_t end = std::min(n_train, begin + config.batch_size);
      std::vector<int64_t> idx(order.begin() + begin, order.begin() + end);
      auto batch = splits.train->get(idx);
      if (hooks.augment) batch = hooks.augment(batch);
      batch = batch.to(device);

      auto logits = model.forward(batch);
      auto loss = classification_loss(logits, batch.target, config.label_smoothing);
      const double loss_value = loss.item<double>();
      if (!std::isfinite(loss_value))
        throw DataError("training diverged: loss is " + std::to_string(loss_value) + " at epoch " +
                        std::to_string(epoch + 1) + ", step " + std::to_string(b + 1) +
                        " (check the input data for NaN, or lower --lr)");
      optimizer->zero_grad();
      loss.backward();
      if (config.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(model.parameters(), config.clip_grad_norm);
      optimizer->step();

      {
        torch::NoGradGuard no_grad;
        auto flat_target = batch.target.reshape({-1});
        auto scored = flat_target != kIgnoreIndex;
        const double count = scored.sum().item<double>();
        auto predicted = logits.reshape({-1, logits.size(-1)}).argmax(-1);
        state.partial_correct += ((predicted == flat_target) & scored).sum().item<double>();
        state.partial_loss_sum += loss_value * count;
        state.partial_count += count;
      }
      state.step_in_epoch = b + 1;
      ++state.global_step;
      ++steps_this_call;
      bar.update(b + 1, state.partial_count > 0 ? state.partial_loss_sum / state.partial_count : 0.0);

      const bool stop = interrupt_requested() || (hooks.stop_after_steps >= 0 && steps_this_call >= hooks.stop_after_steps);
      if (stop && state.step_in_epoch < batches) {
        bar.clear();
        state.partial_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
        state.train_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
        save_progress({{"interrupted", true}, {"epoch", epoch + 1}, {"step_in_epoch", state.step_in_epoch}});
        if (!hooks.quiet)
          std::fprintf(stderr, "interrupted: checkpoint written to %s (resume with --resume %s)\n",
                       paths.last_checkpoint().c_str(), paths.dir.c_str());
        return {true, nlohmann::json{{"interrupted", true}}};
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
      row.update(prefixed("val_", evaluate(model, *splits.val, eval_batch, device, hooks.metrics)));
      if (!row.contains(select_key))
        throw UsageError("--select-metric " + config.select_metric + ": the validation metrics have no '" +
                         config.select_metric + "'");
    }
    row["seconds"] = seconds;
    state.history.push_back(row);
    state.epoch = epoch + 1;
    state.step_in_epoch = 0;
    state.partial_loss_sum = state.partial_count = state.partial_correct = state.partial_seconds = 0;

    if (have_val) {
      const double value = row.at(select_key).get<double>();
      const bool better = state.best_epoch < 0 || (minimise ? value < state.best_value : value > state.best_value);
      if (better) {
        state.best_epoch = epoch + 1;
        state.best_value = value;
        save_checkpoint(paths.best_checkpoint(), model, nullptr, state);
      }
    }
    save_progress({{"epochs_done", state.epoch}, {"best_epoch", state.best_epoch}});
    if (!hooks.quiet) print_epoch_line(row, config.epochs);
    if (interrupt_requested()) {
      if (!hooks.quiet)
        std::fprintf(stderr, "interrupted: checkpoint written to %s (resume with --resume %s)\n",
                     paths.last_checkpoint().c_str(), paths.dir.c_str());
      return {true, nlohmann::json{{"interrupted", true}}};
    }
  }

  // Model selection: the best validation epoch's weights, or the last epoch's
  // when there is no validation split. Test data is only looked at here.
  nlohmann::json summary = {{"epochs", state.epoch},
                            {"train_seconds", state.train_seconds},
                            {"parameters", models::count_parameters(model)}};
  const MetricFactory& final_metrics = hooks.final_metrics ? hooks.final_metrics : hooks.metrics;
  if (have_val && state.best_epoch > 0) {
    load_checkpoint(paths.best_checkpoint(), model, nullptr);
    summary["selected_epoch"] = state.best_epoch;
    summary["selected_by"] = select_key + (minimise ? " (min)" : " (max)");
    summary["val"] = evaluate(model, *splits.val, eval_batch, device, final_metrics);
  } else {
    summary["selected_epoch"] = state.epoch;
    summary["selected_by"] = "last epoch (no validation split)";
    save_checkpoint(paths.best_checkpoint(), model, nullptr, state);
  }
  if (!state.history.empty()) summary["final_train_loss"] = state.history.back().at("train_loss");
  if (splits.test && splits.test->size() > 0)
    summary["test"] = evaluate(model, *splits.test, eval_batch, device, final_metrics);
  for (const auto& [name, dataset] : hooks.extra_tests)
    if (dataset && dataset->size() > 0)
      summary["test_" + name] = evaluate(model, *dataset, eval_batch, device, final_metrics);
  write_file_atomic(paths.summary(), summary.dump(2) + "\n");
  write_metrics_jsonl(paths, state.history);
  write_report_html(paths.report(), hooks.title, state.history, summary, run_config);
  return {false, summary};
}

}  // namespace qkv::train
