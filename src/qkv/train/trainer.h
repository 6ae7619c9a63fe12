#pragma once
// The training loop every model shares: epochs of shuffled mini-batches,
// optimizer and schedule, gradient clipping, label smoothing, validation each
// epoch, model selection on validation data only, test metrics from the
// selected weights, and the run folder:
//   config.json, metrics.jsonl, summary.json, report.html,
//   checkpoints/last.ckpt (every epoch, and on Ctrl-C), checkpoints/best.ckpt
#include <c10/core/Device.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "qkv/data/dataset.h"
#include "qkv/distributed/process_group.h"
#include "qkv/models/model.h"
#include "qkv/train/checkpoint.h"
#include "qkv/train/metrics.h"
#include "qkv/train/optim.h"

namespace qkv::train {

struct TrainConfig {
  int64_t epochs = 20;
  int64_t batch_size = 32;
  int64_t eval_batch_size = 0;  // 0: same as batch_size
  bool drop_last = true;        // skip a last partial training batch (batch norm needs > 1 sample)
  OptimConfig optim;
  double clip_grad_norm = 0.0;  // max global L2 norm; 0 = off
  double label_smoothing = 0.0;
  // Where label smoothing puts its mass: "all" classes alike (PyTorch's
  // cross_entropy: the target gets 1 - e + e/C) or the "others" only (DGCNN's
  // and Vector Neurons' loss: the target gets 1 - e, each other class e/(C-1)).
  std::string label_smoothing_over = "all";
  // Batch-norm momentum, for every batch-norm layer: bn_momentum x
  // bn_momentum_gamma^(epoch / optim.step_size), at least bn_momentum_min
  // (Vector Neurons' segmentation: 0.1, 0.5, 0.01). gamma 1 = constant.
  double bn_momentum = 0.1;
  double bn_momentum_gamma = 1.0;
  double bn_momentum_min = 0.0;
  std::string select_metric = "accuracy";  // validation metric for model selection; "loss" is minimised
  // Early stopping: end training after this many epochs without a better
  // validation score (the selected weights are the best epoch's either way); 0 = off.
  int64_t patience = 0;
  uint64_t seed = 0;  // data order: epoch e uses seed and e
  // Where this process sits in a data-parallel run (world_size is recorded in
  // config.json; rank and master are not). batch_size is per rank.
  distributed::ParallelOptions parallel;

