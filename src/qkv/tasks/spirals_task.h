#pragma once
// The trainer's own end-to-end task: K interleaved 2-D spirals, split into
// train / val / test. `qkv spirals` is its CLI.
#include <torch/types.h>

#include <nlohmann/json.hpp>
#include <string>

#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"
#include "qkv/data/spirals.h"
#include "qkv/tasks/train_task.h"

namespace qkv::tasks {

inline constexpr const char* kSpiralsCommand = "spirals train";

struct SpiralsData {
  data::SpiralsOptions spirals;
  double val_fraction = 0.15;
  double test_fraction = 0.15;
  uint64_t split_seed = 0;  // copied from --seed

  nlohmann::json to_json() const { return fields_to_json(*this); }
  static SpiralsData from_json(const nlohmann::json& j) {
    return fields_from_json<SpiralsData>(j, "the run's data settings");
  }
  void validate() const;  // ConfigError naming the key
  data::Splits make() const;
};

template <typename V>
void visit_fields(SpiralsData& d, V&& visit) {
  visit(Field{"classes", "number of spiral arms (classes)", "arms"}.range(2, 1000).was("classes"), d.spirals.classes);
  visit(Field{"points_per_class", "points on each arm", "points-per-arm"}.range(1, 1e7).was("points-per-class"),
        d.spirals.points_per_class);
  visit(Field{"noise", "angular jitter (radians, std)"}.range(0, 100), d.spirals.noise);
  visit(Field{"turns", "full turns of each arm"}.range(1e-6, 1000), d.spirals.turns);
  visit(Field{"val_fraction", "share of points held out for model selection"}.range(0, 0.99), d.val_fraction);
  visit(Field{"test_fraction", "share of points held out for the final test"}.range(0, 0.99), d.test_fraction);
  visit(Field{"split_seed", "", ""}, d.split_seed);
}

// `spirals train`'s MLP sizes (its classes are the arms).
struct SpiralsModelSettings {
  int64_t hidden = 64, layers = 2;
  double dropout = 0;
};

template <typename V>
void visit_fields(SpiralsModelSettings& s, V&& visit) {
  visit(Field{"hidden", "hidden width"}.range(1, 65536), s.hidden);
  visit(Field{"layers", "hidden layers"}.range(0, 1024), s.layers);
  visit(Field{"dropout", "dropout after each hidden layer"}.range(0, 0.99), s.dropout);
}

struct SpiralsTrainSettings {
  SpiralsData data;
  SpiralsModelSettings model;
};

// The train task on `settings`, which the front end fills before a run.
TrainTask spirals_train_task(std::shared_ptr<const SpiralsTrainSettings> settings);

// `spirals eval`: loss and accuracy of a checkpoint on its run's `split`
// (train, val or test, as the run cut them), with the split and its size;
// `batch_size` 0 = the run's (train::stored_run_eval_batch_size).
nlohmann::json evaluate_spirals_run(const train::CheckpointFile& checkpoint, const std::string& split,
                                    int64_t batch_size, const c10::Device& device);

}  // namespace qkv::tasks
