#pragma once
// mhca-x: a co-attention model built so that the attention is the only way
// from a CpG site to the SPECT volume, our design beside the paper's mhca
// (models/mhca.h, kept exactly as the authors built it). What differs from
// mhca, each an option so that its effect is a flag:
//   - no bypass: the classifier never reads the SPECT tokens and the CpG
//     tokens side by side. Each CpG site i has a readout on [its value, the
//     SPECT value it attended to]; the SPECT evidence of its own is a
//     separate additive logit (SpectNet's head, smaller, on LayerNorm'd
//     features: the ReLU'd tokens are all >= 0, and one Adam step on an
//     uncentred 8,064-wide input can push every hidden unit below zero, which
//     left such heads predicting the prior on some seeds).
//   - a bilinear readout ("readout": "bilinear"): site i adds
//     b_i * u_i . v_i to the logits, b_i its beta-value (below), v_i
//     the value it attended to (value_dim numbers per head, 1 by default),
//     u_i its own weights, zero at the start; "site_linear" adds b_i * a_i,
//     the site's evidence alone (off by default: F free weights are a
//     logistic regression on every CpG site, which with standardised values
//     fitted the cross-modal cohort's training set within a few epochs). Few
//     parameters per site, and from the first step the gradient on a token's
//     weight carries the correlation of (site value x token value) with the
//     label, which is what the attention has to find. "mlp" is a hidden
//     layer on [CpG token, attended values] with per-site output weights
//     instead; on the cross-modal cohort it fitted the training set before
//     its attention found anything (docs/reproduction.md).
//   - signed, normalised scores ("scores": "cosine"): no ReLU on Q and K,
//     the cosine of query and key per head times a learnable temperature
//     (exp of a parameter, starting at "temperature_init" = 4), so a row's
//     scores spread over [-4, 4] from the start instead of sharing an offset;
//     "relu_dot" is mhca's ReLU(Q) ReLU(K)^T / sqrt(d).
//   - positions: a learned embedding per SPECT token added to the keys
//     ("positions"), so left and right differ to the attention. Values are
//     the tokens' content alone, standardised per token.
//   - any CpG count: queries and keys are never added token-wise.
//   - b_i is the raw beta-value; "standardise" scales it per site by the
//     mean and variance of the training batches seen (not the current
//     batch's). Off by default: at unit variance the 252 sites' terms fitted
//     the cross-modal cohort's training set before anything else was learnt,
//     while raw beta-values (sd ~0.05-0.1) keep the sites' term slow next to
//     the SPECT head. The query is made from a learned embedding of the site
//     alone, so where a site looks does not move with its value (the mlp
//     readout's CpG token is b_i times a second embedding plus that one).
// Ablations ("attention": "uniform" weights every token 1/T; "values":
// "zero" replaces the attended values by zeros), registered as mhca-x-uniform
// and mhca-x-no-values so that one `mhca cv` runs all three: the model uses
// co-attention only where it beats both.
#include <torch/nn/module.h>

#include <string>

#include "qkv/models/live_layers.h"
#include "qkv/models/mhca.h"

namespace qkv::models {

struct MHCAXOptions {
  SpectEncoderOptions spect;
  int64_t features = 441;  // CpG sites, any count
  int64_t embedding = 32;
  int64_t heads = 4;
  int64_t width = 32;                    // query and key width, all heads together
  int64_t value_dim = 1;                 // attended values per head
  std::string value_source = "content";  // content | intensity
  int64_t readout_hidden = 32;           // "mlp" readout only
  int64_t hidden = 64;                   // hidden units of the SPECT head
  int64_t classes = 2;
  double dropout = 0.2;           // on the SPECT head's hidden layer
  double site_dropout = 0;        // bilinear readout: sites' terms dropped per training sample
  std::string scores = "cosine";  // cosine | relu_dot
  double temperature_init = 4;    // cosine scores' first temperature
  bool positions = true;
  bool standardise = false;
  std::string readout = "bilinear";   // bilinear | mlp
  bool site_linear = false;           // bilinear: also b_i * a_i
  std::string attention = "learned";  // learned | uniform
  std::string values = "attended";    // attended | zero

