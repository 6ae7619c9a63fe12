#pragma once
// Test-time voting: each sample scored under several views (for point clouds,
// several samplings of one pose) and the class probabilities averaged. The
// views travel in one batch, [V * B, ...] with view v at rows v*B..v*B+B-1,
// so a model in eval mode scores them as it scores any batch; VoteAveraged
// turns its logits back into [B, ..., C] log-probabilities, which the loss and
// the metrics take as logits (log_softmax leaves them unchanged).
#include <ATen/core/Tensor.h>

#include <vector>

#include "qkv/data/dataset.h"
#include "qkv/models/model.h"

namespace qkv::tasks {

// The views of one dataset, as one: get(indices) concatenates every view's
// inputs along dim 0; the target is view 0's. All views must have the same
// size (std::invalid_argument otherwise, a wiring mistake).
class VotedViews : public data::Dataset {
 public:
  explicit VotedViews(std::vector<data::DatasetPtr> views);
  int64_t size() const override { return views_.front()->size(); }
  data::Batch get(const std::vector<int64_t>& indices) const override;
  int64_t votes() const { return static_cast<int64_t>(views_.size()); }

 private:
  std::vector<data::DatasetPtr> views_;
};

// log(mean over the V views of softmax(logits)), from [V * B, ..., C] logits
// to [B, ..., C] log-probabilities (for V = 1, log_softmax); computed as
// logsumexp(log_softmax) - log V, so a class no view gives any probability
// stays finite.
at::Tensor average_votes(const at::Tensor& logits, int64_t votes);

// A trained model scored with votes: forward() runs `inner` (in this
// wrapper's train/eval mode) on a VotedViews batch and averages. It does not
// own `inner`, which must outlive it.
class VoteAveraged : public models::Model {
 public:
  VoteAveraged(models::Model& inner, int64_t votes) : inner_(inner), votes_(votes) {}
  at::Tensor forward(const data::Batch& batch) override;

 private:
  models::Model& inner_;
  int64_t votes_;
};

}  // namespace qkv::tasks
