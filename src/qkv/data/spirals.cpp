#include "qkv/data/spirals.h"

#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"

namespace qkv::data {

DatasetPtr make_spirals(const SpiralsOptions& o, uint64_t seed) {
  if (o.classes < 2) throw ConfigError("classes", "must be at least 2 (got " + std::to_string(o.classes) + ")");
  if (o.points_per_class < 1)
    throw ConfigError("points_per_class", "must be positive (got " + std::to_string(o.points_per_class) + ")");
  if (!(o.noise >= 0)) throw ConfigError("noise", "must be >= 0");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t n = o.points_per_class;
  std::vector<torch::Tensor> xs, ys;
  for (int64_t c = 0; c < o.classes; ++c) {
    auto r = torch::linspace(0.05, 1.0, n, torch::kFloat);
    auto t = r * (2.0 * M_PI * o.turns) + (2.0 * M_PI * static_cast<double>(c) / static_cast<double>(o.classes)) +
             at::normal(0.0, o.noise, {n}, gen).to(torch::kFloat);
    xs.push_back(torch::stack({r * torch::cos(t), r * torch::sin(t)}, 1));
    ys.push_back(torch::full({n}, c, torch::kLong));
  }
  return std::make_shared<TensorDataset>(std::map<std::string, at::Tensor>{{"x", torch::cat(xs)}}, torch::cat(ys));
}

}  // namespace qkv::data
