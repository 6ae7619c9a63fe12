#include "qkv/models/transformer_lm.h"

#include <torch/torch.h>

#include <cmath>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/errors.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/layers/weight_binding.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {

TransformerLMOptions TransformerLMOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<TransformerLMOptions>("transformer-lm", j);
  if (o.kv_heads > 0 && o.heads % o.kv_heads != 0)
    throw ConfigError("kv_heads",
                      "must divide heads " + std::to_string(o.heads) + ", got " + std::to_string(o.kv_heads));
  if (o.sinks > 0 && o.window == 0) throw ConfigError("sinks", "needs a window (sinks are kept besides the window)");
  if ((o.dk == 0 || o.dv == 0) && o.d_model % o.heads != 0)
    throw UsageError("transformer-lm: d_model " + std::to_string(o.d_model) + " is not divisible by heads " +
                     std::to_string(o.heads) + " (or set dk and dv)");
  if (o.d_model % 2 != 0) throw UsageError("transformer-lm: d_model must be even (sinusoidal positions)");
  return o;
}

attention::KVCacheSettings kv_cache_settings(const TransformerLMOptions& o, attention::CacheDtype dtype, int64_t batch,
                                             c10::Device device) {
  attention::KVCacheSettings s;
  s.layers = o.layers;
  s.batch = batch;
  s.kv_heads = o.head_kv();
  s.dk = o.head_dk();
  s.dv = o.head_dv();
  s.dtype = dtype;
  s.device = device;
  s.window = o.window;
  s.sinks = o.sinks;
  return s;
}

at::Tensor sinusoidal_positions(int64_t offset, int64_t n, int64_t d, const at::TensorOptions& options) {
  auto pos = torch::arange(offset, offset + n, options.dtype(torch::kDouble)).unsqueeze(1);  // [n,1]
  auto i = torch::arange(0, d / 2, options.dtype(torch::kDouble));                           // [d/2]
  auto angle = pos * torch::exp(i * (-2.0 * std::log(10000.0) / static_cast<double>(d)));    // [n,d/2]
  // Interleave sin (even columns) and cos (odd columns).
  return torch::stack({torch::sin(angle), torch::cos(angle)}, 2).reshape({n, d}).to(options.dtype());
}

TransformerBlockImpl::TransformerBlockImpl(const TransformerLMOptions& o, bool causal)
    : causal(causal), window(o.window), sinks(o.sinks) {
  ln_attn = register_module("ln_attn", LiveLayerNorm(torch::nn::LayerNormOptions({o.d_model})));
  attn = register_module("attn", attention::MultiHeadAttention(attention::MultiHeadAttentionOptions(o.d_model, o.heads)
                                                                   .kv_heads(o.kv_heads)
                                                                   .qk_dim(o.head_dk())
                                                                   .v_dim(o.head_dv())
                                                                   .dropout(o.dropout)));
  ln_mlp = register_module("ln_mlp", LiveLayerNorm(torch::nn::LayerNormOptions({o.d_model})));
  mlp_in = register_module("mlp_in", LiveLinear(o.d_model, o.hidden()));
  mlp_out = register_module("mlp_out", LiveLinear(o.hidden(), o.d_model));
  drop = register_module("drop", LiveDropout(o.dropout));
}

at::Tensor TransformerBlockImpl::forward(const at::Tensor& x, attention::KVCache* cache, int64_t layer,
                                         at::Tensor* mlp_hidden) {
  attention::SdpaOptions mask;
  mask.causal = causal;
  // The cache applies the window itself; a whole sequence needs the mask.
  if (window > 0 && !cache) mask.bool_mask = attention::window_attend_mask(x.size(1), window, sinks, x.device());
  const auto h = ln_attn->forward(x);
  const auto a = cache ? attn->forward_cached(h, *cache, layer, mask).output : attn->forward(h, h, h, mask).output;
  auto y = x + drop->forward(a);
  auto hidden = torch::gelu(mlp_in->forward(ln_mlp->forward(y)));
  if (mlp_hidden) *mlp_hidden = hidden;
  return observed(*this, {x}, y + drop->forward(mlp_out->forward(hidden)));
}

