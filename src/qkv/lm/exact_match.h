#pragma once
// Sequence-level accuracy for the built-in LM tasks. With teacher forcing, a
// sequence counts as exact when every scored position's arg-max is the
// target; that is the same event as greedy decoding reproducing the whole
// answer, since each greedy step then sees exactly the teacher-forced prefix.
#include "qkv/train/metrics.h"

namespace qkv::lm {

class ExactMatchMetric : public train::MetricAccumulator {
 public:
  void add(const at::Tensor& logits, const at::Tensor& target) override;  // logits [B,T,V], target [B,T]
  nlohmann::json result() const override;       // accuracy (per token), exact_match (per sequence)
  std::vector<double> totals() const override;  // [exact, sequences, token accuracy totals...]
  void load_totals(const std::vector<double>& totals) override;

 private:
  train::AccuracyMetric tokens_;
  int64_t exact_ = 0, sequences_ = 0;
};

}  // namespace qkv::lm
