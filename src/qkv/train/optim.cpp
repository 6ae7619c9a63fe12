#include "qkv/train/optim.h"

#include <algorithm>

#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"

namespace qkv::train {

void OptimConfig::validate() const {
  check_field_ranges(*this);
  if (min_lr > lr) throw ConfigError("min_lr", "must be at most {lr}");
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& params, const OptimConfig& c) {
  c.validate();
  if (c.optimizer == "adam")
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  if (c.optimizer == "adamw")
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
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
    return c.min_lr +
           (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(e) / static_cast<double>(span)));
  return c.lr;
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace qkv::train