  void validate() const;  // throws ConfigError naming the key
  nlohmann::json to_json() const { return fields_to_json(*this); }
  static TrainConfig from_json(const nlohmann::json& j) { return fields_from_json<TrainConfig>(j, "train settings"); }
};

// config.json's "train" object, and the options of every train command.
template <typename V>
void visit_fields(TrainConfig& c, V&& visit) {
  visit(Field{"epochs", "training epochs"}.at_least(1), c.epochs);
  visit(Field{"batch_size", "training mini-batch size (per rank in a data-parallel run)"}.range(1, 1 << 20),
        c.batch_size);
  visit(Field{"eval_batch_size", "evaluation batch size; 0 = --batch-size"}.range(0, 1 << 20), c.eval_batch_size);
  visit(Field{"drop_last", "skip a last partial training batch"}, c.drop_last);
  visit_fields(c.optim, visit);
  visit(Field{"clip_grad_norm", "clip the global gradient L2 norm; 0 = off"}.at_least(0), c.clip_grad_norm);
  visit(Field{"label_smoothing", "label smoothing of the cross-entropy loss"}.at_least(0).below(1), c.label_smoothing);
  visit(Field{"label_smoothing_over",
              "all (PyTorch: every class gets smoothing/C) or others (DGCNN: the other classes share the smoothing)"}
            .one_of("all|others"),
        c.label_smoothing_over);
  visit(Field{"bn_momentum", "batch-norm momentum (PyTorch's 0.1)"}.range(0, 1), c.bn_momentum);
  visit(Field{"bn_momentum_gamma", "batch-norm momentum decay factor every --step-size epochs; 1 = constant"}
            .range(0, 1)
            .above(0),
        c.bn_momentum_gamma);
  visit(Field{"bn_momentum_min", "lowest batch-norm momentum of the decay"}.range(0, 1), c.bn_momentum_min);
  visit(Field{"select_metric", "validation metric that picks the best epoch (loss is minimised, others maximised)"},
        c.select_metric);
  visit(
      Field{"patience", "stop after this many epochs without a better validation score; 0 = train all epochs"}.at_least(
          0),
      c.patience);
  visit(Field{"seed", "", ""}, c.seed);                       // set from --seed
  visit(Field{"world_size", "", ""}, c.parallel.world_size);  // --world-size is a data-parallel option
}

struct TrainHooks {
  std::function<data::Batch(const data::Batch&)> augment;  // training batches only; may use the global RNG
  MetricFactory metrics;                                   // default: AccuracyMetric
  // The labels a training batch's accuracy counts, from its logits; default:
  // the arg-max over the last dimension. A task whose metrics predict
  // otherwise (part segmentation: among the shape's class's parts) says so,
  // so that train and val accuracy are one measure on one chart.
  std::function<at::Tensor(const data::Batch&, const at::Tensor& logits)> predict;
  MetricFactory final_metrics;  // for summary.json's val/test (e.g. with a confusion matrix); default: metrics
  // More test sets, evaluated once with the selected weights into summary.json
  // under "test_<name>" (e.g. the SO(3)-rotated test set of a z/z run).
  std::vector<std::pair<std::string, data::DatasetPtr>> extra_tests;
  // The model the test sets (test and extra_tests) are scored with, built
  // from the trained one (e.g. tasks::VoteAveraged when the test sets hold
  // several views per sample); default: the trained model.
  std::function<models::ModelPtr(models::Model& trained)> test_model;
  bool live_progress = false;  // progress bar on stderr
  bool quiet = false;          // no per-epoch lines
  // After Ctrl-C, "(resume with --resume DIR)": false where the caller says
  // how to continue (a cross validation resumes by its own command).
  bool resume_hint = true;
  std::string title = "qkv run";
  int64_t stop_after_steps = -1;  // tests: act as if Ctrl-C came after this many steps of this call
  // Data-parallel training: each rank takes a disjoint slice of every global
  // batch (batch_size per rank, the same shuffled order everywhere),
  // gradients are summed over ranks weighted by each rank's share of the
  // scored targets, batch norm statistics span ranks (SyncBatchNorm),
  // evaluation is sharded and reduced, and rank 0 alone writes the run folder.
  distributed::ProcessGroup* group = nullptr;
};

struct TrainResult {
  bool interrupted = false;
  nlohmann::json summary;
};

// ConfigError naming batch_size where `batch_size` < 2 and some layer of
// `model` keeps running statistics (batch norm: torch's BatchNorm,
// layers::SyncBatchNorm, VN batch norm), which one sample turns NaN.
void refuse_batches_of_one(torch::nn::Module& model, int64_t batch_size);

// How train() batches the training split over `world` ranks, after checking
// the run can train at all: the split is not empty and gives every rank a
// sample, the selection metric is one the validation metrics (`metrics`, and
// the loss) hold, and a model with batch norm gets two samples per rank in
// every batch (ConfigError naming the option, or DataError). execute_run
// checks it before the run writes anything; train() again, for its callers.
struct TrainingBatches {
  int64_t global_batch = 0;  // batch_size per rank x world
  int64_t batches = 0;       // per epoch
};
TrainingBatches plan_training_batches(torch::nn::Module& model, const data::Splits& splits, const TrainConfig& config,
                                      int64_t world, const MetricFactory& metrics);

// Trains `model` (moved to `device`) and writes the run folder. With `resume`,
// continues from out_dir's last checkpoint and ends with the same weights an
// uninterrupted run would have. run_config is stored in config.json and in
// every checkpoint, so `export-weights` and `--resume` can rebuild the model.
TrainResult train(models::Model& model, const data::Splits& splits, const TrainConfig& config, c10::Device device,
                  const std::string& out_dir, const nlohmann::json& run_config, bool resume,
                  const TrainHooks& hooks = {});

// The batch-norm momentum of 0-based `epoch`: bn_momentum x
// bn_momentum_gamma^(epoch / optim.step_size), at least bn_momentum_min.
double batch_norm_momentum_at(const TrainConfig& config, int64_t epoch);
// Sets the momentum of every batch-norm layer of `module` (qkv's
// SyncBatchNorm, which every model uses, and LibTorch's BatchNorm1d/2d/3d).
void set_batch_norm_momentum(torch::nn::Module& module, double momentum);

// UsageError unless a run trained by `stored` ranks is resumed by as many;
// `dir` names the run folder.
void check_resume_world_size(const std::string& dir, int64_t stored, int64_t now);

// Mean loss and the accumulator's metrics over a whole dataset, in eval mode.
// With a group, each rank scores a contiguous shard and the counts are summed,
// so every rank returns the result of the whole set.
// Out of (GPU) memory in a batch: DataError of one line naming the batch and
// the batch size, advising a smaller {eval_batch_size}.
nlohmann::json evaluate(models::Model& model, const data::Dataset& dataset, int64_t batch_size, c10::Device device,
                        const MetricFactory& metrics = {}, distributed::ProcessGroup* group = nullptr);

// The batch size an eval command scores a stored run at: `requested` when
// above 0, else the run's own (config.json's train.eval_batch_size, else its
// train.batch_size), so that eval sees what training's validation saw.
int64_t stored_run_eval_batch_size(const nlohmann::json& run_config, int64_t requested);

// Eval commands' option for `requested`: --eval-batch-size, the name train
// gives the same concept, which evaluate's out-of-memory line names.
inline Field eval_batch_size_field() {
  return Field{"eval_batch_size", "evaluation batch size; 0 = the run's (its --eval-batch-size, else its --batch-size)"}
      .range(0, 1 << 20);
}

// The line a finished epoch prints on stderr: "epoch 3/20", then every
// numeric entry of `row` ("lr 0.001 train_loss 0.4312 ...", counts as
// integers), then "(12.3 s)"; longer than `width`, the validation entries
// go on a second, indented line.
std::string epoch_line_text(const nlohmann::json& row, int64_t epochs, size_t width = 150);

}  // namespace qkv::train
