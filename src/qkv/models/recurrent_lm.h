#pragma once
// A byte-level recurrent language model, the baseline with a fixed memory:
// token embedding, stacked LSTM or GRU layers, a linear map from the top
// layer's state to the vocabulary. Whatever the length of the prefix, all it
// carries to the next byte is its RecurrentState (layers x hidden numbers, and
// as many again for the LSTM's cells), where the transformer's KV cache keeps a
// key and a value per position and layer. forward() takes the same batches
// and gives the same logits as TransformerLM, so the trainer and the
// exact-match metric serve both.
#include <torch/nn/modules/dropout.h>

#include <string>

#include "qkv/models/byte_vocab.h"
#include "qkv/models/live_layers.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"

namespace qkv::models {

struct RecurrentLMOptions {
  int64_t vocab = kByteVocab;
  int64_t embed = 64;  // embedding width, the first layer's input
  int64_t hidden = 128;
  int64_t layers = 2;
  std::string cell = "lstm";  // lstm | gru
  double dropout = 0.0;

  // `model` is the registry name: errors name it, and "gru-lm" makes "gru"
  // the default cell (every other name "lstm").
  static RecurrentLMOptions from_json(const nlohmann::json& j, const std::string& model = "lstm-lm");
  nlohmann::json to_json() const { return fields_to_json(*this); }
  // Weight blocks per layer: the LSTM's input, forget, cell and output gates;
  // the GRU's reset, update and new gates.
  int64_t gates() const { return cell == "gru" ? 3 : 4; }
};

template <typename V>
void visit_fields(RecurrentLMOptions& o, V&& visit) {
  visit(vocab_field(), o.vocab);
  visit(Field{"embed", "embedding width, the first recurrent layer's input"}.at_least(1).from(
            "our choice: lm train's --d-model"),
        o.embed);
  visit(Field{"hidden", "state size of each recurrent layer"}.at_least(1).from(
            "our choice; lm train picks the largest within the transformer's parameter count"),
        o.hidden);
  visit(Field{"layers", "stacked recurrent layers"}.at_least(1).from("our choice: lm train's --layers"), o.layers);
  visit(Field{"cell", "lstm (Hochreiter and Schmidhuber) or gru (Cho et al.)"}
            .one_of("lstm|gru")
            .from("the registry name: gru-lm a GRU"),
        o.cell);
  visit(Field{"dropout", "dropout between recurrent layers and on the top layer's output"}.range(0, 0.99), o.dropout);
}

// What a recurrent LM carries from one forward_tokens() call to the next: h
// [layers, B, hidden] and, for the LSTM, the cells c of the same shape.
// Undefined tensors are the start of a sequence (zeros). Its size never grows
// with the sequence.
struct RecurrentState {
  at::Tensor h, c;
  bool empty() const { return !h.defined(); }
};

// Floats in one sequence's RecurrentState.
int64_t recurrent_state_floats(const RecurrentLMOptions& options);

// The LM's size for one sequence of `context` tokens (the task's: its options
// have none). UsageError for context < 1.
ModelSize recurrent_lm_size(const RecurrentLMOptions& options, int64_t context);

// The largest hidden size whose model (options otherwise as given) has at
// most `target` parameters: a recurrent model on another model's parameter
// budget. UsageError when even hidden 1 has more.
int64_t recurrent_hidden_for_parameters(RecurrentLMOptions options, int64_t target);

class RecurrentLM : public Model {
 public:
  explicit RecurrentLM(const RecurrentLMOptions& options);
  // inputs["tokens"] [B,T] long -> logits [B,T,vocab], from the zero state.
  at::Tensor forward(const data::Batch& batch) override;
  // tokens [B,n] -> logits [B,n,vocab]. With a state, the tokens continue the
  // sequence it holds (zeros when empty), and it is left holding the state
  // after the last of them: feeding a sequence in pieces gives the logits of
  // feeding it whole.
  at::Tensor forward_tokens(const at::Tensor& tokens, RecurrentState* state = nullptr);

  const RecurrentLMOptions& options() const { return options_; }
  const LiveEmbedding& embedding() const { return embed_; }

 private:
  RecurrentLMOptions options_;
  LiveEmbedding embed_{nullptr};
  LiveLSTM lstm_{nullptr};  // one of these two, by options_.cell,
  LiveGRU gru_{nullptr};    // registered as "rnn"
  LiveDropout drop_{nullptr};
  LiveLinear out_{nullptr};
};

}  // namespace qkv::models
