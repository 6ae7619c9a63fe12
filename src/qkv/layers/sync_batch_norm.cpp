#include "qkv/layers/sync_batch_norm.h"

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/layers/weight_binding.h"

#include <torch/torch.h>

#include <algorithm>

namespace qkv::layers {
namespace {

class AllReduceSum : public torch::autograd::Function<AllReduceSum> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, RankSum* group) {
    ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(group));
    auto out = x.clone();
    group->all_reduce_sum(out, "batch-norm statistics");
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto* group = reinterpret_cast<RankSum*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
    auto g = grad[0].contiguous().clone();
    group->all_reduce_sum(g, "batch-norm gradient");
    return {g, at::Tensor()};
  }
};

}  // namespace

at::Tensor all_reduce_sum_autograd(const at::Tensor& x, RankSum& group) { return AllReduceSum::apply(x, &group); }

void update_running_stats(const at::Tensor& running_mean, const at::Tensor& running_var, const at::Tensor& mean,
                          const at::Tensor& var, double count, double momentum) {
  torch::NoGradGuard no_grad;
  running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype()), momentum);
  running_var.mul_(1 - momentum).add_((var * (count / (count - 1))).to(running_var.dtype()), momentum);
}

at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double momentum,
                      double eps, RankSum* group) {
  if (!training || group == nullptr || group->world_size() == 1) {
    // torch::batch_norm takes one value per channel in training (PyTorch's
    // Python layer refuses it) and turns the running variance NaN for good;
    // a DataLoader's last batch of one sample gives exactly that.
    if (training && x.dim() >= 2 && x.numel() == x.size(1))
      throw UsageError("batch norm: a training batch of 1 value per channel (input " + shape_of(x) +
                       "); training needs more than one (a DataLoader's last batch of one sample: drop_last=True)");
    return torch::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps,
                             at::globalContext().userEnabledCuDNN());
  }
  TORCH_CHECK(x.dim() >= 2, "batch_norm: expected [B, C, ...], got ", x.sizes());
  const int64_t channels = x.size(1);
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = channels;
  // Sums in float64: E[x^2] - E[x]^2 loses digits in float32 that the
  // one-process two-pass variance keeps.
  const auto xd = x.to(torch::kDouble);
  const double local_count = static_cast<double>(x.numel() / std::max<int64_t>(channels, 1));
  auto stats =
      torch::cat({xd.sum(dims), (xd * xd).sum(dims), torch::full({1}, local_count, xd.options().requires_grad(false))});
  auto global = all_reduce_sum_autograd(stats, *group);
  const double count = global[2 * channels].item<double>();
  TORCH_CHECK(count > 1, "batch_norm: the global batch has ", count, " values per channel; need more than one");
  const auto mean = global.slice(0, 0, channels) / count;
  const auto var = (global.slice(0, channels, 2 * channels) / count - mean * mean).clamp_min(0);
  if (running_mean.defined()) update_running_stats(running_mean, running_var, mean, var, count, momentum);
  auto y = (x - mean.to(x.scalar_type()).view(shape)) * (var + eps).rsqrt().to(x.scalar_type()).view(shape);
  if (weight.defined()) y = y * weight.view(shape);
  if (bias.defined()) y = y + bias.view(shape);
  return y;
}

SyncBatchNormImpl::SyncBatchNormImpl(int64_t channels, double momentum, double eps) : momentum(momentum), eps(eps) {
  weight = register_parameter("weight", torch::ones({channels}));
  bias = register_parameter("bias", torch::zeros({channels}));
  running_mean = register_buffer("running_mean", torch::zeros({channels}));
  running_var = register_buffer("running_var", torch::ones({channels}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
}

double SyncBatchNormImpl::batch_weight() const {
  if (!recounting) return momentum;
  return 1.0 / static_cast<double>(live(num_batches_tracked).item<int64_t>() + 1);
}

void SyncBatchNormImpl::track_batch() {
  if (!is_training()) return;
  torch::NoGradGuard no_grad;
  live(num_batches_tracked).add_(1);
}

at::Tensor SyncBatchNormImpl::forward(const at::Tensor& x) {
  auto y = batch_norm(x, live(weight), live(bias), live(running_mean), live(running_var), is_training(), batch_weight(),
                      eps, ranks);
  track_batch();
  return observed(*this, {x}, std::move(y));
}

namespace {

// Every SyncBatchNorm (and subclass) of `roots` and their submodules, once each.
std::vector<std::shared_ptr<SyncBatchNormImpl>> batch_norms_of(
    const std::vector<std::shared_ptr<torch::nn::Module>>& roots) {
  std::vector<std::shared_ptr<SyncBatchNormImpl>> found;
  for (const auto& root : roots)
    for (const auto& module : root->modules())
      if (auto layer = std::dynamic_pointer_cast<SyncBatchNormImpl>(module);
          layer && std::find(found.begin(), found.end(), layer) == found.end())
        found.push_back(std::move(layer));
  return found;
}

}  // namespace

BatchStatisticsRecount::BatchStatisticsRecount(const std::vector<std::shared_ptr<torch::nn::Module>>& modules)
    : layers_(batch_norms_of(modules)) {
  torch::NoGradGuard no_grad;
  for (const auto& layer : layers_) {
    layer->running_mean.zero_();
    layer->running_var.fill_(1);
    layer->num_batches_tracked.zero_();
    layer->recounting = true;
  }
}

void BatchStatisticsRecount::end() {
  for (const auto& layer : layers_) layer->recounting = false;
  layers_.clear();
}

RankSumAttachment::RankSumAttachment(torch::nn::Module& model, RankSum* ranks)
    // modules() needs a model held by a shared_ptr; one process alone needs none.
    : RankSumAttachment(ranks ? model.modules() : std::vector<std::shared_ptr<torch::nn::Module>>{}, ranks) {}

RankSumAttachment::RankSumAttachment(const std::vector<std::shared_ptr<torch::nn::Module>>& models, RankSum* ranks)
    : ranks_(ranks) {
  if (ranks == nullptr) return;
  layers_ = batch_norms_of(models);
  for (const auto& layer : layers_) layer->ranks = ranks;
}

RankSumAttachment::~RankSumAttachment() {
  for (const auto& layer : layers_)
    if (layer->ranks == ranks_) layer->ranks = nullptr;
}

}  // namespace qkv::layers
