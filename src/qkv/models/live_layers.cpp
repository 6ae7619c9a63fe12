#include "qkv/models/live_layers.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/layers/weight_binding.h"

namespace qkv::models {
namespace {

namespace F = torch::nn::functional;

// The functional convolution with a layer's options and its live weights
// (zero padding only: the other modes pad the input first).
template <typename FuncOptions, typename Layer, typename Convolve>
at::Tensor live_convolution(const Layer& layer, const at::Tensor& x, const char* name, Convolve convolve) {
  const auto& o = layer.options;
  // get_enum_name reads LibTorch 1.13's c10::variant and 2.x's std::variant alike.
  const auto mode = torch::enumtype::get_enum_name(o.padding_mode());
  if (mode != "kZeros")
    throw UsageError(std::string(name) + ": padding mode " + mode + " is not supported, only zeros");
  return convolve(x, live(layer.weight),
                  FuncOptions()
                      .bias(live(layer.bias))
                      .stride(o.stride())
                      .padding(o.padding())
                      .dilation(o.dilation())
                      .groups(o.groups()));
}

std::vector<at::Tensor> live_all(const std::vector<at::Tensor>& weights) {
  std::vector<at::Tensor> out;
  out.reserve(weights.size());
  for (const auto& w : weights) out.push_back(live(w));
  return out;
}

// The sizes of a recurrent layer's hidden state for a batched input,
// [layers * directions, B, hidden] (UsageError unless input is [B, T, F] or [T, B, F]).
template <typename Options>
std::vector<int64_t> state_sizes(const Options& o, const at::Tensor& input, const char* layer) {
  if (input.dim() != 3)
    throw UsageError(std::string(layer) + ": expected a batched sequence [B, T, F] (or [T, B, F]), got " +
                     shape_of(input));
  return {o.num_layers() * (o.bidirectional() ? 2 : 1), input.size(o.batch_first() ? 0 : 1), o.hidden_size()};
}

}  // namespace

at::Tensor LiveLinearImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, at::linear(x, live(weight), live(bias)));
}

at::Tensor LiveConv1dImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, live_convolution<F::Conv1dFuncOptions>(*this, x, "Conv1d", F::conv1d));
}

at::Tensor LiveConv3dImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, live_convolution<F::Conv3dFuncOptions>(*this, x, "Conv3d", F::conv3d));
}

at::Tensor LiveLayerNormImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, at::layer_norm(x, options.normalized_shape(), live(weight), live(bias), options.eps()));
}

at::Tensor LiveEmbeddingImpl::forward(const at::Tensor& ids) {
  if (options.max_norm()) throw UsageError("Embedding: max_norm is not supported");
  const int64_t padding_idx = options.padding_idx() ? *options.padding_idx() : -1;
  return observed(*this, {ids},
                  at::embedding(live(weight), ids, padding_idx, options.scale_grad_by_freq(), options.sparse()));
}

std::tuple<at::Tensor, std::tuple<at::Tensor, at::Tensor>> LiveLSTMImpl::forward(
    const at::Tensor& input, std::optional<std::tuple<at::Tensor, at::Tensor>> state) {
  if (options.proj_size() > 0) throw UsageError("LSTM: proj_size is not supported");
  const auto sizes = state_sizes(options, input, "LSTM");
  if (!state) {
    const auto zeros = at::zeros(sizes, input.options());
    state = std::make_tuple(zeros, zeros);
  }
  auto [output, h, c] =
      at::lstm(input, {std::get<0>(*state), std::get<1>(*state)}, live_all(flat_weights_), options.bias(),
               options.num_layers(), options.dropout(), is_training(), options.bidirectional(), options.batch_first());
  auto out = observed(*this, {input, std::get<0>(*state), std::get<1>(*state)}, {output, h, c});
  return {out[0], {out[1], out[2]}};
}

std::tuple<at::Tensor, at::Tensor> LiveGRUImpl::forward(const at::Tensor& input, const at::Tensor& state) {
  const auto sizes = state_sizes(options, input, "GRU");
  const auto h0 = state.defined() ? state : at::zeros(sizes, input.options());
  auto [output, h] = at::gru(input, h0, live_all(flat_weights_), options.bias(), options.num_layers(),
                             options.dropout(), is_training(), options.bidirectional(), options.batch_first());
  auto out = observed(*this, {input, h0}, {output, h});
  return {out[0], out[1]};
}

at::Tensor LiveDropoutImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, torch::nn::DropoutImpl::forward(x));
}

at::Tensor LiveReLUImpl::forward(const at::Tensor& x) { return observed(*this, {x}, torch::nn::ReLUImpl::forward(x)); }

at::Tensor LiveLeakyReLUImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, torch::nn::LeakyReLUImpl::forward(x));
}

at::Tensor LiveSequentialImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, torch::nn::SequentialImpl::forward(x));
}

}  // namespace qkv::models
