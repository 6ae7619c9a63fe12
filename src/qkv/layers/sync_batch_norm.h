#pragma once
// Batch normalisation whose training statistics span every rank, so that W
// processes with batch b train exactly as one process with batch W*b (the
// test of the distributed trainer). Outside distributed training it is
// torch::batch_norm itself, bit for bit. The sums over ranks come through
// layers/rank_sum.h, which distributed::ProcessGroup implements.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <memory>
#include <vector>

#include "qkv/layers/rank_sum.h"

namespace qkv::layers {

// Sum over ranks that autograd understands: the gradient of every rank's loss
// with respect to the sum is gathered back by a second sum in backward.
at::Tensor all_reduce_sum_autograd(const at::Tensor& x, RankSum& group);

// running <- (1 - momentum) running + momentum batch, the variance taken
// unbiased (var * count / (count - 1)) as torch::batch_norm does; mean and
// var [C] are the batch's biased statistics over `count` values per channel.
void update_running_stats(const at::Tensor& running_mean, const at::Tensor& running_var, const at::Tensor& mean,
                          const at::Tensor& var, double count, double momentum);

// torch::batch_norm over x [B, C, ...] (statistics per channel over every
// other dim). In training mode with `group` (and world size > 1) the mean and
// variance are those of the batch concatenated over ranks, and the running
// statistics are updated with them (unbiased variance over the global count),
// identically on every rank.
at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double momentum,
                      double eps, RankSum* group);

// torch::nn::BatchNorm1d with the same parameter and buffer names (weight,
// bias, running_mean, running_var, num_batches_tracked), so checkpoints are
// interchangeable; the training forward syncs over `ranks` when the trainer
// has attached its group (RankSumAttachment), and is torch::batch_norm
// otherwise.
class SyncBatchNormImpl : public torch::nn::Module {
 public:
  explicit SyncBatchNormImpl(int64_t channels, double momentum = 0.1, double eps = 1e-5);
  at::Tensor forward(const at::Tensor& x);
  // The weight in the running statistics of the training batch about to be
  // counted: momentum, or 1/n for the n-th batch of a recount (the cumulative
  // average of PyTorch's BatchNorm with momentum=None).
  double batch_weight() const;
  // Counts a training forward in num_batches_tracked (as BatchNorm does),
  // after it succeeded: a batch that failed is not counted.
  void track_batch();

  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double momentum, eps;
  RankSum* ranks = nullptr;  // not owned; null: this process alone
  bool recounting = false;   // set by BatchStatisticsRecount
};
TORCH_MODULE(SyncBatchNorm);

// Recomputes the running statistics of every SyncBatchNorm (and subclass) of
// `modules` from the training batches that follow, as PyTorch's
// torch.optim.swa_utils.update_bn does for its own batch norms (after
// averaging weights, say): each is reset (mean 0, variance 1, no batch
// counted), and each batch then weighs 1/n, so that after n batches the
// statistics are their plain average, until end() (or the holder's end)
// gives the layers their momentum back. A layer reached twice is counted once.
class BatchStatisticsRecount {
 public:
  explicit BatchStatisticsRecount(const std::vector<std::shared_ptr<torch::nn::Module>>& modules);
  ~BatchStatisticsRecount() { end(); }
  BatchStatisticsRecount(const BatchStatisticsRecount&) = delete;
  BatchStatisticsRecount& operator=(const BatchStatisticsRecount&) = delete;
  void end();
  size_t layers() const { return layers_.size(); }

 private:
  std::vector<std::shared_ptr<SyncBatchNormImpl>> layers_;
};

// Attaches `ranks` to every SyncBatchNorm (and subclass) of `model` (or of
// `models`) for the holder's lifetime; the layers forget it when the holder
// goes, unless another attachment has replaced it since. A null `ranks`
// attaches nothing.
class RankSumAttachment {
 public:
  RankSumAttachment(torch::nn::Module& model, RankSum* ranks);
  RankSumAttachment(const std::vector<std::shared_ptr<torch::nn::Module>>& models, RankSum* ranks);
  ~RankSumAttachment();
  RankSumAttachment(const RankSumAttachment&) = delete;
  RankSumAttachment& operator=(const RankSumAttachment&) = delete;

 private:
  RankSum* ranks_ = nullptr;
  std::vector<std::shared_ptr<SyncBatchNormImpl>> layers_;
};

}  // namespace qkv::layers
