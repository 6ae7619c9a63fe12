#include "qkv/models/mhca_x.h"

#include <cmath>

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/layers/weight_binding.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {
namespace {

// [B, N, W] -> [B, H, N, W / H]
at::Tensor split_heads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}
// [B, H, N, d] -> [B, N, H * d]
at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).contiguous().view({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

}  // namespace

MHCAXOptions MHCAXOptions::from_json(const nlohmann::json& j, const std::string& name) {
  MHCAXOptions defaults;
  if (name == "mhca-x-uniform") defaults.attention = "uniform";
  if (name == "mhca-x-no-values") defaults.values = "zero";
  const auto o = read_model_options(name, j, defaults);
  o.spect.check(name);
  if (o.value_source == "intensity" && o.value_dim != 1)
    throw UsageError(name + " option 'value_source' = \"intensity\" gives one value per token: set 'value_dim' to 1");
  if (o.width % o.heads != 0)
    throw UsageError(name + " option 'width' = " + std::to_string(o.width) +
                     " is not divisible by 'heads' = " + std::to_string(o.heads));
  return o;
}

// Activations of one sample (estimate): the encoder's and its tokens; the
// token projection, positions and LayerNorm (3 T W), keys and values; the
// CpG tokens (2 F E), queries (F W), the normalised q and k, the scores and
// both softmaxes (4 H F T), the attended values, the readout, the SPECT head.
ModelSize mhca_x_size(const MHCAXOptions& o) {
  const int64_t tokens = o.spect.tokens(), channels = o.spect.channels.back();
  const int64_t F = o.features, W = o.width, E = o.embedding, R = o.readout_hidden;
  const int64_t V = sat_mul(o.heads, o.value_dim), C = o.classes;
  const int64_t readout = o.readout == "bilinear" ? sat_mul(F, sat_add(o.site_linear ? C : int64_t{0}, sat_mul(V, C)))
                                                  : sat_add(linear_parameters(sat_add(E, V), R), sat_mul(F, R, C));
  ModelSize s = spect_encoder_size(o.spect);
  s.parameters =
      sat_add(s.parameters, sat_mul(2, F, E), linear_parameters(channels, W),
              o.positions ? sat_mul(tokens, W) : int64_t{0}, norm_parameters(W), linear_parameters(E, W),
              linear_parameters(W, W), o.value_source == "content" ? linear_parameters(W, V, false) : int64_t{0},
              o.scores == "cosine" ? o.heads : int64_t{0}, readout, C, norm_parameters(sat_mul(tokens, channels)),
              linear_parameters(sat_mul(tokens, channels), o.hidden), linear_parameters(o.hidden, C));
  s.activation_floats =
      sat_add(s.activation_floats, sat_mul(tokens, channels), sat_mul(5, tokens, W), sat_mul(2, F, E), sat_mul(3, F, W),
              sat_mul(4, o.heads, F, tokens), sat_mul(2, F, V), o.readout == "mlp" ? sat_mul(2, F, R) : sat_mul(F, C),
              sat_mul(2, tokens, channels), sat_mul(3, o.hidden), sat_mul(4, C));
  return s;
}

MHCAXNet::MHCAXNet(const MHCAXOptions& o) : options_(o) {
  const int64_t tokens = o.spect.tokens(), channels = o.spect.channels.back();
  const int64_t V = o.heads * o.value_dim;
  spect_ = register_module("spect_encoder", SpectEncoder(o.spect));
  value_embedding_ = register_parameter("value_embedding", torch::randn({o.features, o.embedding}));
  site_embedding_ = register_parameter("site_embedding", torch::randn({o.features, o.embedding}));
  if (o.standardise) {
    beta_mean_ = register_buffer("beta_mean", torch::zeros({o.features}));
    beta_var_ = register_buffer("beta_var", torch::ones({o.features}));
  }
  value_mean_ = register_buffer("value_mean", torch::zeros({tokens, V}));
  value_var_ = register_buffer("value_var", torch::ones({tokens, V}));
  batches_ = register_buffer("batches", torch::zeros({1}));
  token_proj_ = register_module("token_proj", LiveLinear(channels, o.width));
  if (o.positions) positions_ = register_parameter("positions", torch::randn({tokens, o.width}));
  token_norm_ = register_module("token_norm", LiveLayerNorm(torch::nn::LayerNormOptions({o.width})));
  q_ = register_module("q", LiveLinear(o.embedding, o.width));
  k_ = register_module("k", LiveLinear(o.width, o.width));
  if (o.value_source == "content")
    v_ = register_module("v", LiveLinear(torch::nn::LinearOptions(o.width, V).bias(false)));
  if (o.scores == "cosine")
    log_temperature_ = register_parameter("log_temperature", torch::full({o.heads}, std::log(o.temperature_init)));
  // The sites' weights start at zero: the first logits are the SPECT head's
  // alone, and the sites' term grows as it is learned instead of adding F
  // random readouts' noise (our choice, like zero-initialised residual branches).
  if (o.readout == "bilinear") {
    if (o.site_linear) site_linear_ = register_parameter("site_linear", torch::zeros({o.features, o.classes}));
    site_bilinear_ = register_parameter("site_bilinear", torch::zeros({o.features, V, o.classes}));
  } else {
    readout_ = register_module("readout", LiveLinear(o.embedding + V, o.readout_hidden));
    site_out_ = register_parameter("site_out", torch::zeros({o.features, o.readout_hidden, o.classes}));
  }
  site_bias_ = register_parameter("site_bias", torch::zeros({o.classes}));
  spect_norm_ = register_module("spect_norm", LiveLayerNorm(torch::nn::LayerNormOptions({tokens * channels})));
  spect_h1_ = register_module("spect_h1", LiveLinear(tokens * channels, o.hidden));
  spect_out_ = register_module("spect_out", LiveLinear(o.hidden, o.classes));
}

// x [B, ...] minus its mean over the training batches seen so far, over its
// standard deviation (cumulative averages of the batch moments, per
// position of x's other axes, kept in buffers so a checkpoint carries them).
// Not a BatchNorm: with the current batch's statistics a sample's input
// depends on the other samples of its batch, and on the cross-modal cohort
// the model learnt that instead of the data (training accuracy up,
// validation at the prior from the second epoch).
at::Tensor MHCAXNet::standardised(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& var) {
  if (is_training()) {
    torch::NoGradGuard no_grad;
    const double n = live(batches_).item<double>() + 1;
    mean.mul_((n - 1) / n).add_(x.mean(0) / n);
    var.mul_((n - 1) / n).add_(x.var(0, /*unbiased=*/false) / n);
  }
  return (x - mean) / (var + 1e-6).sqrt();
}

MHCAXNet::Explained MHCAXNet::forward_explained(const data::Batch& batch) {
  const auto& o = options_;
  const auto beta = methylation_input(batch, o.features, "mhca-x");
  const auto volume = spect_input(batch, o.spect, "mhca-x");            // [B, 1, X, Y, Z]
  const auto s = torch::relu(grid_to_tokens(spect_->forward(volume)));  // [B, T, C]
  const auto spect_logits = spect_out_->forward(
      torch::dropout(torch::relu(spect_h1_->forward(spect_norm_->forward(s.flatten(1)))), o.dropout, is_training()));

  // Keys see the token's content and place; values its content only,
  // standardised per token over the training data. A value with a constant
  // part (a position, a bias, a token's mean) would turn site value x
  // attended value into a free linear term per site: a logistic regression
  // on every CpG site, which fitted the training set at once.
  const auto content = token_norm_->forward(token_proj_->forward(s));  // [B, T, W]
  const auto tokens = o.positions ? content + live(positions_) : content;
  const auto value = o.standardise ? standardised(beta, live(beta_mean_), live(beta_var_)) : beta;  // [B, F]
  // "intensity": the input volume's mean over each token's cell, the same
  // number for every head.
  const auto raw_values =
      o.value_source == "content"
          ? v_->forward(content)
          : torch::adaptive_avg_pool3d(volume, o.spect.token_grid()).flatten(2).transpose(1, 2).repeat({1, 1, o.heads});
  const auto token_values = standardised(raw_values, live(value_mean_), live(value_var_));  // [B, T, V]
  if (is_training()) {
    torch::NoGradGuard no_grad;
    live(batches_).add_(1);
  }
  // Where a site looks is a property of the site, not of its value: a query
  // that moved with the value let the attention of every noise site follow
  // its values, and the model fitted the training set before it found the
  // planted regions (our choice; docs/reproduction.md).
  const auto q = split_heads(q_->forward(live(site_embedding_)).unsqueeze(0).expand({beta.size(0), -1, -1}), o.heads);
  const auto k = split_heads(k_->forward(tokens), o.heads);  // [B, H, T, d]
  const auto v = split_heads(token_values, o.heads);         // [B, H, T, value_dim]
  at::Tensor scores;
  if (o.scores == "cosine") {
    namespace F = torch::nn::functional;
    const auto temperature = live(log_temperature_).exp().view({1, o.heads, 1, 1});
    scores = torch::matmul(F::normalize(q, F::NormalizeFuncOptions().dim(-1)),
                           F::normalize(k, F::NormalizeFuncOptions().dim(-1)).transpose(-1, -2)) *
             temperature;
  } else {
    scores = torch::matmul(torch::relu(q), torch::relu(k).transpose(-1, -2)) /
             std::sqrt(static_cast<double>(o.width / o.heads));
  }
  Explained out;
  auto& a = out.attention;
  a.scores = scores;
  a.alpha_v = o.attention == "uniform" ? torch::full_like(scores, 1.0 / static_cast<double>(scores.size(-1)))
                                       : torch::softmax(scores, -1);
  a.alpha_q = o.attention == "uniform" ? torch::full_like(scores, 1.0 / static_cast<double>(scores.size(-2)))
                                       : torch::softmax(scores, -2);
  a.values_out = o.values == "zero" ? torch::zeros({beta.size(0), o.features, o.heads * o.value_dim}, s.options())
                                    : merge_heads(torch::matmul(a.alpha_v, v));  // [B, F, V]
  a.queries_out = merge_heads(torch::matmul(a.alpha_q.transpose(-1, -2), q));    // [B, T, W], for explain only

  at::Tensor site_logits;
  if (o.readout == "bilinear") {
    const auto kept = torch::dropout(value, o.site_dropout, is_training());
    site_logits = torch::einsum("bf,bfv,fvc->bc", {kept, a.values_out, live(site_bilinear_)});
    if (o.site_linear) site_logits = site_logits + torch::einsum("bf,fc->bc", {value, live(site_linear_)});
  } else {
    const auto cpg = value.unsqueeze(2) * live(value_embedding_) + live(site_embedding_);     // [B, F, E]
    const auto hidden = torch::relu(readout_->forward(torch::cat({cpg, a.values_out}, -1)));  // [B, F, R]
    site_logits = torch::einsum("bfr,frc->bc", {hidden, live(site_out_)});
  }
  out.log_probs = torch::log_softmax(spect_logits + site_logits + live(site_bias_), -1);
  return out;
}

at::Tensor MHCAXNet::forward(const data::Batch& batch) { return forward_explained(batch).log_probs; }

}  // namespace qkv::models
