#pragma once
// The MHCA paper's models on a SPECT volume (inputs["spect"] [B, 1, X, Y, Z])
// and DNA-methylation beta-values (inputs["methylation"] [B, F]), as the
// authors' released code builds them, so that parameter counts reproduce the
// paper's Table 1 at the default sizes:
//   mhca       2,020,883   co-attention between CpG tokens and SPECT tokens
//   concatnet  3,824,066   per-modality projections concatenated along tokens
//   spectnet   3,793,378   the SPECT encoder alone
// All output log-probabilities [B, classes]. Every size is an option, so a
// reduced volume trains in minutes on a CPU.
#include <torch/nn/module.h>

#include <array>
#include <vector>

#include "qkv/attention/co_attention.h"
#include "qkv/models/live_layers.h"
#include "qkv/models/model.h"
#include "qkv/models/options.h"

namespace qkv::models {

// The SPECT encoder's sizes. Blocks are Conv3d(k=3, stride 1, `padding`) +
// ReLU + MaxPool3d(2) for every channel count but the last, with Dropout
// after the second block; the last Conv3d has no activation. Its output grid
// [gx, gy, gz] gives the SPECT tokens (gx*gy*gz of width channels.back()).
struct SpectEncoderOptions {
  std::vector<int64_t> volume_shape{91, 109, 91};
  std::vector<int64_t> channels{16, 32, 64, 64};
  int64_t padding = 0;
  double dropout = 0.25;

  // What the encoder's options must satisfy together: 3 axes, 2 to 8
  // convolutions, a token grid, each convolution's output within 1 GiB a
  // sample (UsageError naming `model`).
  void check(const std::string& model) const;
  // The token grid; UsageError naming the volume shape if a layer would get
  // fewer than 3 (conv) or 2 (pool) voxels along an axis.
  std::array<int64_t, 3> token_grid() const;
  int64_t tokens() const;
  // Where token t's receptive field is centred in input voxels along an axis:
  // offset + stride * t (the same for all three axes).
  double token_offset() const;
  double token_stride() const;
};

template <typename V>
void visit_fields(SpectEncoderOptions& o, V&& visit) {
  visit(
      Field{"volume_shape", "SPECT volume X, Y, Z: inputs[\"spect\"] [B, 1, X, Y, Z]"}.range(1, 4096).from("the paper"),
      o.volume_shape);
  visit(Field{"channels", "Conv3d widths; each but the last is followed by ReLU and a 2x2x2 max pool"}
            .range(1, 4096)
            .from("the paper"),
        o.channels);
  visit(Field{"padding", "Conv3d padding, 0 or 1"}.range(0, 1).from("the paper (its 7 x 9 x 7 token grid)"), o.padding);
  visit(Field{"conv_dropout", "dropout after the second convolution block"}.range(0, 0.99), o.dropout);
}

// The options MHCA, ConcatNet and SpectNet share beyond the SPECT encoder's.
// The default sizes reproduce the paper's Table 1 parameter counts with the
// released code's layers.
inline constexpr const char* kTable1Source = "the reference code (Table 1's parameter counts)";
inline Field cpg_features_field() {
  return Field{"features", "CpG sites, inputs[\"methylation\"] [B, F] (mhca: must equal the SPECT token count)"}
      .at_least(1)
      .from("the paper (441 = 7 x 9 x 7)");
}
inline Field cpg_embedding_field() {
  return Field{"embedding", "width of each CpG site's learned embedding"}.at_least(1).from("the paper");
}
inline Field co_attention_width_field() {
  return Field{"width", "co-attention (or projection) width, all heads together"}.at_least(1).from(kTable1Source);
}
inline Field classifier_hidden_field() {
  return Field{"hidden", "hidden units of the classifier"}.at_least(1).from(kTable1Source);
}
inline Field two_classes_field() { return Field{"classes", "output classes (control, PD)"}.at_least(2); }
inline Field classifier_dropout_field() {
  return Field{"dropout", "dropout after the classifier's hidden layer"}.range(0, 0.99);
}

// The batch's inputs checked against a model's options (UsageError naming the
// model and the option to set): "spect" as [B, 1, X, Y, Z], "methylation" [B, F].
at::Tensor spect_input(const data::Batch& batch, const SpectEncoderOptions& options, const std::string& model);
at::Tensor methylation_input(const data::Batch& batch, int64_t features, const std::string& model);

// [B, C, gx, gy, gz] -> [B, gx*gy*gz, C]: tokens in x-major grid order.
at::Tensor grid_to_tokens(const at::Tensor& grid);

// The SPECT encoder's size for one volume of the options' shape.
ModelSize spect_encoder_size(const SpectEncoderOptions& options);

class SpectEncoderImpl : public torch::nn::Module {
 public:
  explicit SpectEncoderImpl(const SpectEncoderOptions& options);
  // [B, 1, X, Y, Z] -> [B, channels.back(), gx, gy, gz], without a final activation.
  at::Tensor forward(const at::Tensor& volume);

