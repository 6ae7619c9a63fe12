#include "qkv/lm/exact_match.h"

#include <torch/torch.h>

#include <cmath>

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

std::vector<double> ExactMatchMetric::totals() const {
  if (sequences_ == 0) return {};
  std::vector<double> v{static_cast<double>(exact_), static_cast<double>(sequences_)};
  const auto tokens = tokens_.totals();
  v.insert(v.end(), tokens.begin(), tokens.end());
  return v;
}

void ExactMatchMetric::load_totals(const std::vector<double>& v) {
  exact_ = v.size() >= 2 ? std::llround(v[0]) : 0;
  sequences_ = v.size() >= 2 ? std::llround(v[1]) : 0;
  tokens_.load_totals(v.size() > 2 ? std::vector<double>(v.begin() + 2, v.end()) : std::vector<double>{});
}

}  // namespace qkv::lm
