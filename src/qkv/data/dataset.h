#pragma once
// Data as the trainer sees it: a Dataset hands out Batches of named input
// tensors plus a target. Readers build Datasets; they know nothing of models.
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace qkv::data {

// Target value for positions that are not scored (prompt tokens, padding).
constexpr int64_t kIgnoreIndex = -100;

struct Batch {
  std::map<std::string, at::Tensor> inputs;  // e.g. "points" [B, 3, N]
  at::Tensor target;                         // class ids [B] or [B, ...] (long); kIgnoreIndex = not scored

  // The named input; throws std::out_of_range naming the missing field.
  const at::Tensor& input(const std::string& name) const;
  int64_t size() const { return target.defined() ? target.size(0) : 0; }
  Batch to(const c10::Device& device) const;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Batch get(const std::vector<int64_t>& indices) const = 0;
};
using DatasetPtr = std::shared_ptr<const Dataset>;

// All inputs and the target are indexed along dim 0.
class TensorDataset : public Dataset {
 public:
  TensorDataset(std::map<std::string, at::Tensor> inputs, at::Tensor target);
  int64_t size() const override { return target_.size(0); }
  Batch get(const std::vector<int64_t>& indices) const override;

 private:
  std::map<std::string, at::Tensor> inputs_;
  at::Tensor target_;
};

// A view of some rows of another Dataset.
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(DatasetPtr base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Batch get(const std::vector<int64_t>& indices) const override;

 private:
  DatasetPtr base_;
  std::vector<int64_t> indices_;
};

struct Splits {
  DatasetPtr train, val, test;  // val and test may be empty (size 0) but never null
};

// The split called `name` (train, val or test); ConfigError naming "split" otherwise.
const DatasetPtr& split_named(const Splits& splits, const std::string& name);

// Shuffles 0..n-1 with `seed` and cuts it into train / val / test by the given
// fractions (each in [0, 1), summing below 1). Same seed, same split.
Splits random_split(DatasetPtr all, double val_fraction, double test_fraction, uint64_t seed);

}  // namespace qkv::data
