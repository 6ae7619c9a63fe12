#pragma once
// LibTorch's own layers as the models use them, computing with the live()
// tensors of their weights (layers/weight_binding.h) instead of their members,
// so that what Python binds for a call (functional_call, parametrize, prune,
// a swapped nn.Parameter) is what runs. Each is its LibTorch layer: the same
// options, parameter names and initialisation; only forward differs.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>

#include <optional>
#include <tuple>

namespace qkv::models {

class LiveLinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveLinear);

// Zero padding only (the models' kind); another padding mode is refused.
class LiveConv1dImpl : public torch::nn::Conv1dImpl {
 public:
  using torch::nn::Conv1dImpl::Conv1dImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveConv1d);

class LiveConv3dImpl : public torch::nn::Conv3dImpl {
 public:
  using torch::nn::Conv3dImpl::Conv3dImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveConv3d);

class LiveLayerNormImpl : public torch::nn::LayerNormImpl {
 public:
  using torch::nn::LayerNormImpl::LayerNormImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveLayerNorm);

// Without max_norm (which renormalises the weight in place); refused.
class LiveEmbeddingImpl : public torch::nn::EmbeddingImpl {
 public:
  using torch::nn::EmbeddingImpl::EmbeddingImpl;
  at::Tensor forward(const at::Tensor& ids);
};
TORCH_MODULE(LiveEmbedding);

// Batched input only ([B, T, F] batch first, or [T, B, F]); hidden states as
// LibTorch's: [layers * directions, B, hidden].
class LiveLSTMImpl : public torch::nn::LSTMImpl {
 public:
  using torch::nn::LSTMImpl::LSTMImpl;
  std::tuple<at::Tensor, std::tuple<at::Tensor, at::Tensor>> forward(
      const at::Tensor& input, std::optional<std::tuple<at::Tensor, at::Tensor>> state = std::nullopt);
};
TORCH_MODULE(LiveLSTM);

class LiveGRUImpl : public torch::nn::GRUImpl {
 public:
  using torch::nn::GRUImpl::GRUImpl;
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& input, const at::Tensor& state = {});
};
TORCH_MODULE(LiveGRU);

// LibTorch's layers without weights, reporting to their forward hooks
// (layers/part_hooks.h) as every layer of the models does.
class LiveDropoutImpl : public torch::nn::DropoutImpl {
 public:
  using torch::nn::DropoutImpl::DropoutImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveDropout);

class LiveReLUImpl : public torch::nn::ReLUImpl {
 public:
  using torch::nn::ReLUImpl::ReLUImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveReLU);

class LiveLeakyReLUImpl : public torch::nn::LeakyReLUImpl {
 public:
  using torch::nn::LeakyReLUImpl::LeakyReLUImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveLeakyReLU);

// A Sequential reporting to its forward hooks; tensor in, tensor out. Its
// elements report to theirs themselves (each is a layer of this file, or
// another that calls observed()).
class LiveSequentialImpl : public torch::nn::SequentialImpl {
 public:
  using torch::nn::SequentialImpl::SequentialImpl;
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(LiveSequential);

}  // namespace qkv::models