// Activations on T tokens: the two LayerNorms' outputs, q, k and v, the
// h x T x T attention weights, the heads' output, W_O's output, the MLP's
// hidden units before and after the GELU, its output and the two residual
// sums. The weights are what the naive attention keeps (sdpa.h: off the CPU,
// with attention dropout, under 128 keys); the CPU's tiled kernel keeps none,
// so there long sequences are overestimated (the LM 1.5x at 256 tokens, 3.4x for
// xyz-transformer at 1024 points, measured with the allocator's counters).
ModelSize transformer_block_size(const TransformerLMOptions& o, int64_t tokens) {
  const int64_t d = o.d_model, h = o.heads, g = o.head_kv(), r = o.head_dk(), dv = o.head_dv();
  const int64_t hidden = o.mlp_hidden > 0 ? o.mlp_hidden : sat_mul(4, d);  // not o.hidden(): 4 * d may overflow
  const int64_t attention = sat_add(sat_mul(h, r, d), sat_mul(g, r, d), sat_mul(g, dv, d),  // W_q, W_k, W_v
                                    sat_mul(h, dv, d),                                      // W_O
                                    sat_mul(h, r), sat_mul(g, r), sat_mul(g, dv), d);       // their biases
  ModelSize s;
  s.parameters =
      sat_add(sat_mul(2, norm_parameters(d)), attention, linear_parameters(d, hidden), linear_parameters(hidden, d));
  const int64_t per_token =
      sat_add(sat_mul(5, d), sat_mul(h, sat_add(sat_mul(2, r), sat_mul(2, dv))), sat_mul(2, hidden));
  s.activation_floats = sat_add(sat_mul(tokens, per_token), sat_mul(h, tokens, tokens));
  return s;
}

// Activations: the embedding and its sum with the positions, every block,
// the final LayerNorm, the logits and their log-softmax in the loss.
ModelSize transformer_lm_size(const TransformerLMOptions& o, int64_t context) {
  check_points("transformer-lm", context);
  const auto block = transformer_block_size(o, context);
  ModelSize s;
  s.parameters = sat_add(sat_mul(o.vocab, o.d_model), sat_mul(o.layers, block.parameters), norm_parameters(o.d_model));
  s.activation_floats = sat_add(sat_mul(o.layers, block.activation_floats),
                                sat_mul(context, sat_add(sat_mul(3, o.d_model), sat_mul(2, o.vocab))));
  return s;
}

TransformerLM::TransformerLM(const TransformerLMOptions& o) : options_(o) {
  embed_ = register_module("embed", LiveEmbedding(o.vocab, o.d_model));
  // Small embeddings keep the tied unembedding's first logits near uniform.
  torch::NoGradGuard no_grad;
  embed_->weight.normal_(0.0, 0.02);
  auto list = torch::nn::ModuleList();
  for (int64_t l = 0; l < o.layers; ++l) {
    blocks_.push_back(TransformerBlock(o));
    list->push_back(blocks_.back());
  }
  register_module("blocks", list);  // parameters named blocks.<l>.attn.w_q, as in PyTorch
  ln_final_ = register_module("ln_final", LiveLayerNorm(torch::nn::LayerNormOptions({o.d_model})));
}

at::Tensor TransformerLM::embed(const at::Tensor& tokens, int64_t offset) {
  if (tokens.dim() != 2) throw UsageError("transformer-lm: tokens must be [B, T]");
  // sqrt(D) balances the small token embedding against unit-size positions.
  auto x = embed_->forward(tokens) * std::sqrt(static_cast<double>(options_.d_model));
  return x + sinusoidal_positions(offset, tokens.size(1), options_.d_model, x.options()).unsqueeze(0);
}

at::Tensor TransformerLM::forward_tokens(const at::Tensor& tokens, attention::KVCache* cache) {
  // Each layer's attention checks the cache's heads and widths; what only
  // the model knows is checked here: another model's cache would give other
  // logits, with no error, and positions counted from another length.
  if (cache) {
    const auto& s = cache->settings();
    if (s.layers != options_.layers || s.window != options_.window || s.sinks != options_.sinks)
      throw UsageError("transformer-lm: the KV cache has " + std::to_string(s.layers) + " layer(s), window " +
                       std::to_string(s.window) + " and " + std::to_string(s.sinks) + " sink(s); this model has " +
                       std::to_string(options_.layers) + ", window " + std::to_string(options_.window) + " and " +
                       std::to_string(options_.sinks) + " (make it with the model's settings)");
  }
  auto x = embed(tokens, cache ? cache->length() : 0);
  for (int64_t l = 0; l < options_.layers; ++l) x = blocks_[static_cast<size_t>(l)]->forward(x, cache, l);
  return at::linear(ln_final_->forward(x), live(embed_->weight));
}

at::Tensor TransformerLM::forward(const data::Batch& batch) { return forward_tokens(batch.input("tokens")); }

at::Tensor TransformerLM::mlp_activations(const at::Tensor& tokens, int64_t layer) {
  if (layer < 0 || layer >= options_.layers) throw UsageError("transformer-lm: no layer " + std::to_string(layer));
  auto x = embed(tokens, 0);
  at::Tensor hidden;
  for (int64_t l = 0; l <= layer; ++l) x = blocks_[static_cast<size_t>(l)]->forward(x, nullptr, l, &hidden);
  return hidden;
}

}  // namespace qkv::models
