#include "qkv/models/mhca.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/layers/part_hooks.h"
#include "qkv/layers/weight_binding.h"
#include "qkv/models/options.h"
#include "qkv/models/size_arithmetic.h"

namespace qkv::models {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (auto v : shape) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

}  // namespace

at::Tensor spect_input(const data::Batch& batch, const SpectEncoderOptions& o, const std::string& model) {
  auto x = batch.input("spect");
  if (x.dim() == 4) x = x.unsqueeze(1);
  const auto& s = o.volume_shape;
  if (x.dim() != 5 || x.size(1) != 1 || x.size(2) != s[0] || x.size(3) != s[1] || x.size(4) != s[2])
    throw UsageError(model + ": spect input has shape " + shape_text(x.sizes().vec()) + ", expected [B, 1, " +
                     shape_text(s) + "] (set the model option volume_shape)");
  return x;
}

at::Tensor methylation_input(const data::Batch& batch, int64_t features, const std::string& model) {
  const auto& x = batch.input("methylation");
  if (x.dim() != 2 || x.size(1) != features)
    throw UsageError(model + ": methylation input has shape " + shape_text(x.sizes().vec()) + ", expected [B, " +
                     std::to_string(features) + "] (set the model option features)");
  return x;
}

at::Tensor grid_to_tokens(const at::Tensor& grid) { return grid.flatten(2).transpose(1, 2); }

void SpectEncoderOptions::check(const std::string& model) const {
  if (volume_shape.size() != 3)
    throw UsageError(model + " option 'volume_shape' must have 3 sizes (got " + shape_text(volume_shape) + ")");
  if (channels.size() < 2 || channels.size() > 8)
    throw UsageError(model + " option 'channels' must list 2 to 8 convolutions");
  token_grid();
  // Each convolution's float32 output for one sample (our bound: 1 GiB; the
  // paper's sizes at 91x109x91 need 52 MB). Larger would not fit a batch in
  // memory, and failing here beats the kernel killing the process mid-epoch.
  constexpr double kMaxActivationBytes = 1024.0 * 1024 * 1024;
  std::array<double, 3> in{static_cast<double>(volume_shape[0]), static_cast<double>(volume_shape[1]),
                           static_cast<double>(volume_shape[2])};
  for (size_t layer = 0; layer < channels.size(); ++layer) {
    double voxels = 1;
    for (auto& n : in) {
      n = n + 2 * padding - 2;  // the convolution's output
      voxels *= n;
    }
    const double bytes = 4.0 * voxels * static_cast<double>(channels[layer]);
    if (bytes > kMaxActivationBytes)
      throw UsageError(model + " option 'channels': convolution " + std::to_string(layer + 1) + "'s output (" +
                       std::to_string(channels[layer]) + " channels on the volume grid) would take " +
                       std::to_string(static_cast<int64_t>(bytes / (1024 * 1024))) +
                       " MB per sample; the bound is 1024 MB");
    for (auto& n : in) n = std::floor(n / 2);  // the pool
  }
}

std::array<int64_t, 3> SpectEncoderOptions::token_grid() const {
  // The CPU-sized grids `mhca synth --help` suggests take fewer blocks and
  // padding (docs/mhca.md): say so, not just that the grid is too small.
  const std::string smaller = "; a small grid takes {model_options} '{\"channels\":[8,16,32],\"padding\":1}'";
  std::array<int64_t, 3> g{};
  for (int axis = 0; axis < 3; ++axis) {
    int64_t n = volume_shape.at(axis);
    for (size_t layer = 0; layer < channels.size(); ++layer) {
      if (n + 2 * padding < 3)
        throw UsageError("volume_shape " + shape_text(volume_shape) + " is too small for " +
                         std::to_string(channels.size()) + " convolutions with padding " + std::to_string(padding) +
                         smaller);
      n = n + 2 * padding - 2;
      if (layer + 1 < channels.size()) {
        if (n < 2)
          throw UsageError("volume_shape " + shape_text(volume_shape) + " is too small for " +
                           std::to_string(channels.size() - 1) + " pooling blocks" + smaller);
        n /= 2;
      }
    }
    g[axis] = n;
  }
  return g;
}

int64_t SpectEncoderOptions::tokens() const {
  const auto g = token_grid();
  return g[0] * g[1] * g[2];
}

