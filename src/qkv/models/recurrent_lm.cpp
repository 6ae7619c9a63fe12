#include "qkv/models/recurrent_lm.h"

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

RecurrentLMOptions RecurrentLMOptions::from_json(const nlohmann::json& j, const std::string& model) {
  RecurrentLMOptions defaults;
  defaults.cell = model == "gru-lm" ? "gru" : "lstm";
  return read_model_options(model, j, defaults);
}

int64_t recurrent_state_floats(const RecurrentLMOptions& o) {
  return sat_mul(o.cell == "lstm" ? 2 : 1, o.layers, o.hidden);
}

// Parameters as LibTorch's LSTM and GRU hold them, per layer: weight_ih
// [gates*hidden, in], weight_hh [gates*hidden, hidden] and two biases of
// gates*hidden, in the embedding width for the first layer, hidden after.
// Activations per token: the embedding, each layer's gates, its state (and
// the LSTM's cell and tanh of it), the top layer's dropout, the logits and
// their log-softmax in the loss.
ModelSize recurrent_lm_size(const RecurrentLMOptions& o, int64_t context) {
  check_points(o.cell + "-lm", context);
  const int64_t g = o.gates(), h = o.hidden;
  auto layer = [&](int64_t in) { return sat_add(sat_mul(g, h, sat_add(in, h)), sat_mul(2, g, h)); };
  ModelSize s;
  s.parameters = sat_add(sat_mul(o.vocab, o.embed), layer(o.embed), sat_mul(o.layers - 1, layer(h)),
                         linear_parameters(h, o.vocab));
  const int64_t per_token = sat_add(o.embed, sat_mul(o.layers, g + 3, h), h, sat_mul(2, o.vocab));
  s.activation_floats = sat_mul(context, per_token);
  return s;
}

int64_t recurrent_hidden_for_parameters(RecurrentLMOptions o, int64_t target) {
  auto parameters = [&o](int64_t hidden) {
    o.hidden = hidden;
    return recurrent_lm_size(o, 1).parameters;
  };
  if (parameters(1) > target)
    throw UsageError(o.cell + "-lm: even a hidden size of 1 has " + std::to_string(parameters(1)) +
                     " parameters, more than the " + std::to_string(target) + " to match");
  // The count grows with the hidden size: double past the target, then bisect.
  int64_t fits = 1, exceeds = 2;
  while (parameters(exceeds) <= target) {
    fits = exceeds;
    if (exceeds > kSaturated / 2) return fits;  // a target no count reaches (a saturated one)
    exceeds *= 2;
  }
  while (exceeds - fits > 1) {
    const int64_t mid = fits + (exceeds - fits) / 2;
    (parameters(mid) <= target ? fits : exceeds) = mid;
  }
  return fits;
}

RecurrentLM::RecurrentLM(const RecurrentLMOptions& o) : options_(o) {
  embed_ = register_module("embed", LiveEmbedding(o.vocab, o.embed));
  // LibTorch warns about dropout between layers when there is one layer.
  const double between = o.layers > 1 ? o.dropout : 0.0;
  if (o.cell == "gru")
    gru_ = register_module(
        "rnn",
        LiveGRU(torch::nn::GRUOptions(o.embed, o.hidden).num_layers(o.layers).batch_first(true).dropout(between)));
  else
    lstm_ = register_module(
        "rnn",
        LiveLSTM(torch::nn::LSTMOptions(o.embed, o.hidden).num_layers(o.layers).batch_first(true).dropout(between)));
  drop_ = register_module("drop", LiveDropout(o.dropout));
  out_ = register_module("out", LiveLinear(o.hidden, o.vocab));
}

at::Tensor RecurrentLM::forward_tokens(const at::Tensor& tokens, RecurrentState* state) {
  const std::string name = options_.cell + "-lm";
  if (tokens.dim() != 2) throw UsageError(name + ": tokens must be [B, T]");
  if (state && !state->empty() && state->h.size(1) != tokens.size(0))
    throw UsageError(name + ": the state holds " + std::to_string(state->h.size(1)) + " sequences, the tokens " +
                     std::to_string(tokens.size(0)));
  const bool resume = state && !state->empty();
  const auto x = embed_->forward(tokens);
  at::Tensor top;
  if (gru_) {
    auto [y, h] = gru_->forward(x, resume ? state->h : at::Tensor());
    top = y;
    if (state) state->h = h;
  } else {
    auto [y, hc] = lstm_->forward(
        x,
        resume ? std::optional<std::tuple<at::Tensor, at::Tensor>>(std::make_tuple(state->h, state->c)) : std::nullopt);
    top = y;
    if (state) std::tie(state->h, state->c) = hc;
  }
  return out_->forward(drop_->forward(top));
}

at::Tensor RecurrentLM::forward(const data::Batch& batch) { return forward_tokens(batch.input("tokens")); }

}  // namespace qkv::models
