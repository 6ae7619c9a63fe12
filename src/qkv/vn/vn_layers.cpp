#include "qkv/vn/vn_layers.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_heads.h"

#include <torch/torch.h>

#include <cmath>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/weight_binding.h"

namespace qkv::vn {

VNLinearImpl::VNLinearImpl(int64_t in_channels, int64_t out_channels) {
  if (in_channels < 1 || out_channels < 1)
    throw UsageError("VNLinear: channels must be >= 1 (got " + std::to_string(in_channels) + " -> " +
                     std::to_string(out_channels) + ")");
  weight = register_parameter("weight", torch::empty({out_channels, in_channels}));
  // nn::Linear's default (kaiming_uniform with a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels));
  torch::NoGradGuard no_grad;
  weight.uniform_(-bound, bound);
}

VNLeakyReLUImpl::VNLeakyReLUImpl(int64_t channels, bool share, double negative_slope) : negative_slope(negative_slope) {
  map_to_dir = register_module("map_to_dir", VNLinear(channels, share ? 1 : channels));
}

at::Tensor VNLeakyReLUImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, vn_leaky_relu(x, map_to_dir->forward(x), negative_slope));
}

at::Tensor VNBatchNormImpl::forward(const at::Tensor& x) {
  auto y = vn_batch_norm(x, live(weight), live(bias), live(running_mean), live(running_var), is_training(),
                         batch_weight(), eps, ranks);
  track_batch();  // after the forward: a batch that failed is not counted
  return observed(*this, {x}, std::move(y));
}

VNLayerNormImpl::VNLayerNormImpl(int64_t channels, double eps) : eps(eps) {
  weight = register_parameter("weight", torch::ones({channels}));
  bias = register_parameter("bias", torch::zeros({channels}));
}

at::Tensor VNLayerNormImpl::forward(const at::Tensor& x) {
  // Named here: layer_norm would name the shape it was given, [B, ..., C], not x's.
  if (x.dim() < 3 || x.size(2) != 3 || x.size(1) != weight.size(0))
    throw UsageError("VNLayerNorm: expected x [B, " + std::to_string(weight.size(0)) + ", 3, ...] (the module's " +
                     std::to_string(weight.size(0)) + " channels), got " + shape_of(x));
  const auto norm = vn_norm(x);  // [B, C, ...]
  const auto normed =
      torch::layer_norm(norm.movedim(1, -1), {weight.size(0)}, live(weight), live(bias), eps).movedim(-1, 1);
  return observed(*this, {x}, vn_rescale(x, norm, normed));
}

VNLinearLeakyReLUImpl::VNLinearLeakyReLUImpl(int64_t in_channels, int64_t out_channels, bool share,
                                             double negative_slope, bool batch_norm)
    : negative_slope(negative_slope) {
  map_to_feat = register_module("map_to_feat", VNLinear(in_channels, out_channels));
  if (batch_norm) batchnorm = register_module("batchnorm", VNBatchNorm(out_channels));
  map_to_dir = register_module("map_to_dir", VNLinear(in_channels, share ? 1 : out_channels));
}

at::Tensor VNLinearLeakyReLUImpl::forward(const at::Tensor& x) {
  // Both maps read x: one GEMM of the stacked weights instead of two, and in
  // backward one dX product instead of two and their sum (VNStdFeature's
  // 682 -> 341 + 341 step: ~17 % less backward time, bench_vnt_step vn-linear).
  // With a hook on a map, the maps run as the parts they are.
  const auto both = hooked_below(*this)
                        ? torch::cat({map_to_feat->forward(x), map_to_dir->forward(x)}, 1)
                        : vn_linear(x, torch::cat({live(map_to_feat->weight), live(map_to_dir->weight)}, 0));
  return observed(*this, {x}, activate(both));
}