 private:
  SpectEncoderOptions options_;
  std::vector<LiveConv3d> convs_;
};
TORCH_MODULE(SpectEncoder);

// A learned embedding per CpG site scaled by its beta-value:
// [B, F] -> [B, F, E], token i = x_i * E_i (E standard-normal initialised).
class MethylationEncoderImpl : public torch::nn::Module {
 public:
  MethylationEncoderImpl(int64_t features, int64_t embedding);
  at::Tensor forward(const at::Tensor& beta);
  const at::Tensor& embeddings() const { return embeddings_; }

 private:
  at::Tensor embeddings_;
};
TORCH_MODULE(MethylationEncoder);

// The co-attention block: Q = ReLU(W_q m), K = ReLU(W_k s), V = ReLU(W_v s),
// residuals ReLU(W_rk m) and ReLU(W_rq s), a trainable d_k (initialised to the
// head width), h = LayerNorm(ReLU(v' + res_k + q' + res_q)). Needs as many
// methylation tokens as SPECT tokens, since v' and q' are added token-wise.
class MultiHeadCoAttentionImpl : public torch::nn::Module {
 public:
  // key_dim_init: the trainable d_k's first value; 0 = width / heads.
  MultiHeadCoAttentionImpl(int64_t query_dim, int64_t key_dim, int64_t width, int64_t heads, double attention_dropout,
                           double key_dim_init = 0);
  struct Output {
    at::Tensor hidden;  // h [B, N, width]
    attention::CoAttentionResult attention;
  };
  Output forward(const at::Tensor& methylation_tokens, const at::Tensor& spect_tokens);
  int64_t heads() const { return heads_; }

 private:
  int64_t heads_;
  double attention_dropout_;
  LiveLinear q_{nullptr}, k_{nullptr}, v_{nullptr}, res_k_{nullptr}, res_q_{nullptr};
  LiveLayerNorm norm_{nullptr};
  at::Tensor key_dim_;
};
TORCH_MODULE(MultiHeadCoAttention);

// A model whose forward pass holds co-attention between CpG-site queries and
// SPECT tokens (mhca, mhca-x): what `qkv mhca explain` reads.
class CoAttentionModel : public Model {
 public:
  struct Explained {
    at::Tensor log_probs;
    attention::CoAttentionResult attention;  // scores, alpha_v, alpha_q [B, H, F, T]
  };
  virtual Explained forward_explained(const data::Batch& batch) = 0;
  virtual const SpectEncoderOptions& spect_options() const = 0;
};

struct MHCAOptions {
  SpectEncoderOptions spect;
  int64_t features = 441;  // CpG sites; must equal spect.tokens()
  int64_t embedding = 64;
  int64_t heads = 4;
  int64_t width = 16;  // co-attention width, all heads together
  int64_t hidden = 256;
  int64_t classes = 2;
  double dropout = 0.2;
  double attention_dropout = 0.0;
  // Initial value of the trainable d_k that divides the scores (by its square
  // root); 0 = the head width, as the authors' code does.
  double key_dim_init = 0;

