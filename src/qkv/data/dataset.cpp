#include "qkv/data/dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <random>

#include "qkv/core/errors.h"

namespace qkv::data {

const DatasetPtr& split_named(const Splits& splits, const std::string& name) {
  if (name == "train") return splits.train;
  if (name == "val") return splits.val;
  if (name == "test") return splits.test;
  throw ConfigError("split", name + ": expected train, val or test");
}

const at::Tensor& Batch::input(const std::string& name) const {
  auto it = inputs.find(name);
  if (it == inputs.end()) throw std::out_of_range("batch has no input named '" + name + "'");
  return it->second;
}

Batch Batch::to(const c10::Device& device) const {
  Batch out;
  for (const auto& [name, t] : inputs) out.inputs[name] = t.to(device);
  if (target.defined()) out.target = target.to(device);
  return out;
}

TensorDataset::TensorDataset(std::map<std::string, at::Tensor> inputs, at::Tensor target)
    : inputs_(std::move(inputs)), target_(std::move(target)) {
  TORCH_CHECK(target_.defined() && target_.dim() >= 1, "TensorDataset: target must have a batch dimension");
  for (const auto& [name, t] : inputs_)
    TORCH_CHECK(t.size(0) == target_.size(0), "TensorDataset: input '", name, "' has ", t.size(0),
                " rows but the target has ", target_.size(0));
}

Batch TensorDataset::get(const std::vector<int64_t>& indices) const {
  auto index = torch::tensor(indices, torch::kLong);
  Batch batch;
  for (const auto& [name, t] : inputs_) batch.inputs[name] = t.index_select(0, index);
  batch.target = target_.index_select(0, index);
  return batch;
}

SubsetDataset::SubsetDataset(DatasetPtr base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {}

Batch SubsetDataset::get(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) mapped.push_back(indices_.at(static_cast<size_t>(i)));
  return base_->get(mapped);
}

Splits random_split(DatasetPtr all, double val_fraction, double test_fraction, uint64_t seed) {
  if (val_fraction < 0 || test_fraction < 0 || val_fraction + test_fraction >= 1)
    throw UsageError("split fractions must be >= 0 and sum below 1 (got val " + std::to_string(val_fraction) +
                     ", test " + std::to_string(test_fraction) + ")");
  const int64_t n = all->size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const auto n_val = static_cast<int64_t>(val_fraction * static_cast<double>(n));
  const auto n_test = static_cast<int64_t>(test_fraction * static_cast<double>(n));
  auto slice = [&](int64_t from, int64_t to) {
    return std::make_shared<SubsetDataset>(all, std::vector<int64_t>(order.begin() + from, order.begin() + to));
  };
  return {slice(n_val + n_test, n), slice(0, n_val), slice(n_val, n_val + n_test)};
}

}  // namespace qkv::data