at::Tensor VNLinearLeakyReLUImpl::forward_with_constant(const at::Tensor& x, const at::Tensor& m) {
  require_vn(x, "VNLinearLeakyReLU");
  require_vn(m, "VNLinearLeakyReLU");
  const int64_t c = x.size(1), cm = m.size(1);
  if (m.dim() != x.dim() || m.size(0) != x.size(0) || m.size(-1) != 1 || c + cm != map_to_feat->weight.size(1))
    throw UsageError("VNLinearLeakyReLU: [x; m] with x " + shape_of(x) + " and m " + shape_of(m) +
                     " (m one vector per cloud and channel) does not give the " +
                     std::to_string(map_to_feat->weight.size(1)) + " input channels of the layer");
  if (hooked_below(*this)) {  // the maps as parts, on their input [x; m repeated over the points]
    auto sizes = x.sizes().vec();
    sizes[1] = cm;
    const auto xm = torch::cat({x, m.expand(sizes)}, 1);
    return observed(*this, {x, m}, activate(torch::cat({map_to_feat->forward(xm), map_to_dir->forward(xm)}, 1)));
  }
  const auto w = torch::cat({live(map_to_feat->weight), live(map_to_dir->weight)}, 0);
  return observed(*this, {x, m}, activate(vn_linear(x, w.narrow(1, 0, c)) + vn_linear(m, w.narrow(1, c, cm))));
}

at::Tensor VNLinearLeakyReLUImpl::activate(const at::Tensor& both) {
  const int64_t features = map_to_feat->weight.size(0);
  auto p = both.narrow(1, 0, features);
  if (batchnorm) p = batchnorm->forward(p);
  return vn_leaky_relu(p, both.narrow(1, features, both.size(1) - features), negative_slope);
}

at::Tensor gather_neighbours(const at::Tensor& a, const at::Tensor& idx) {
  require_vn(a, "gather_neighbours");
  if (a.dim() != 4 || idx.dim() != 3 || idx.size(0) != a.size(0) || idx.size(1) != a.size(3))
    throw UsageError("gather_neighbours: expected a [B, C, 3, N] and idx [B, N, k], got " + shape_of(a) + " and " +
                     shape_of(idx));
  const int64_t b = a.size(0), c = a.size(1), n = a.size(3), k = idx.size(2);
  const auto index = idx.reshape({b, 1, n * k}).expand({b, c * 3, n * k});
  return a.reshape({b, c * 3, n}).gather(2, index).view({b, c, 3, n, k});
}

namespace {

void require_edge_conv_of(const VNLinearLeakyReLUImpl& conv, const at::Tensor& x, const char* what) {
  require_vn(x, what);
  if (conv.map_to_feat->weight.size(1) != 2 * x.size(1))
    throw UsageError(std::string(what) + ": the conv takes " + std::to_string(conv.map_to_feat->weight.size(1)) +
                     " channels, the edge features of " + shape_of(x) + " have " + std::to_string(2 * x.size(1)));
}

// W [C_out, 2C] on [x_j - x_i, x_i] as {W_a, W_b - W_a}: the weights of x_j and x_i.
std::pair<at::Tensor, at::Tensor> towards_and_centre(const at::Tensor& weight, int64_t c) {
  const auto towards = weight.narrow(1, 0, c);
  return {towards, weight.narrow(1, c, c) - towards};
}

// With a hook on the conv or a part of it, the conv runs as the part it is,
// on the edge features [x_j - x_i, x_i] (the same values, each part observed).
bool conv_as_part(const VNLinearLeakyReLUImpl& conv) { return hooked(conv) || hooked_below(conv); }

}  // namespace