  // `name` (mhca-x, mhca-x-uniform, mhca-x-no-values) sets the defaults of
  // "attention" and "values" and names the model in errors.
  static MHCAXOptions from_json(const nlohmann::json& j, const std::string& name = "mhca-x");
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(MHCAXOptions& o, V&& visit) {
  constexpr const char* ours = "our choice";
  visit_fields(o.spect, visit);
  visit(Field{"features", "CpG sites, inputs[\"methylation\"] [B, F]; any count (not tied to the SPECT tokens)"}.range(
            1, 1000000),
        o.features);
  visit(Field{"embedding", "width of a CpG token (standardised beta-value x embedding + site embedding)"}
            .range(1, 4096)
            .from(ours),
        o.embedding);
  visit(Field{"heads", "attention heads"}.range(1, 64).from("the paper (4)"), o.heads);
  visit(Field{"width", "query and key width, all heads together"}.range(1, 4096).from(ours), o.width);
  visit(Field{"value_dim", "numbers a head gathers from the SPECT tokens for each site"}.range(1, 4096).from(ours),
        o.value_dim);
  visit(Field{"value_source",
              "content (a learned projection of the encoder's token) or intensity (the input's mean over the token's "
              "cell, no parameters)"}
            .one_of("content|intensity")
            .from(ours),
        o.value_source);
  visit(Field{"readout_hidden", "hidden units of the mlp readout"}.range(1, 4096).from(ours), o.readout_hidden);
  visit(Field{"hidden", "hidden units of the SPECT head (its additive logit)"}.range(1, 65536).from(ours), o.hidden);
  visit(Field{"classes", "output classes (control, PD)"}.range(2, 1000), o.classes);
  visit(Field{"dropout", "dropout on the SPECT head's hidden layer"}.range(0, 0.99).from(ours), o.dropout);
  visit(Field{"site_dropout", "share of CpG sites whose readout term is dropped in each training sample"}
            .range(0, 0.99)
            .from(ours),
        o.site_dropout);
  visit(Field{"scores", "cosine (signed, normalised, times a learnable temperature) or relu_dot (mhca's)"}
            .one_of("cosine|relu_dot")
            .from(ours),
        o.scores);
  visit(Field{"temperature_init", "first temperature of the cosine scores (scores span +-temperature)"}
            .range(1e-3, 1e3)
            .from(ours),
        o.temperature_init);
  visit(Field{"positions", "learned embedding per SPECT token, added before keys and values"}.from(ours), o.positions);
  visit(Field{"standardise", "standardise each site's beta-values by the training batches' running mean and variance"}
            .from(ours),
        o.standardise);
  visit(Field{"readout", "bilinear (site value x attended value, per-site weights) or mlp"}
            .one_of("bilinear|mlp")
            .from(ours),
        o.readout);
  visit(Field{"site_linear",
              "bilinear readout: also a per-site term linear in the site's value (methylation evidence alone)"}
            .from(ours),
        o.site_linear);
  visit(Field{"attention", "learned, or uniform (ablation: every token weighs 1/T)"}.one_of("learned|uniform"),
        o.attention);
  visit(Field{"values", "attended, or zero (ablation: the readout gets zeros for the attended values)"}.one_of(
            "attended|zero"),
        o.values);
}
ModelSize mhca_x_size(const MHCAXOptions& options);

class MHCAXNet : public CoAttentionModel {
 public:
  explicit MHCAXNet(const MHCAXOptions& options);
  at::Tensor forward(const data::Batch& batch) override;
  Explained forward_explained(const data::Batch& batch) override;
  const SpectEncoderOptions& spect_options() const override { return options_.spect; }
  const MHCAXOptions& options() const { return options_; }

 private:
  MHCAXOptions options_;
  SpectEncoder spect_{nullptr};
  at::Tensor value_embedding_, site_embedding_, positions_, log_temperature_;
  at::Tensor site_linear_, site_bilinear_, site_out_, site_bias_;
  LiveLinear token_proj_{nullptr}, q_{nullptr}, k_{nullptr}, v_{nullptr}, readout_{nullptr};
  LiveLinear spect_h1_{nullptr}, spect_out_{nullptr};
  LiveLayerNorm token_norm_{nullptr}, spect_norm_{nullptr};
  at::Tensor beta_mean_, beta_var_, value_mean_, value_var_, batches_;
  at::Tensor standardised(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& var);
};

}  // namespace qkv::models