  static MHCAOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(MHCAOptions& o, V&& visit) {
  visit_fields(o.spect, visit);
  visit(cpg_features_field(), o.features);
  visit(cpg_embedding_field(), o.embedding);
  visit(Field{"heads", "co-attention heads"}.at_least(1).from("the paper"), o.heads);
  visit(co_attention_width_field(), o.width);
  visit(classifier_hidden_field(), o.hidden);
  visit(two_classes_field(), o.classes);
  visit(classifier_dropout_field(), o.dropout);
  visit(Field{"attention_dropout", "dropout on the co-attention weights"}.range(0, 0.99), o.attention_dropout);
  visit(Field{"key_dim_init", "first value of the trainable d_k (scores / sqrt(d_k)); 0 = the head width"}
            .range(0, 1e6)
            .from("the reference code (0); other values our choice"),
        o.key_dim_init);
}
// The size for one sample (a volume of volume_shape and `features` CpG sites).
ModelSize mhca_size(const MHCAOptions& options);

class MHCANet : public CoAttentionModel {
 public:
  explicit MHCANet(const MHCAOptions& options);
  at::Tensor forward(const data::Batch& batch) override;
  // The forward pass with its co-attention maps (for `qkv mhca explain`).
  Explained forward_explained(const data::Batch& batch) override;
  const SpectEncoderOptions& spect_options() const override { return options_.spect; }
  const MHCAOptions& options() const { return options_; }

 private:
  MHCAOptions options_;
  MethylationEncoder methylation_{nullptr};
  SpectEncoder spect_{nullptr};
  MultiHeadCoAttention co_attention_{nullptr};
  LiveLinear h1_{nullptr}, out_{nullptr};
};

struct ConcatNetOptions {
  SpectEncoderOptions spect;
  int64_t features = 441;
  int64_t embedding = 64;
  int64_t width = 16;
  int64_t hidden = 256;
  int64_t classes = 2;
  double dropout = 0.2;

  static ConcatNetOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(ConcatNetOptions& o, V&& visit) {
  visit_fields(o.spect, visit);
  visit(cpg_features_field(), o.features);
  visit(cpg_embedding_field(), o.embedding);
  visit(co_attention_width_field(), o.width);
  visit(classifier_hidden_field(), o.hidden);
  visit(two_classes_field(), o.classes);
  visit(classifier_dropout_field(), o.dropout);
}
ModelSize concatnet_size(const ConcatNetOptions& options);

// Cross-modal baseline: each modality's tokens projected to `width`
// separately, concatenated along the token axis, the same head as MHCA.
class ConcatNet : public Model {
 public:
  explicit ConcatNet(const ConcatNetOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  ConcatNetOptions options_;
  MethylationEncoder methylation_{nullptr};
  SpectEncoder spect_{nullptr};
  LiveLinear methylation_proj_{nullptr}, spect_proj_{nullptr}, h1_{nullptr}, out_{nullptr};
};

struct SpectNetOptions {
  SpectEncoderOptions spect;
  int64_t hidden = 128;
  int64_t classes = 2;

  static SpectNetOptions from_json(const nlohmann::json& j);
  nlohmann::json to_json() const { return fields_to_json(*this); }
};

template <typename V>
void visit_fields(SpectNetOptions& o, V&& visit) {
  visit_fields(o.spect, visit);
  visit(classifier_hidden_field(), o.hidden);
  visit(two_classes_field(), o.classes);
}
ModelSize spectnet_size(const SpectNetOptions& options);

// Unimodal baseline: the SPECT encoder with a ReLU, then Linear -> ReLU -> Linear.
class SpectNet : public Model {
 public:
  explicit SpectNet(const SpectNetOptions& options);
  at::Tensor forward(const data::Batch& batch) override;

 private:
  SpectNetOptions options_;
  SpectEncoder spect_{nullptr};
  LiveLinear h1_{nullptr}, out_{nullptr};
};

}  // namespace qkv::models
