#pragma once
// Optimizers and learning-rate schedules. A schedule is a pure function of the
// epoch, so a resumed run needs no scheduler state beyond the epoch counter.
#include <torch/optim/optimizer.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/core/fields.h"

namespace qkv::train {

struct OptimConfig {
  std::string optimizer = "adamw";  // adam | adamw | sgd (with momentum)
  double lr = 1e-3;
  double weight_decay = 1e-4;
  double momentum = 0.9;            // sgd only
  std::string schedule = "cosine";  // constant | step | cosine
  int64_t step_size = 20;           // step: epochs between decays
  double gamma = 0.5;               // step: decay factor
  // step: epochs added before dividing by step_size; 1 = each decay one epoch
  // early, as PyTorch's StepLR stepped at the start of every epoch does.
  int64_t step_offset = 0;
  double min_lr = 0.0;        // cosine: final learning rate; step: the floor
  int64_t warmup_epochs = 0;  // linear warm-up before the schedule

  void validate() const;  // throws ConfigError naming the key
};

// config.json's "train" object holds these keys next to TrainConfig's.
template <typename V>
void visit_fields(OptimConfig& c, V&& visit) {
  visit(Field{"optimizer", "adam, adamw or sgd (with --momentum)"}.one_of("adam|adamw|sgd"), c.optimizer);
  visit(Field{"lr", "learning rate"}.range(0, 1e3).above(0), c.lr);
  visit(Field{"weight_decay", "weight decay (decoupled for adamw)"}.at_least(0), c.weight_decay);
  visit(Field{"momentum", "sgd momentum"}.at_least(0).below(1), c.momentum);
  visit(
      Field{"schedule", "learning-rate schedule: constant, step or cosine (per epoch)"}.one_of("constant|step|cosine"),
      c.schedule);
  visit(Field{"step_size", "step schedule: epochs between decays"}.at_least(1), c.step_size);
  visit(Field{"gamma", "step schedule: decay factor"}.range(0, 1).above(0), c.gamma);
  visit(Field{"step_offset",
              "step schedule: epochs added before dividing by --step-size (1: each decay an epoch early, as a StepLR "
              "stepped at the start of each epoch)"}
            .range(0, 1 << 20),
        c.step_offset);
  visit(Field{"min_lr", "cosine schedule: final learning rate; step schedule: the lowest"}.at_least(0), c.min_lr);
  visit(Field{"warmup_epochs", "linear warm-up epochs before the schedule"}.at_least(0), c.warmup_epochs);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<at::Tensor>& params,
                                                        const OptimConfig& config);

// Learning rate for 0-based `epoch` of `epochs`.
double lr_at(const OptimConfig& config, int64_t epoch, int64_t epochs);

void set_lr(torch::optim::Optimizer& optimizer, double lr);

}  // namespace qkv::train