at::Tensor factorised_edge_conv(VNLinearLeakyReLUImpl& conv, const at::Tensor& x, const at::Tensor& idx) {
  require_edge_conv_of(conv, x, "factorised_edge_conv");
  if (conv_as_part(conv)) return conv.forward(edge_features(x, idx, /*with_cross=*/false));
  auto edge_linear = [&](const at::Tensor& weight) {
    const auto [towards, at_centre] = towards_and_centre(weight, x.size(1));
    return gather_neighbours(vn_linear(x, towards), idx) + vn_linear(x, at_centre).unsqueeze(-1);
  };
  auto p = edge_linear(live(conv.map_to_feat->weight));
  if (conv.batchnorm) p = conv.batchnorm->forward(p);
  return vn_leaky_relu(p, edge_linear(live(conv.map_to_dir->weight)), conv.negative_slope);
}

at::Tensor factorised_edge_conv_mean(VNLinearLeakyReLUImpl& conv, const at::Tensor& x, const at::Tensor& idx) {
  require_edge_conv_of(conv, x, "factorised_edge_conv_mean");
  const int64_t out = conv.map_to_feat->weight.size(0);
  if (!conv.batchnorm || conv.map_to_dir->weight.size(0) != out || conv_as_part(conv))
    return vn_mean_pool(factorised_edge_conv(conv, x, idx));
  // The four per-point products as one GEMM: [A | Ac | D | Dc] = [W_a; W_b - W_a; V_a; V_b - V_a] x.
  const auto [feat_towards, feat_centre] = towards_and_centre(live(conv.map_to_feat->weight), x.size(1));
  const auto [dir_towards, dir_centre] = towards_and_centre(live(conv.map_to_dir->weight), x.size(1));
  const auto parts = vn_linear(x, torch::cat({feat_towards, feat_centre, dir_towards, dir_centre}, 0)).split(out, 1);
  auto& bn = *conv.batchnorm;
  auto y =
      edge_conv_mean(parts[0], parts[1], parts[2], parts[3], idx, live(bn.weight), live(bn.bias), live(bn.running_mean),
                     live(bn.running_var), bn.is_training(), bn.batch_weight(), bn.eps, bn.ranks, conv.negative_slope);
  bn.track_batch();  // after the forward, as VNBatchNorm: a batch that failed is not counted
  return y;
}

VNMaxPoolImpl::VNMaxPoolImpl(int64_t channels) {
  map_to_dir = register_module("map_to_dir", VNLinear(channels, channels));
}

at::Tensor VNMaxPoolImpl::forward(const at::Tensor& x) {
  // [B, C, 3] would be pooled over its axes, silently.
  if (x.dim() < 4 || x.size(2) != 3) throw UsageError("VNMaxPool: expected x [B, C, 3, N], got " + shape_of(x));
  const auto dot = vn_dot(x, map_to_dir->forward(x));  // [B, C, 1, ..., N]
  auto sizes = x.sizes().vec();
  sizes.back() = 1;
  const auto idx = dot.argmax(-1, /*keepdim=*/true).expand(sizes);
  return observed(*this, {x}, x.gather(-1, idx).squeeze(-1));
}

namespace {

// Gram-Schmidt on the two predicted vectors [B, 2, 3, ...] plus their cross
// product: an orthonormal, right-handed frame [B, 3, 3, ...].
at::Tensor orthonormal_frame(const at::Tensor& frame) {
  const auto v1 = frame.select(1, 0), v2 = frame.select(1, 1);
  // clamp, not +eps: the frame stays exactly orthonormal unless a vector is ~0.
  const auto u1 = v1 / torch::linalg_vector_norm(v1, 2, {1}, /*keepdim=*/true).clamp_min(kVNEps);
  const auto w2 = v2 - (v2 * u1).sum(1, /*keepdim=*/true) * u1;
  const auto u2 = w2 / torch::linalg_vector_norm(w2, 2, {1}, /*keepdim=*/true).clamp_min(kVNEps);
  return torch::stack({u1, u2, torch::cross(u1, u2, /*dim=*/1)}, 1);
}

}  // namespace

