#pragma once
// A decoder-only transformer on bytes: token embedding + sinusoidal positions,
// L pre-LayerNorm blocks (causal multi-head attention, then the MLP
// W2 act(W1 x)), each with a residual, a final LayerNorm and an unembedding
// tied to the token embedding. forward_tokens() with a KV cache processes only
// the new positions and attends over the cached keys and values.
#include <torch/nn/modules/dropout.h>

#include "qkv/attention/multi_head_attention.h"
#include "qkv/models/byte_vocab.h"
#include "qkv/models/live_layers.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"

namespace qkv::attention {
class KVCache;
}

namespace qkv::models {

struct TransformerLMOptions {
  int64_t vocab = kByteVocab;
  int64_t d_model = 128;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 0;    // key/value heads, a divisor of heads (1 = multi-query); 0 = heads
  int64_t dk = 0;          // per-head query/key width r; 0 = d_model / heads
  int64_t dv = 0;          // per-head value width; 0 = d_model / heads
  int64_t mlp_hidden = 0;  // 0 = 4 * d_model
  double dropout = 0.0;
  int64_t window = 0;  // each position attends the last `window` positions only; 0 = all before it
  int64_t sinks = 0;   // with a window: the first positions every position may attend

  static TransformerLMOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const { return fields_to_json(*this); }
  int64_t head_dk() const { return dk > 0 ? dk : d_model / heads; }
  int64_t head_dv() const { return dv > 0 ? dv : d_model / heads; }
  int64_t hidden() const { return mlp_hidden > 0 ? mlp_hidden : 4 * d_model; }
  int64_t head_kv() const { return kv_heads > 0 ? kv_heads : heads; }
};

template <typename V>
void visit_fields(TransformerLMOptions& o, V&& visit) {
  visit(vocab_field(), o.vocab);
  visit(Field{"d_model", "model width"}.at_least(1), o.d_model);
  visit(Field{"layers", "transformer blocks"}.at_least(1), o.layers);
  visit(Field{"heads", "attention heads per block"}.at_least(1), o.heads);
  visit(Field{"kv_heads", "key/value heads, a divisor of heads (1 = multi-query, heads = multi-head); 0 = heads"}
            .at_least(0)
            .from("Shazeer 2019, Ainslie et al. 2023"),
        o.kv_heads);
  visit(Field{"dk", "per-head query/key width r; 0 = d_model / heads"}.at_least(0), o.dk);
  visit(Field{"dv", "per-head value width; 0 = d_model / heads"}.at_least(0), o.dv);
  visit(Field{"mlp_hidden", "hidden units of each block's MLP; 0 = 4 * d_model"}.at_least(0).from(
            "Vaswani et al.'s ratio"),
        o.mlp_hidden);
  visit(Field{"dropout", "dropout on the attention weights and on each block's two residual branches"}.range(0, 0.99),
        o.dropout);
  visit(Field{"window", "sliding window: each position attends the last `window` positions; 0 = all"}.at_least(0).from(
            "our choice"),
        o.window);
  visit(Field{"sinks", "with a window: the first positions every position may still attend"}.at_least(0).from(
            "Xiao et al. 2023"),
        o.sinks);
}

class TransformerBlockImpl : public torch::nn::Module {
 public:
  // causal = false gives the encoder block of the point-cloud baseline.
  explicit TransformerBlockImpl(const TransformerLMOptions& o, bool causal = true);
  // x [B,T,D]. With a cache, x holds the positions after the cached ones.
  // mlp_hidden, when given, receives the MLP's hidden units after the
  // nonlinearity (how much each "key" matched), [B,T,hidden].
  at::Tensor forward(const at::Tensor& x, attention::KVCache* cache, int64_t layer, at::Tensor* mlp_hidden = nullptr);

  LiveLayerNorm ln_attn{nullptr}, ln_mlp{nullptr};
  attention::MultiHeadAttention attn{nullptr};
  LiveLinear mlp_in{nullptr}, mlp_out{nullptr};  // W1 [hidden, D], W2 [D, hidden]
  LiveDropout drop{nullptr};
  bool causal;
  int64_t window = 0, sinks = 0;
};
TORCH_MODULE(TransformerBlock);

// The size of one TransformerBlockImpl(options) on `tokens` positions of one
// sample (also the point-cloud baseline's encoder block).
ModelSize transformer_block_size(const TransformerLMOptions& options, int64_t tokens);
// The LM's size for one sequence of `context` tokens (its options have no
// context: the task's). UsageError for context < 1.
ModelSize transformer_lm_size(const TransformerLMOptions& options, int64_t context);

class TransformerLM : public Model {
 public:
  explicit TransformerLM(const TransformerLMOptions& options);
  // inputs["tokens"] [B,T] long -> logits [B,T,vocab]
  at::Tensor forward(const data::Batch& batch) override;
  // tokens [B,n]; without a cache they are positions 0..n-1, with one they
  // follow the cache's current length, and their keys and values are appended.
  at::Tensor forward_tokens(const at::Tensor& tokens, attention::KVCache* cache = nullptr);
  // The hidden activations of block `layer`'s MLP for every position, [B,T,hidden].
  at::Tensor mlp_activations(const at::Tensor& tokens, int64_t layer);

  const TransformerLMOptions& options() const { return options_; }
  const LiveEmbedding& embedding() const { return embed_; }
  const LiveLayerNorm& final_norm() const { return ln_final_; }
  TransformerBlock& block(int64_t layer) { return blocks_.at(static_cast<size_t>(layer)); }

 private:
  at::Tensor embed(const at::Tensor& tokens, int64_t offset);

  TransformerLMOptions options_;
  LiveEmbedding embed_{nullptr};
  std::vector<TransformerBlock> blocks_;
  LiveLayerNorm ln_final_{nullptr};
};

// The KV cache this model decodes with: its layers, kv heads, widths and
// window, `batch` sequences of `dtype` on `device` (sizes and limits left at
// the settings' defaults for the caller).
attention::KVCacheSettings kv_cache_settings(const TransformerLMOptions& options, attention::CacheDtype dtype,
                                             int64_t batch, c10::Device device);

// sin/cos positions [n, d] for positions offset .. offset+n-1 (Vaswani et al.).
at::Tensor sinusoidal_positions(int64_t offset, int64_t n, int64_t d, const at::TensorOptions& options);

}  // namespace qkv::models