// Output index o of a conv (k 3, pad p) is centred on input o + 1 - p; of a
// 2-pool on input 2o + 0.5. Composing these affine maps gives offset + stride * t.
double SpectEncoderOptions::token_offset() const {
  double offset = 0, stride = 1;
  for (size_t layer = 0; layer < channels.size(); ++layer) {
    offset += stride * (1.0 - static_cast<double>(padding));
    if (layer + 1 < channels.size()) {
      offset += stride * 0.5;
      stride *= 2;
    }
  }
  return offset;
}

double SpectEncoderOptions::token_stride() const { return static_cast<double>(int64_t{1} << (channels.size() - 1)); }

// Activations: the input volume; per convolution its output on the grid and,
// for every convolution but the last, the ReLU's output and the 2x2x2 max
// pool's output and int64 indices (3 floats per pooled value; the dropout
// after the second block adds one more).
ModelSize spect_encoder_size(const SpectEncoderOptions& o) {
  ModelSize s;
  std::array<int64_t, 3> n{o.volume_shape.at(0), o.volume_shape.at(1), o.volume_shape.at(2)};
  s.activation_floats = sat_mul(n[0], n[1], n[2]);
  int64_t in = 1;
  for (size_t layer = 0; layer < o.channels.size(); ++layer) {
    const int64_t c = o.channels[layer];
    s.parameters = sat_add(s.parameters, sat_mul(in, c, 27), c);  // Conv3d(in, c, 3) and its bias
    for (auto& axis : n) axis = std::max<int64_t>(axis + 2 * o.padding - 2, 0);
    const int64_t voxels = sat_mul(n[0], n[1], n[2]);
    s.activation_floats = sat_add(s.activation_floats, sat_mul(voxels, c));
    if (layer + 1 < o.channels.size()) {
      for (auto& axis : n) axis /= 2;
      const int64_t pooled = sat_mul(n[0], n[1], n[2], c);
      s.activation_floats = sat_add(s.activation_floats, sat_mul(voxels, c), sat_mul(layer == 1 ? 4 : 3, pooled));
    }
    in = c;
  }
  return s;
}

SpectEncoderImpl::SpectEncoderImpl(const SpectEncoderOptions& options) : options_(options) {
  int64_t in = 1;
  for (size_t i = 0; i < options.channels.size(); ++i) {
    auto conv = LiveConv3d(torch::nn::Conv3dOptions(in, options.channels[i], 3).padding(options.padding));
    convs_.push_back(register_module("conv" + std::to_string(i + 1), conv));
    in = options.channels[i];
  }
}

at::Tensor SpectEncoderImpl::forward(const at::Tensor& volume) {
  auto x = volume;
  const size_t last = convs_.size() - 1;
  for (size_t i = 0; i < last; ++i) {
    x = torch::max_pool3d(torch::relu(convs_[i]->forward(x)), 2);
    if (i == 1) x = torch::dropout(x, options_.dropout, is_training());
  }
  return observed(*this, {volume}, convs_[last]->forward(x));
}

MethylationEncoderImpl::MethylationEncoderImpl(int64_t features, int64_t embedding) {
  embeddings_ = register_parameter("embeddings", torch::randn({features, embedding}));
}

at::Tensor MethylationEncoderImpl::forward(const at::Tensor& beta) {
  return observed(*this, {beta}, beta.unsqueeze(2) * live(embeddings_));
}

MultiHeadCoAttentionImpl::MultiHeadCoAttentionImpl(int64_t query_dim, int64_t key_dim, int64_t width, int64_t heads,
                                                   double attention_dropout, double key_dim_init)
    : heads_(heads), attention_dropout_(attention_dropout) {
  if (heads < 1 || width % heads != 0)
    throw UsageError("co-attention width " + std::to_string(width) + " is not divisible by heads " +
                     std::to_string(heads));
  q_ = register_module("q", LiveLinear(query_dim, width));
  k_ = register_module("k", LiveLinear(key_dim, width));
  v_ = register_module("v", LiveLinear(key_dim, width));
  res_k_ = register_module("res_k", LiveLinear(query_dim, width));
  res_q_ = register_module("res_q", LiveLinear(key_dim, width));
  norm_ = register_module("norm", LiveLayerNorm(torch::nn::LayerNormOptions({width})));
  key_dim_ = register_parameter("key_dim",
                                torch::full({1}, key_dim_init > 0 ? key_dim_init : static_cast<double>(width / heads)));
}