VNStdFeatureImpl::VNStdFeatureImpl(int64_t in_channels, bool normalize_frame, bool share, double negative_slope)
    : normalize_frame(normalize_frame) {
  if (in_channels < 4)
    throw UsageError("VNStdFeature: needs at least 4 input channels, got " + std::to_string(in_channels));
  // Both predicted vectors would be multiples of vn2's one channel: Gram-Schmidt
  // would divide by a zero remainder (a frame of one vector and noise).
  if (normalize_frame && in_channels < 8)
    throw UsageError("VNStdFeature: normalize_frame needs at least 8 input channels (two independent vectors from " +
                     std::to_string(in_channels) + " / 4 = 1 channel), got " + std::to_string(in_channels));
  vn1 = register_module("vn1", VNLinearLeakyReLU(in_channels, in_channels / 2, share, negative_slope));
  vn2 = register_module("vn2", VNLinearLeakyReLU(in_channels / 2, in_channels / 4, share, negative_slope));
  vn_lin = register_module("vn_lin", VNLinear(in_channels / 4, normalize_frame ? 2 : 3));
}

std::pair<at::Tensor, at::Tensor> VNStdFeatureImpl::forward(const at::Tensor& x) {
  auto frame = vn_lin->forward(vn2->forward(vn1->forward(x)));  // [B, 2|3, 3, ...]
  if (normalize_frame) frame = orthonormal_frame(frame);
  auto out = observed(*this, {x}, {vn_frame_coordinates(x, frame), frame});
  return {out[0], out[1]};
}

std::pair<at::Tensor, at::Tensor> VNStdFeatureImpl::forward_with_mean(const at::Tensor& x) {
  require_vn(x, "VNStdFeature");
  if (x.dim() != 4 || 2 * x.size(1) != vn1->map_to_feat->weight.size(1))
    throw UsageError("VNStdFeature: forward_with_mean takes x [B, C, 3, N] with 2C = " +
                     std::to_string(vn1->map_to_feat->weight.size(1)) + " channels, got " + shape_of(x));
  const auto mean = x.mean(-1, /*keepdim=*/true);  // [B, C, 3, 1]
  auto frame = vn_lin->forward(vn2->forward(vn1->forward_with_constant(x, mean)));
  if (normalize_frame) frame = orthonormal_frame(frame);
  // <m_c, F_j(n)> = sum_i m[c, i] F[j, i, n]: [B, C, 3(i)] @ [B, 3(i), 3(j) N].
  const int64_t b = x.size(0), c = x.size(1), n = x.size(3);
  const auto mean_coordinates =
      torch::matmul(mean.squeeze(-1), frame.transpose(1, 2).reshape({b, 3, 3 * n})).view({b, c, 3, n});
  auto out = observed(*this, {x}, {torch::cat({vn_frame_coordinates(x, frame), mean_coordinates}, 1), frame});
  return {out[0], out[1]};
}

at::Tensor vn_frame_coordinates_composed(const at::Tensor& x, const at::Tensor& frame) {
  // <x_c, F_j> for every channel c and frame vector j, as one batched matmul
  // over the flattened trailing dims: [B, M, C, xyz] @ [B, M, xyz, j].
  const auto b = x.size(0), c = x.size(1);
  const auto m = c10::multiply_integers(x.sizes().slice(3));  // not -1: an empty batch has no size to infer
  const auto xs = x.reshape({b, c, 3, m}).permute({0, 3, 1, 2});
  const auto fs = frame.reshape({b, 3, 3, m}).permute({0, 3, 2, 1});
  return torch::matmul(xs, fs).permute({0, 2, 3, 1}).reshape(x.sizes());
}

VNEdgeConvImpl::VNEdgeConvImpl(int64_t in_channels, int64_t out_channels, int64_t k, bool with_cross,
                               double negative_slope)
    : k(k), with_cross(with_cross) {
  if (k < 1) throw UsageError("VNEdgeConv: k must be at least 1, got " + std::to_string(k));
  conv = register_module("conv",
                         VNLinearLeakyReLU(in_channels * (with_cross ? 3 : 2), out_channels, false, negative_slope));
}

