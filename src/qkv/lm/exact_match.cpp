#include "qkv/lm/exact_match.h"

#include <torch/torch.h>

namespace qkv::lm {

void ExactMatchMetric::add(const at::Tensor& logits, const at::Tensor& target) {
  tokens_.add(logits, target);
  auto predicted = logits.argmax(-1).to(torch::kCPU);
  auto t = target.to(torch::kCPU);
  auto ok = (predicted == t) | (t == train::kIgnoreIndex);
  exact_ += ok.all(-1).sum().item<int64_t>();
  sequences_ += t.size(0);
}

nlohmann::json ExactMatchMetric::result() const {
  auto r = tokens_.result();
  r.erase("balanced_accuracy");
  r["exact_match"] = sequences_ ? static_cast<double>(exact_) / static_cast<double>(sequences_) : 0.0;
  return r;
}

}  // namespace qkv::lm
