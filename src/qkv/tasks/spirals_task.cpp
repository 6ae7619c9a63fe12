#include "qkv/tasks/spirals_task.h"

#include <cmath>

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/mlp.h"
#include "qkv/train/run.h"
#include "qkv/train/trainer.h"

namespace qkv::tasks {

void SpiralsData::validate() const {
  check_field_ranges(*this);
  if (val_fraction + test_fraction >= 1) throw ConfigError("test_fraction", "and {val_fraction} must sum below 1");
}

data::Splits SpiralsData::make() const {
  return data::random_split(data::make_spirals(spirals, split_seed), val_fraction, test_fraction, split_seed);
}

TrainTask spirals_train_task(std::shared_ptr<const SpiralsTrainSettings> s) {
  TrainTask task;
  task.command = kSpiralsCommand;
  task.description = "train an MLP on built-in spirals; writes a run folder";
  task.default_out = "runs/spirals";
  task.batch_norm = false;
  task.defaults.epochs = 40;
  task.defaults.batch_size = 64;
  task.defaults.optim.lr = 1e-2;
  task.prepare = [s](const GivenSetting&, train::RunRequest& r, const std::string&) {
    SpiralsData data = s->data;
    data.split_seed = r.seed;
    data.validate();
    models::MLPOptions mlp;
    mlp.hidden = s->model.hidden;
    mlp.layers = s->model.layers;
    mlp.dropout = s->model.dropout;
    mlp.classes = data.spirals.classes;
    r.model_name = "mlp";
    r.model_options = mlp.to_json();
    r.data = data.to_json();
  };
  task.load = [](train::RunRequest& r, const LoadContext&) {
    TaskRun run;
    run.splits = SpiralsData::from_json(r.data).make();
    return run;
  };
  return task;
}

nlohmann::json evaluate_spirals_run(const train::CheckpointFile& checkpoint, const std::string& split,
                                    int64_t batch_size, const c10::Device& device) {
  nlohmann::json config;
  auto model = train::load_model_from_checkpoint(checkpoint, &config, kSpiralsCommand);
  model->to(device);
  const auto splits = SpiralsData::from_json(config.at("data")).make();
  const auto& part = data::split_named(splits, split);
  auto metrics = train::evaluate(*model, *part, train::stored_run_eval_batch_size(config, batch_size), device);
  metrics["split"] = split;
  metrics["size"] = part->size();
  return metrics;
}

}  // namespace qkv::tasks