at::Tensor VNEdgeConvImpl::forward(const at::Tensor& x, const at::Tensor& idx) {
  if (idx.dim() != 3 || idx.size(2) != k)
    throw UsageError("VNEdgeConv: expected idx [B, N, k] with the module's k = " + std::to_string(k) + ", got " +
                     shape_of(idx));
  return observed(*this, {x, idx}, vn_mean_pool(conv->forward(edge_features(x, idx, with_cross))));
}

VNMultiHeadAttentionImpl::VNMultiHeadAttentionImpl(int64_t channels, int64_t heads, int64_t head_dim)
    : heads(heads), head_dim(head_dim) {
  if (heads < 1 || head_dim < 1) throw UsageError("VNMultiHeadAttention: heads and head_dim must be >= 1");
  w_q = register_module("w_q", VNLinear(channels, heads * head_dim));
  w_k = register_module("w_k", VNLinear(channels, heads * head_dim));
  w_v = register_module("w_v", VNLinear(channels, heads * head_dim));
  w_o = register_module("w_o", VNLinear(heads * head_dim, channels));
}

VNAttentionResult VNMultiHeadAttentionImpl::forward(const at::Tensor& x, const attention::SdpaOptions& options) {
  if (x.dim() != 4 || x.size(2) != 3)
    throw UsageError("VNMultiHeadAttention: expected x [B, C, 3, N], got " + shape_of(x));
  // Each head's tokens are the points, a point's row its 3 x head_dim entries,
  // projected straight into the attention core's layout and back (vn_heads.h).
  auto r = vn_attention_rows(project_to_heads(*w_q, x, heads), project_to_heads(*w_k, x, heads),
                             project_to_heads(*w_v, x, heads), head_dim, options);
  return {observed(*this, {x}, project_from_heads(*w_o, r.output)), r.weights};
}

at::Tensor project_to_heads(VNLinearImpl& projection, const at::Tensor& x, int64_t heads) {
  if (hooked(projection)) return vn_heads_rows(projection.forward(x), heads);
  return vn_heads_split(x, live(projection.weight), heads);
}

at::Tensor project_from_heads(VNLinearImpl& projection, const at::Tensor& rows) {
  if (hooked(projection)) return projection.forward(vn_heads_features(rows));
  return vn_heads_merge(rows, live(projection.weight));
}

VNFeedForwardImpl::VNFeedForwardImpl(int64_t channels, int64_t hidden) {
  lin1 = register_module("lin1", VNLinear(channels, hidden));
  relu = register_module("relu", VNLeakyReLU(hidden, /*share=*/false, /*negative_slope=*/0.0));
  lin2 = register_module("lin2", VNLinear(hidden, channels));
}

at::Tensor VNFeedForwardImpl::forward(const at::Tensor& x) {
  return observed(*this, {x}, lin2->forward(relu->forward(lin1->forward(x))));
}

VNTBlockImpl::VNTBlockImpl(int64_t channels, int64_t heads, int64_t head_dim, int64_t ffn_hidden, bool layer_norm) {
  attn = register_module("attn", VNMultiHeadAttention(channels, heads, head_dim));
  ffn = register_module("ffn", VNFeedForward(channels, ffn_hidden));
  if (layer_norm) {
    norm_attn = register_module("norm_attn", VNLayerNorm(channels));
    norm_ffn = register_module("norm_ffn", VNLayerNorm(channels));
  }
}

at::Tensor VNTBlockImpl::forward(const at::Tensor& x, at::Tensor* attention_weights) {
  attention::SdpaOptions options;
  options.need_weights = attention_weights != nullptr;
  auto r = attn->forward(norm_attn ? norm_attn->forward(x) : x, options);
  if (attention_weights) *attention_weights = r.weights;
  const auto y = x + r.output;
  return observed(*this, {x}, y + ffn->forward(norm_ffn ? norm_ffn->forward(y) : y));
}

}  // namespace qkv::vn