MultiHeadCoAttentionImpl::Output MultiHeadCoAttentionImpl::forward(const at::Tensor& methylation_tokens,
                                                                   const at::Tensor& spect_tokens) {
  if (methylation_tokens.size(1) != spect_tokens.size(1))
    throw UsageError("co-attention needs as many methylation tokens as SPECT tokens (got " +
                     std::to_string(methylation_tokens.size(1)) + " and " + std::to_string(spect_tokens.size(1)) + ")");
  auto q = torch::relu(q_->forward(methylation_tokens));
  auto k = torch::relu(k_->forward(spect_tokens));
  auto v = torch::relu(v_->forward(spect_tokens));
  auto res_k = torch::relu(res_k_->forward(methylation_tokens));
  auto res_q = torch::relu(res_q_->forward(spect_tokens));
  Output out;
  out.attention = attention::co_attention(q, k, v, heads_, live(key_dim_), attention_dropout_, is_training());
  const auto mixed = torch::relu(out.attention.values_out + res_k + out.attention.queries_out + res_q);
  out.hidden = observed(*this, {methylation_tokens, spect_tokens}, norm_->forward(mixed));
  return out;
}

MHCAOptions MHCAOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<MHCAOptions>("mhca", j);
  o.spect.check("mhca");
  if (o.width % o.heads != 0)
    throw UsageError("mhca option 'width' = " + std::to_string(o.width) +
                     " is not divisible by 'heads' = " + std::to_string(o.heads));
  if (o.features != o.spect.tokens()) {
    const auto g = o.spect.token_grid();
    throw UsageError("mhca: features = " + std::to_string(o.features) + " must equal the SPECT token count " +
                     std::to_string(o.spect.tokens()) + " (" + std::to_string(g[0]) + "x" + std::to_string(g[1]) + "x" +
                     std::to_string(g[2]) + " for volume " + shape_text(o.spect.volume_shape) +
                     "): co-attention adds the two token sets");
  }
  return o;
}

MHCANet::MHCANet(const MHCAOptions& o) : options_(o) {
  methylation_ = register_module("methylation_encoder", MethylationEncoder(o.features, o.embedding));
  spect_ = register_module("spect_encoder", SpectEncoder(o.spect));
  co_attention_ = register_module("co_attention", MultiHeadCoAttention(o.embedding, o.spect.channels.back(), o.width,
                                                                       o.heads, o.attention_dropout, o.key_dim_init));
  h1_ = register_module("h1", LiveLinear(o.features * o.width, o.hidden));
  out_ = register_module("out", LiveLinear(o.hidden, o.classes));
}

// Activations of one sample with N = features tokens of width W, H heads:
// the SPECT encoder's (spect_encoder_size) and its tokens after the ReLU; the
// methylation tokens (the embedding times the beta-values, the ReLU); the
// co-attention's five projections before and after their ReLUs (10 N W), the
// scores, both softmaxes and the scaling (4 H N N), v' and q' with their
// merged heads (4 N W), the sum, ReLU and LayerNorm (3 N W); the classifier's
// hidden layer (Linear, ReLU, Dropout) and the log-probabilities.
ModelSize mhca_size(const MHCAOptions& o) {
  const int64_t tokens = o.features, width = o.width, spect_width = o.spect.channels.back();
  ModelSize s = spect_encoder_size(o.spect);
  const int64_t co_attention = sat_add(sat_mul(2, linear_parameters(o.embedding, width)),  // q, res_k
                                       sat_mul(3, linear_parameters(spect_width, width)),  // k, v, res_q
                                       norm_parameters(width), 1);                         // norm, d_k
  s.parameters =
      sat_add(s.parameters, sat_mul(o.features, o.embedding), co_attention,
              linear_parameters(sat_mul(o.features, width), o.hidden), linear_parameters(o.hidden, o.classes));
  s.activation_floats = sat_add(s.activation_floats, sat_mul(tokens, spect_width),
                                sat_add(o.features, sat_mul(2, o.features, o.embedding)), sat_mul(17, tokens, width),
                                sat_mul(4, o.heads, tokens, tokens), sat_mul(3, o.hidden), sat_mul(2, o.classes));
  return s;
}

MHCANet::Explained MHCANet::forward_explained(const data::Batch& batch) {
  auto m = torch::relu(methylation_->forward(methylation_input(batch, options_.features, "mhca")));
  auto s = torch::relu(grid_to_tokens(spect_->forward(spect_input(batch, options_.spect, "mhca"))));
  auto attended = co_attention_->forward(m, s);
  auto z = torch::relu(h1_->forward(attended.hidden.flatten(1)));
  z = torch::dropout(z, options_.dropout, is_training());
  return {torch::log_softmax(out_->forward(z), -1), attended.attention};
}

