#include "qkv/train/optim.h"

#include <algorithm>

#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"

namespace qkv::train {

void OptimConfig::validate() const {
  if (optimizer != "adam" && optimizer != "adamw" && optimizer != "sgd")
    throw ConfigError("optimizer", optimizer + ": expected adam, adamw or sgd");
  if (schedule != "constant" && schedule != "step" && schedule != "cosine")
    throw ConfigError("schedule", schedule + ": expected constant, step or cosine");
  if (!(lr > 0) || !std::isfinite(lr)) throw ConfigError("lr", "must be a positive number");
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) throw ConfigError("weight_decay", "must be >= 0");
  if (!(momentum >= 0 && momentum < 1)) throw ConfigError("momentum", "must be in [0, 1)");
  if (step_size < 1) throw ConfigError("step_size", "must be at least 1");
  if (step_offset < 0) throw ConfigError("step_offset", "must be >= 0");
  if (!(gamma > 0 && gamma <= 1)) throw ConfigError("gamma", "must be in (0, 1]");
  if (!(min_lr >= 0 && min_lr <= lr)) throw ConfigError("min_lr", "must be in [0, lr]");
  if (warmup_epochs < 0) throw ConfigError("warmup_epochs", "must be >= 0");
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& params,
                                                        const OptimConfig& c) {
  c.validate();
  if (c.optimizer == "adam")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  if (c.optimizer == "adamw")
    return std::make_unique<torch::optim::AdamW>(params,
                                                 torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
  return std::make_unique<torch::optim::SGD>(
      params, torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
}

double lr_at(const OptimConfig& c, int64_t epoch, int64_t epochs) {
  if (epoch < c.warmup_epochs) return c.lr * static_cast<double>(epoch + 1) / static_cast<double>(c.warmup_epochs + 1);
  const int64_t e = epoch - c.warmup_epochs;
  const int64_t span = std::max<int64_t>(1, epochs - c.warmup_epochs);
  if (c.schedule == "step")
    return std::max(c.min_lr, c.lr * std::pow(c.gamma, static_cast<double>((e + c.step_offset) / c.step_size)));
  if (c.schedule == "cosine")
    return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(e) / static_cast<double>(span)));
  return c.lr;
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace qkv::train