at::Tensor MHCANet::forward(const data::Batch& batch) { return forward_explained(batch).log_probs; }

ConcatNetOptions ConcatNetOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<ConcatNetOptions>("concatnet", j);
  o.spect.check("concatnet");
  return o;
}

ConcatNet::ConcatNet(const ConcatNetOptions& o) : options_(o) {
  methylation_ = register_module("methylation_encoder", MethylationEncoder(o.features, o.embedding));
  spect_ = register_module("spect_encoder", SpectEncoder(o.spect));
  methylation_proj_ = register_module("methylation_proj", LiveLinear(o.embedding, o.width));
  spect_proj_ = register_module("spect_proj", LiveLinear(o.spect.channels.back(), o.width));
  h1_ = register_module("h1", LiveLinear((o.features + o.spect.tokens()) * o.width, o.hidden));
  out_ = register_module("out", LiveLinear(o.hidden, o.classes));
}

// Activations: the SPECT encoder's and its tokens after the ReLU, the
// methylation tokens and their ReLU, both projections, their concatenation,
// the hidden layer (Linear, ReLU, Dropout), the log-probabilities.
ModelSize concatnet_size(const ConcatNetOptions& o) {
  const int64_t spect_tokens = o.spect.tokens(), spect_width = o.spect.channels.back();
  const int64_t all_tokens = sat_add(o.features, spect_tokens);
  ModelSize s = spect_encoder_size(o.spect);
  s.parameters =
      sat_add(s.parameters, sat_mul(o.features, o.embedding), linear_parameters(o.embedding, o.width),
              linear_parameters(spect_width, o.width), linear_parameters(sat_mul(all_tokens, o.width), o.hidden),
              linear_parameters(o.hidden, o.classes));
  s.activation_floats = sat_add(s.activation_floats, sat_mul(spect_tokens, spect_width),
                                sat_add(o.features, sat_mul(2, o.features, o.embedding)),
                                sat_mul(2, all_tokens, o.width), sat_mul(3, o.hidden), sat_mul(2, o.classes));
  return s;
}

at::Tensor ConcatNet::forward(const data::Batch& batch) {
  auto m = torch::relu(methylation_->forward(methylation_input(batch, options_.features, "concatnet")));
  auto s = torch::relu(grid_to_tokens(spect_->forward(spect_input(batch, options_.spect, "concatnet"))));
  auto h = torch::cat({methylation_proj_->forward(m), spect_proj_->forward(s)}, 1);
  auto z = torch::dropout(torch::relu(h1_->forward(h.flatten(1))), options_.dropout, is_training());
  return torch::log_softmax(out_->forward(z), -1);
}

SpectNetOptions SpectNetOptions::from_json(const nlohmann::json& j) {
  const auto o = read_model_options<SpectNetOptions>("spectnet", j);
  o.spect.check("spectnet");
  return o;
}

SpectNet::SpectNet(const SpectNetOptions& o) : options_(o) {
  spect_ = register_module("spect_encoder", SpectEncoder(o.spect));
  h1_ = register_module("h1", LiveLinear(o.spect.tokens() * o.spect.channels.back(), o.hidden));
  out_ = register_module("out", LiveLinear(o.hidden, o.classes));
}

// Activations: the SPECT encoder's and its ReLU, the hidden layer (Linear,
// ReLU), the log-probabilities.
ModelSize spectnet_size(const SpectNetOptions& o) {
  const int64_t flat = sat_mul(o.spect.tokens(), o.spect.channels.back());
  ModelSize s = spect_encoder_size(o.spect);
  s.parameters = sat_add(s.parameters, linear_parameters(flat, o.hidden), linear_parameters(o.hidden, o.classes));
  s.activation_floats = sat_add(s.activation_floats, flat, sat_mul(2, o.hidden), sat_mul(2, o.classes));
  return s;
}

at::Tensor SpectNet::forward(const data::Batch& batch) {
  auto s = torch::relu(spect_->forward(spect_input(batch, options_.spect, "spectnet")));
  return torch::log_softmax(out_->forward(torch::relu(h1_->forward(s.flatten(1)))), -1);
}

}  // namespace qkv::models
