// The VN nonlinearity and VN batch norm as one pass forward and one (leaky
// ReLU) or two (batch norm) passes backward over the vectors, instead of the
// ~10 broadcast products, reductions over the size-3 axis and their autograd
// nodes of the composed versions (vn_ops.cpp). In VN-DGCNN these ran on
// [B, C, 3, N, k] edge tensors and took most of a training step, much of it
// in page faults of the temporaries (docs/vnt.md, "Profile"). The edge
// convolution's gather + batch norm + leaky ReLU + mean over k goes further:
// one pass over the edges that stores nothing edge-sized (edge_conv_mean,
// edge_conv.h). The invariant layer's coordinates in a per-point frame are
// one pass too (vn_frame_coordinates). All keep the composed versions as references
// (tests/vn/vn_fused_test.cpp: gradcheck in float64 and equality with the
// composed versions).
//
// Each autograd Function runs its passes on the CPU here, or on a GPU through
// qkv's CUDA kernels (vn/vn_fused_cuda.h), which share the per-vector math
// (vn_math.h); the statistics, their reduction over ranks, the saved tensors
// and second-order gradients are the Function's on both.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/cuda/point_kernels.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/layers/rank_sum.h"
#include "qkv/layers/second_order.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/runtime/cpu.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_fused_cuda.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_math.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::vn {
namespace {

using math::add_to;
using math::load;
using math::store;
using math::Vec3;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Points (or edges) per task of the leaky-ReLU backward: the task owns a
// block of every channel's rows, so a shared direction's gradient is summed
// over channels without atomics.
constexpr int64_t kPointBlock = 1024;

// ---- leaky ReLU --------------------------------------------------------------
// x [B, C, 3, M], d [B, C or 1, 3, M], contiguous; a = 1 - slope. Where
// f = <x,d> / (|d|^2 + eps) <= 0 (the composed clamp_max passes its gradient at
// 0 too): y = x - a f d, else y = x.
class VNLeakyReLUFunction : public torch::autograd::Function<VNLeakyReLUFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& d_in, double slope,
                            double eps) {
    const auto x = x_in.contiguous(), d = d_in.contiguous();
    ctx->save_for_backward({x, d});
    ctx->saved_data["slope"] = slope;
    ctx->saved_data["eps"] = eps;
    keep_inputs_for_graph(ctx, "vn_leaky_relu", {x_in, d_in});
    if (x.is_cuda()) return gpu::vn_leaky_relu(x, d, slope, eps);
    const int64_t b = x.size(0), c = x.size(1), cd = d.size(1), m = x.numel() / (b * c * 3);
    auto y = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_leaky_relu", [&] {
      const scalar_t a = static_cast<scalar_t>(1.0 - slope), e = static_cast<scalar_t>(eps);
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* dp = d.data_ptr<scalar_t>();
      auto* yp = y.data_ptr<scalar_t>();
      at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bc = begin; bc < end; ++bc) {
          const scalar_t* x0 = xp + bc * 3 * m;
          const scalar_t* d0 = dp + ((bc / c) * cd + (cd == 1 ? 0 : bc % c)) * 3 * m;
          scalar_t* y0 = yp + bc * 3 * m;
          for (int64_t i = 0; i < m; ++i) store(y0, m, i, math::leaky_relu(load(x0, m, i), load(d0, m, i), a, e));
        }
      });
    });
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const double slope = ctx->saved_data["slope"].toDouble(), eps = ctx->saved_data["eps"].toDouble();
    if (gradient_graph_requested()) {
      auto g =
          composed_vjp([&](const auto& in) { return variable_list{vn_leaky_relu_composed(in[0], in[1], slope, eps)}; },
                       inputs_for_graph(ctx), grad);
      return {g[0], g[1], at::Tensor(), at::Tensor()};
    }
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &d = saved[1];
    const auto g = grad[0].contiguous();
    if (x.is_cuda()) {
      auto [gx, gd] = gpu::vn_leaky_relu_backward(x, d, g, slope, eps);
      return {gx, gd, at::Tensor(), at::Tensor()};
    }
    const int64_t b = x.size(0), c = x.size(1), cd = d.size(1), m = x.numel() / (b * c * 3);
    const int64_t blocks = (m + kPointBlock - 1) / kPointBlock;
    auto gx = torch::empty_like(x);
    auto gd = torch::zeros_like(d);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_leaky_relu_backward", [&] {
      const scalar_t a = static_cast<scalar_t>(1.0 - slope), e = static_cast<scalar_t>(eps);
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* dp = d.data_ptr<scalar_t>();
      const auto* gp = g.data_ptr<scalar_t>();
      auto* gxp = gx.data_ptr<scalar_t>();
      auto* gdp = gd.data_ptr<scalar_t>();
      at::parallel_for(0, b * blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
          const int64_t bi = task / blocks, i0 = (task % blocks) * kPointBlock, i1 = std::min(m, i0 + kPointBlock);
          for (int64_t ci = 0; ci < c; ++ci) {
            const int64_t row = (bi * c + ci) * 3 * m, drow = (bi * cd + (cd == 1 ? 0 : ci)) * 3 * m;
            const scalar_t *x0 = xp + row, *g0 = gp + row, *d0 = dp + drow;
            scalar_t *gx0 = gxp + row, *gd0 = gdp + drow;
            for (int64_t i = i0; i < i1; ++i) {
              const auto grad_i = math::leaky_relu_backward(load(x0, m, i), load(d0, m, i), load(g0, m, i), a, e);
              store(gx0, m, i, grad_i.x);
              add_to(gd0, m, i, grad_i.d);
            }
          }
        }
      });
    });
    return {gx, gd, at::Tensor(), at::Tensor()};
  }
};

// ---- coordinates in a per-point frame ----------------------------------------
// x [B, C, 3(i), M], frame [B, 3(j), 3(i), M], contiguous: y[b, c, j] =
// sum_i x[b, c, i] F[b, j, i] per point. The composed version is a batched
// matmul of B * M products of [C, 3] by [3, 3], which ATen runs one small
// GEMM (and one select) at a time; here one pass over x and y, and one
// backward pass giving both gradients.
class VNFrameCoordinatesFunction : public torch::autograd::Function<VNFrameCoordinatesFunction> {
 public:
  // Points per backward task: the task owns the frame gradient of its block
  // (summed over channels without atomics); F and dF of 256 points are 18 KiB.
  static constexpr int64_t kBlock = 256;

  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& frame_in) {
    const auto x = x_in.contiguous(), frame = frame_in.contiguous();
    ctx->save_for_backward({x, frame});
    keep_inputs_for_graph(ctx, "vn_frame_coordinates", {x_in, frame_in});
    if (x.is_cuda()) return gpu::vn_frame_coordinates(x, frame);
    const int64_t b = x.size(0), c = x.size(1), m = x.numel() / (b * c * 3);
    auto y = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_frame_coordinates", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* fp = frame.data_ptr<scalar_t>();
      auto* yp = y.data_ptr<scalar_t>();
      at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bc = begin; bc < end; ++bc) {
          const scalar_t* x0 = xp + bc * 3 * m;
          const scalar_t* f0 = fp + (bc / c) * 9 * m;
          scalar_t* y0 = yp + bc * 3 * m;
          _Pragma("omp simd")  // a pragma inside AT_DISPATCH's macro argument
              for (int64_t i = 0; i < m; ++i)
                  store(y0, m, i, math::frame_coordinates(load(x0, m, i), math::load_frame(f0, m, i)));
        }
      });
    });
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (gradient_graph_requested())
      return composed_vjp([](const auto& in) { return variable_list{vn_frame_coordinates_composed(in[0], in[1])}; },
                          inputs_for_graph(ctx), grad);
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &frame = saved[1];
    const auto g = grad[0].contiguous();
    if (x.is_cuda()) {
      auto [gx, gf] = gpu::vn_frame_coordinates_backward(x, frame, g);
      return {gx, gf};
    }
    const int64_t b = x.size(0), c = x.size(1), m = x.numel() / (b * c * 3);
    const int64_t blocks = (m + kBlock - 1) / kBlock;
    auto gx = torch::empty_like(x);
    auto gf = torch::zeros_like(frame);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_frame_coordinates_backward", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* fp = frame.data_ptr<scalar_t>();
      const auto* gp = g.data_ptr<scalar_t>();
      auto* gxp = gx.data_ptr<scalar_t>();
      auto* gfp = gf.data_ptr<scalar_t>();
      at::parallel_for(0, b * blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
          const int64_t bi = task / blocks, i0 = (task % blocks) * kBlock, i1 = std::min(m, i0 + kBlock);
          const scalar_t* f0 = fp + bi * 9 * m;
          scalar_t* gf0 = gfp + bi * 9 * m;
          for (int64_t ci = 0; ci < c; ++ci) {
            const int64_t row = (bi * c + ci) * 3 * m;
            const scalar_t *x0 = xp + row, *g0 = gp + row;
            scalar_t* gx0 = gxp + row;
            // The rows of x, g, dx and dF never overlap. (Only temporaries
            // are passed: see vn_math.h on `omp simd`.)
            _Pragma("omp simd")  // a pragma inside AT_DISPATCH's macro argument
                for (int64_t i = i0; i < i1; ++i) {
              store(gx0, m, i, math::frame_coordinates_backward(load(g0, m, i), math::load_frame(f0, m, i)));
              math::add_outer(gf0, m, i, load(g0, m, i), load(x0, m, i));
            }
          }
        }
      });
    });
    return {gx, gf};
  }
};

// ---- batch norm of the norms -------------------------------------------------
// n = sqrt(|x|^2 + kVNEps^2) per vector; n' = weight (n - mean) * invstd + bias
// with the statistics of the channel over batch and points (training, summed
// over the ranks of `group`) or the running ones (eval); y = x n' / n.
// Norms are recomputed from x in every pass rather than stored, so that x is
// the only activation kept for backward.

// Per (batch, channel) row sums in double, reduced over the batch: [2, C]
// (sum of f0, sum of f1) where f(i) -> (f0, f1) is evaluated at every vector.
template <typename F>
at::Tensor channel_sums(int64_t b, int64_t c, F&& f) {
  std::vector<double> rows(static_cast<size_t>(2 * b * c));
  at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bc = begin; bc < end; ++bc) {
      double s0 = 0, s1 = 0;
      f(bc, s0, s1);
      rows[static_cast<size_t>(2 * bc)] = s0, rows[static_cast<size_t>(2 * bc + 1)] = s1;
    }
  });
  auto sums = torch::zeros({2, c}, torch::kDouble);
  auto* sp = sums.data_ptr<double>();
  for (int64_t bc = 0; bc < b * c; ++bc) {
    sp[bc % c] += rows[static_cast<size_t>(2 * bc)];
    sp[c + bc % c] += rows[static_cast<size_t>(2 * bc + 1)];
  }
  return sums;
}

// For a create_graph backward (layers/second_order.h): the inputs to
// differentiate, with their history, and copies of the running statistics as
// the forward found them (the composed recomputation updates copies, never
// the module's own).
void save_composed_inputs(AutogradContext* ctx, const char* op, std::vector<at::Tensor> inputs,
                          const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
  keep_inputs_for_graph(ctx, op, inputs);
  if (running_mean.defined()) ctx->saved_data["running_mean"] = running_mean.detach().clone();
  if (running_var.defined()) ctx->saved_data["running_var"] = running_var.detach().clone();
  ctx->saved_data["momentum"] = momentum;
  ctx->saved_data["eps"] = eps;
}

// Fresh copies of those statistics (undefined where the module had none).
std::pair<at::Tensor, at::Tensor> forward_time_statistics(AutogradContext* ctx) {
  auto copy = [&](const char* key) {
    const auto it = ctx->saved_data.find(key);
    return it == ctx->saved_data.end() ? at::Tensor() : it->second.toTensor().clone();
  };
  return {copy("running_mean"), copy("running_var")};
}

RankSum* group_of(AutogradContext* ctx) {
  return reinterpret_cast<RankSum*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

// The batch norm of the norms as an affine map per channel, n' = scale n +
// shift ([C], double), with the statistics behind it. Training: from the
// channel sums [2, C] of n and n^2 over `count` vectors, summed over the
// ranks of `group`, running statistics updated; eval: the running ones.
struct NormAffine {
  at::Tensor mean, invstd, scale, shift;
  double count;

  // The per-channel constants as the per-vector math reads them, on the
  // tensors' device (the CPU loops' and the CUDA kernels' alike):
  // pointers(slope, global).at<T>(ci) is channel ci's; `global` [2, C] the
  // batch's sums of gm and gm * nhat (training backward) or null.
  gpu::ChannelPointers pointers(double slope = 0.0, const at::Tensor* global = nullptr) const {
    return {scale.data_ptr<double>(),
            shift.data_ptr<double>(),
            mean.data_ptr<double>(),
            invstd.data_ptr<double>(),
            global ? global->data_ptr<double>() : nullptr,
            scale.size(0),
            count,
            slope,
            kVNEps};
  }
};

NormAffine norm_affine(at::Tensor sums, double count, const at::Tensor& weight, const at::Tensor& bias,
                       const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double momentum,
                       double eps, RankSum* group) {
  NormAffine r;
  if (training) {
    const int64_t c = sums.size(1);
    if (group != nullptr && group->world_size() > 1) {
      auto packed = torch::cat({sums.flatten(), torch::full({1}, count, sums.options())});
      group->all_reduce_sum(packed, "batch-norm statistics");
      sums = packed.slice(0, 0, 2 * c).view({2, c});
      count = packed[2 * c].item<double>();
    }
    if (count <= 1)
      throw UsageError("VN batch norm: " + std::to_string(static_cast<int64_t>(count)) +
                       " vectors per channel in the batch; training needs more than one");
    r.mean = sums[0] / count;
    const auto var = (sums[1] / count - r.mean * r.mean).clamp_min(0);
    if (running_mean.defined()) layers::update_running_stats(running_mean, running_var, r.mean, var, count, momentum);
    r.invstd = (var + eps).rsqrt();
  } else {
    r.mean = running_mean.to(torch::kDouble);
    r.invstd = (running_var.to(torch::kDouble) + eps).rsqrt();
  }
  const auto w = weight.to(torch::kDouble), bi = bias.to(torch::kDouble);
  r.scale = (w * r.invstd).contiguous();
  r.shift = (bi - w * r.mean * r.invstd).contiguous();
  r.mean = r.mean.contiguous(), r.invstd = r.invstd.contiguous();
  r.count = count;
  return r;
}

class VNBatchNormFunction : public torch::autograd::Function<VNBatchNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                            bool training, double momentum, double eps, RankSum* group) {
    const auto x = x_in.contiguous();
    const int64_t b = x.size(0), c = x.size(1), m = x.numel() / (b * c * 3);
    save_composed_inputs(ctx, "vn_batch_norm", {x_in, weight, bias}, running_mean, running_var, momentum, eps);
    at::Tensor sums;
    if (training && x.is_cuda())
      sums = gpu::vn_norm_sums(x, kVNEps);
    else if (training)
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm_stats", [&] {
        const auto* xp = x.data_ptr<scalar_t>();
        const scalar_t eps2 = static_cast<scalar_t>(kVNEps * kVNEps);
        sums = channel_sums(b, c, [&](int64_t bc, double& s, double& ss) {
          const scalar_t* x0 = xp + bc * 3 * m;
          for (int64_t i = 0; i < m; ++i) {
            const double n = math::norm(load(x0, m, i), eps2);
            s += n, ss += n * n;
          }
        });
      });
    const auto norm = norm_affine(sums, static_cast<double>(b * m), weight, bias, running_mean, running_var, training,
                                  momentum, eps, group);
    const auto &mean = norm.mean, &invstd = norm.invstd, &scale = norm.scale, &shift = norm.shift;
    const double count = norm.count;
    const auto channels = norm.pointers();
    auto y = x.is_cuda() ? gpu::vn_rescale(x, channels) : torch::empty_like(x);
    if (!x.is_cuda())
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm", [&] {
        const auto* xp = x.data_ptr<scalar_t>();
        auto* yp = y.data_ptr<scalar_t>();
        at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
          for (int64_t bc = begin; bc < end; ++bc) {
            const auto constants = channels.at<scalar_t>(bc % c);
            const scalar_t* x0 = xp + bc * 3 * m;
            scalar_t* y0 = yp + bc * 3 * m;
            for (int64_t i = 0; i < m; ++i) store(y0, m, i, math::rescale(load(x0, m, i), constants));
          }
        });
      });
    ctx->save_for_backward({x, weight, mean, invstd, scale, shift});
    ctx->saved_data["training"] = training;
    ctx->saved_data["count"] = count;
    ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(group));
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (gradient_graph_requested()) {
      const bool training = ctx->saved_data["training"].toBool();
      auto* group = group_of(ctx);
      auto g = composed_vjp(
          [&](const auto& in) {
            auto [mean, var] = forward_time_statistics(ctx);
            return variable_list{vn_batch_norm_composed(in[0], in[1], in[2], mean, var, training,
                                                        ctx->saved_data["momentum"].toDouble(),
                                                        ctx->saved_data["eps"].toDouble(), group)};
          },
          inputs_for_graph(ctx), grad);
      g.resize(9);
      return g;
    }
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1];
    const NormAffine norm{saved[2], saved[3], saved[4], saved[5], ctx->saved_data["count"].toDouble()};
    const bool training = ctx->saved_data["training"].toBool();
    auto* group = group_of(ctx);
    const auto g = grad[0].contiguous();
    const int64_t b = x.size(0), c = x.size(1), m = x.numel() / (b * c * 3);
    // Pass 1: the channel sums of gm and gm * nhat (bias and weight gradients,
    // and batch norm's backward terms; vn_math.h).
    const auto channels = norm.pointers();
    at::Tensor sums;
    if (x.is_cuda())
      sums = gpu::vn_rescale_backward_sums(x, g, channels);
    else
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm_backward_sums", [&] {
        const auto* xp = x.data_ptr<scalar_t>();
        const auto* gp = g.data_ptr<scalar_t>();
        sums = channel_sums(b, c, [&](int64_t bc, double& s_gm, double& s_gm_nhat) {
          const auto constants = channels.at<scalar_t>(bc % c);
          const scalar_t *x0 = xp + bc * 3 * m, *g0 = gp + bc * 3 * m;
          for (int64_t i = 0; i < m; ++i) {
            const auto x = load(x0, m, i);
            const auto terms = math::rescale_terms(x, load(g0, m, i), math::rescale_factors(x, constants), constants);
            s_gm += terms.gm, s_gm_nhat += terms.gm * terms.nhat;
          }
        });
      });
    const auto grad_bias = sums[0].to(weight.scalar_type()), grad_weight = sums[1].to(weight.scalar_type());
    // Batch norm's backward in training mode needs the means of gm and
    // gm * nhat over the whole (global) batch; in eval mode the statistics
    // are constants.
    auto global = sums.clone();
    if (training && group != nullptr && group->world_size() > 1) group->all_reduce_sum(global, "batch-norm gradient");
    // In training, batch norm's backward subtracts the batch means of gm and gm * nhat.
    const auto with_means = norm.pointers(0.0, training ? &global : nullptr);
    auto gx = x.is_cuda() ? gpu::vn_rescale_backward(x, g, with_means) : torch::empty_like(x);
    if (!x.is_cuda())
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm_backward", [&] {
        const auto* xp = x.data_ptr<scalar_t>();
        const auto* gp = g.data_ptr<scalar_t>();
        auto* gxp = gx.data_ptr<scalar_t>();
        at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
          for (int64_t bc = begin; bc < end; ++bc) {
            const auto constants = with_means.at<scalar_t>(bc % c);
            const scalar_t *x0 = xp + bc * 3 * m, *g0 = gp + bc * 3 * m;
            scalar_t* gx0 = gxp + bc * 3 * m;
            for (int64_t i = 0; i < m; ++i) {
              const auto x = load(x0, m, i);
              store(gx0, m, i,
                    math::rescale_backward(x, load(g0, m, i), math::rescale_factors(x, constants), constants));
            }
          }
        });
      });
    return {gx,           grad_weight,  grad_bias,    at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// ---- edge convolution: gather + batch norm + leaky ReLU + mean over k --------
// Per edge (point i, neighbour q = idx[i, j]) of one (batch, channel):
// p = A[q] + Ac[i] (the factorised VN linear, edge_conv.h), n = |p|,
// y = p n'/n (batch norm of the norms), d = D[q] + Dc[i], z = leaky(y, d);
// out[i] = mean over j of z. Only the per-point A, Ac, D, Dc [B, C, 3, N] and
// idx are kept for backward: p, y and d are recomputed there (twice, as batch
// norm's backward needs channel means of its gradient terms first), so no
// [B, C, 3, N, k] tensor exists in either pass.
//
// Each (batch, channel) task walks its points in blocks: the block's edges are
// gathered into structure-of-arrays scratch, the per-edge math runs as SIMD
// loops over it (with AVX2 and FMA where the CPU has them, chosen at run
// time: the build itself targets plain x86-64), and the results are summed
// per point or scattered to the neighbours. Scalar per-edge code with its
// square root and three divisions was compute-bound, slower than the
// unfused edge tensors it replaced.

// Points per block: 32 points x 20 neighbours x 15 arrays of float is 38 KiB.
constexpr int64_t kEdgePointBlock = 32;

// Scratch for one block of edges, 3 coordinates each: p (batch norm's input),
// d (the direction), g (the gradient arriving at the edge), out (the result).
template <typename T>
struct EdgeBlock {
  explicit EdgeBlock(int64_t capacity) : storage(static_cast<size_t>(12 * capacity)) {
    for (int x = 0; x < 3; ++x) {
      p[x] = storage.data() + x * capacity;
      d[x] = p[x] + 3 * capacity;
      g[x] = p[x] + 6 * capacity;
      out[x] = p[x] + 9 * capacity;
    }
  }
  std::vector<T> storage;
  T *p[3], *d[3], *g[3], *out[3];
  int64_t count = 0;
};

#define QKV_ALWAYS_INLINE inline __attribute__((always_inline))

// The per-edge math is vn_math.h's; here it runs as SIMD loops over the
// block's coordinate arrays. Each function copies the constants: no store can
// alias a local copy, so the loop vectorises.

// The sums of n and n^2 over the block (training statistics).
template <typename T>
QKV_ALWAYS_INLINE void edge_norm_sums_math(const EdgeBlock<T>& b, const math::ChannelConstants<T>& constants, T& s,
                                           T& ss) {
  const math::ChannelConstants<T> c = constants;
  const T *px = b.p[0], *py = b.p[1], *pz = b.p[2];
  T s0 = 0, s1 = 0;
#pragma omp simd reduction(+ : s0, s1)
  for (int64_t e = 0; e < b.count; ++e) {
    const T n = math::norm(Vec3<T>{px[e], py[e], pz[e]}, c.eps2);
    s0 += n, s1 += n * n;
  }
  s = s0, ss = s1;
}

// out = leaky(y, d), y = p n'/n.
template <typename T>
QKV_ALWAYS_INLINE void edge_forward_math(EdgeBlock<T>& b, const math::ChannelConstants<T>& constants) {
  const math::ChannelConstants<T> c = constants;
  const T *px = b.p[0], *py = b.p[1], *pz = b.p[2], *dx = b.d[0], *dy = b.d[1], *dz = b.d[2];
  T *ox = b.out[0], *oy = b.out[1], *oz = b.out[2];
#pragma omp simd
  for (int64_t e = 0; e < b.count; ++e) {
    const auto z = math::edge_forward(Vec3<T>{px[e], py[e], pz[e]}, Vec3<T>{dx[e], dy[e], dz[e]}, c);
    ox[e] = z.x, oy[e] = z.y, oz[e] = z.z;
  }
}

#define QKV_EDGE_POINTERS                                                                     \
  const T *px = b.p[0], *py = b.p[1], *pz = b.p[2], *dx = b.d[0], *dy = b.d[1], *dz = b.d[2]; \
  const T *gx = b.g[0], *gy = b.g[1], *gz = b.g[2];                                           \
  T *ox = b.out[0], *oy = b.out[1], *oz = b.out[2];

// Backward pass 1: out = the gradient of d; the sums of gm and gm * nhat.
template <typename T>
QKV_ALWAYS_INLINE void edge_backward_direction_math(EdgeBlock<T>& b, const math::ChannelConstants<T>& constants,
                                                    T& s_gm, T& s_gm_nhat) {
  const math::ChannelConstants<T> c = constants;
  QKV_EDGE_POINTERS
  T s0 = 0, s1 = 0;
#pragma omp simd reduction(+ : s0, s1)
  for (int64_t e = 0; e < b.count; ++e) {
    const auto r = math::edge_backward_direction(Vec3<T>{px[e], py[e], pz[e]}, Vec3<T>{dx[e], dy[e], dz[e]},
                                                 Vec3<T>{gx[e], gy[e], gz[e]}, c);
    ox[e] = r.d.x, oy[e] = r.d.y, oz[e] = r.d.z;
    s0 += r.gm, s1 += r.gm * r.nhat;
  }
  s_gm = s0, s_gm_nhat = s1;
}

// Backward pass 2: out = the gradient of p, through batch norm.
template <typename T>
QKV_ALWAYS_INLINE void edge_backward_feature_math(EdgeBlock<T>& b, const math::ChannelConstants<T>& constants) {
  const math::ChannelConstants<T> c = constants;
  QKV_EDGE_POINTERS
#pragma omp simd
  for (int64_t e = 0; e < b.count; ++e) {
    const auto gp = math::edge_backward_feature(Vec3<T>{px[e], py[e], pz[e]}, Vec3<T>{dx[e], dy[e], dz[e]},
                                                Vec3<T>{gx[e], gy[e], gz[e]}, c);
    ox[e] = gp.x, oy[e] = gp.y, oz[e] = gp.z;
  }
}

#undef QKV_EDGE_POINTERS

template <typename T>
struct EdgeKernels {
  void (*norm_sums)(const EdgeBlock<T>&, const math::ChannelConstants<T>&, T&, T&);
  void (*forward)(EdgeBlock<T>&, const math::ChannelConstants<T>&);
  void (*backward_direction)(EdgeBlock<T>&, const math::ChannelConstants<T>&, T&, T&);
  void (*backward_feature)(EdgeBlock<T>&, const math::ChannelConstants<T>&);
};

#define QKV_EDGE_KERNELS(T)                                                                      \
  void norm_sums(const EdgeBlock<T>& b, const math::ChannelConstants<T>& c, T& s, T& ss) {       \
    edge_norm_sums_math(b, c, s, ss);                                                            \
  }                                                                                              \
  void forward(EdgeBlock<T>& b, const math::ChannelConstants<T>& c) { edge_forward_math(b, c); } \
  void backward_direction(EdgeBlock<T>& b, const math::ChannelConstants<T>& c, T& s, T& ss) {    \
    edge_backward_direction_math(b, c, s, ss);                                                   \
  }                                                                                              \
  void backward_feature(EdgeBlock<T>& b, const math::ChannelConstants<T>& c) { edge_backward_feature_math(b, c); }

namespace portable {
QKV_EDGE_KERNELS(float)
QKV_EDGE_KERNELS(double)
}  // namespace portable

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define QKV_EDGE_KERNELS_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
QKV_EDGE_KERNELS(float)
QKV_EDGE_KERNELS(double)
}  // namespace avx2
#pragma GCC pop_options
#endif
#undef QKV_EDGE_KERNELS

template <typename T>
EdgeKernels<T> edge_kernels() {
#ifdef QKV_EDGE_KERNELS_AVX2
  if (cpu_has_avx2_fma()) return {avx2::norm_sums, avx2::forward, avx2::backward_direction, avx2::backward_feature};
#endif
  return {portable::norm_sums, portable::forward, portable::backward_direction, portable::backward_feature};
}

// One (batch, channel)'s rows: [3][n] each, idx [n][k].
template <typename T>
struct EdgeRows {
  const T *a, *ac, *dd, *dc;
  const int64_t* nb;
  int64_t n, k;

  // p (and d, g when asked) for the edges of points [i0, i1); g = grad[i] / k.
  void gather(EdgeBlock<T>& b, int64_t i0, int64_t i1, bool with_direction, const T* grad = nullptr) const {
    const T inv_k = T(1) / static_cast<T>(k);
    int64_t e = 0;
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < k; ++j, ++e) {
        const int64_t q = nb[i * k + j];
        for (int x = 0; x < 3; ++x) {
          b.p[x][e] = a[x * n + q] + ac[x * n + i];
          if (with_direction) b.d[x][e] = dd[x * n + q] + dc[x * n + i];
          if (grad) b.g[x][e] = grad[x * n + i] * inv_k;
        }
      }
    b.count = e;
  }

  // to_neighbour[q] += out and to_centre[i] += out for every edge of the block.
  void scatter(const EdgeBlock<T>& b, int64_t i0, int64_t i1, T* to_neighbour, T* to_centre) const {
    int64_t e = 0;
    for (int64_t i = i0; i < i1; ++i) {
      T sum[3] = {0, 0, 0};
      for (int64_t j = 0; j < k; ++j, ++e) {
        const int64_t q = nb[i * k + j];
        for (int x = 0; x < 3; ++x) to_neighbour[x * n + q] += b.out[x][e], sum[x] += b.out[x][e];
      }
      for (int x = 0; x < 3; ++x) to_centre[x * n + i] += sum[x];
    }
  }
};

class EdgeConvMeanFunction : public torch::autograd::Function<EdgeConvMeanFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& feat_towards, const at::Tensor& feat_centre,
                            const at::Tensor& dir_towards, const at::Tensor& dir_centre, const at::Tensor& idx_in,
                            const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& running_mean,
                            const at::Tensor& running_var, bool training, double momentum, double eps, double slope,
                            RankSum* group) {
    const auto a = feat_towards.contiguous(), ac = feat_centre.contiguous();
    const auto dd = dir_towards.contiguous(), dc = dir_centre.contiguous();
    const auto idx = idx_in.contiguous();
    save_composed_inputs(ctx, "edge_conv_mean", {feat_towards, feat_centre, dir_towards, dir_centre, weight, bias},
                         running_mean, running_var, momentum, eps);
    const int64_t b = a.size(0), c = a.size(1), n = a.size(3), k = idx.size(2);
    const bool on_gpu = a.is_cuda();
    at::Tensor sums;
    if (training && on_gpu)
      sums = gpu::edge_norm_sums(a, ac, idx, kVNEps);
    else if (training)
      AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean_stats", [&] {
        const auto kernels = edge_kernels<scalar_t>();
        math::ChannelConstants<scalar_t> constants{};
        constants.eps2 = static_cast<scalar_t>(kVNEps * kVNEps);
        sums = channel_sums(b, c, [&](int64_t bc, double& s, double& ss) {
          const auto rows = edge_rows<scalar_t>(a, ac, dd, dc, idx, bc);
          EdgeBlock<scalar_t> block(kEdgePointBlock * k);
          for (int64_t i0 = 0; i0 < n; i0 += kEdgePointBlock) {
            rows.gather(block, i0, std::min(n, i0 + kEdgePointBlock), false);
            scalar_t s0, s1;
            kernels.norm_sums(block, constants, s0, s1);
            s += s0, ss += s1;
          }
        });
      });
    const auto norm = norm_affine(sums, static_cast<double>(b * n * k), weight, bias, running_mean, running_var,
                                  training, momentum, eps, group);
    const auto channels = norm.pointers(slope);
    auto out = on_gpu ? gpu::edge_conv_mean(a, ac, dd, dc, idx, channels) : torch::empty_like(a);
    if (!on_gpu)
      AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean", [&] {
        const auto kernels = edge_kernels<scalar_t>();
        auto* op = out.data_ptr<scalar_t>();
        const scalar_t inv_k = scalar_t(1) / static_cast<scalar_t>(k);
        at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
          EdgeBlock<scalar_t> block(kEdgePointBlock * k);
          for (int64_t bc = begin; bc < end; ++bc) {
            const auto rows = edge_rows<scalar_t>(a, ac, dd, dc, idx, bc);
            const auto constants = channels.at<scalar_t>(bc % c);
            scalar_t* o = op + bc * 3 * n;
            for (int64_t i0 = 0; i0 < n; i0 += kEdgePointBlock) {
              const int64_t i1 = std::min(n, i0 + kEdgePointBlock);
              rows.gather(block, i0, i1, true);
              kernels.forward(block, constants);
              for (int64_t i = i0; i < i1; ++i)
                for (int x = 0; x < 3; ++x) {
                  const scalar_t* z = block.out[x] + (i - i0) * k;
                  scalar_t sum = 0;
                  for (int64_t j = 0; j < k; ++j) sum += z[j];
                  o[x * n + i] = sum * inv_k;
                }
            }
          }
        });
      });
    ctx->save_for_backward({a, ac, dd, dc, idx, weight, norm.mean, norm.invstd, norm.scale, norm.shift});
    ctx->saved_data["training"] = training;
    ctx->saved_data["count"] = norm.count;
    ctx->saved_data["slope"] = slope;
    ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(group));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (gradient_graph_requested()) {
      const bool training = ctx->saved_data["training"].toBool();
      const double slope = ctx->saved_data["slope"].toDouble();
      auto* group = group_of(ctx);
      const auto idx = ctx->get_saved_variables()[4];  // saved for the fused backward; it needs no history
      auto g = composed_vjp(
          [&](const auto& in) {
            auto [mean, var] = forward_time_statistics(ctx);
            return variable_list{edge_conv_mean_composed(in[0], in[1], in[2], in[3], idx, in[4], in[5], mean, var,
                                                         training, ctx->saved_data["momentum"].toDouble(),
                                                         ctx->saved_data["eps"].toDouble(), group, slope)};
          },
          inputs_for_graph(ctx), grad);
      // The Function's inputs: the four features, idx, weight, bias, then what needs no gradient.
      variable_list out(14);
      for (int i = 0; i < 4; ++i) out[i] = g[i];
      out[5] = g[4], out[6] = g[5];
      return out;
    }
    const auto saved = ctx->get_saved_variables();
    const auto &a = saved[0], &ac = saved[1], &dd = saved[2], &dc = saved[3], &idx = saved[4], &weight = saved[5];
    NormAffine norm{saved[6], saved[7], saved[8], saved[9], ctx->saved_data["count"].toDouble()};
    const bool training = ctx->saved_data["training"].toBool();
    const double slope = ctx->saved_data["slope"].toDouble();
    auto* group = group_of(ctx);
    const auto g_out = grad[0].contiguous();
    const int64_t b = a.size(0), c = a.size(1), n = a.size(3), k = idx.size(2);
    auto ga = torch::zeros_like(a), gac = torch::zeros_like(ac), gdd = torch::zeros_like(dd),
         gdc = torch::zeros_like(dc);
    const bool on_gpu = a.is_cuda();
    // Pass 1: the directions' gradients, and the channel sums of gm = <gy, p>/n
    // and gm * nhat (batch norm's weight and bias gradients and its backward
    // terms). On the CPU one task per (batch, channel): it alone writes that
    // channel's rows, so the scatter to neighbours needs no atomics.
    const auto channels = norm.pointers(slope);
    at::Tensor sums;
    if (on_gpu)
      sums = gpu::edge_conv_mean_backward_direction(a, ac, dd, dc, idx, g_out, channels, gdd, gdc);
    else
      AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean_backward_sums", [&] {
        const auto kernels = edge_kernels<scalar_t>();
        const auto* gp = g_out.data_ptr<scalar_t>();
        auto *gdp = gdd.data_ptr<scalar_t>(), *gdcp = gdc.data_ptr<scalar_t>();
        sums = channel_sums(b, c, [&](int64_t bc, double& s_gm, double& s_gm_nhat) {
          const auto rows = edge_rows<scalar_t>(a, ac, dd, dc, idx, bc);
          const auto constants = channels.at<scalar_t>(bc % c);
          EdgeBlock<scalar_t> block(kEdgePointBlock * k);
          const int64_t row = bc * 3 * n;
          for (int64_t i0 = 0; i0 < n; i0 += kEdgePointBlock) {
            const int64_t i1 = std::min(n, i0 + kEdgePointBlock);
            rows.gather(block, i0, i1, true, gp + row);
            scalar_t s0, s1;
            kernels.backward_direction(block, constants, s0, s1);
            s_gm += s0, s_gm_nhat += s1;
            rows.scatter(block, i0, i1, gdp + row, gdcp + row);
          }
        });
      });
    const auto grad_bias = sums[0].to(weight.scalar_type()), grad_weight = sums[1].to(weight.scalar_type());
    auto global = sums.clone();
    if (training && group != nullptr && group->world_size() > 1) group->all_reduce_sum(global, "batch-norm gradient");
    // Pass 2: the features' gradients through batch norm, scattered to the
    // neighbour (A) and the centre (Ac).
    const auto with_means = norm.pointers(slope, training ? &global : nullptr);
    if (on_gpu)
      gpu::edge_conv_mean_backward_feature(a, ac, dd, dc, idx, g_out, with_means, ga, gac);
    else
      AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean_backward", [&] {
        const auto kernels = edge_kernels<scalar_t>();
        const auto* gp = g_out.data_ptr<scalar_t>();
        auto *gap = ga.data_ptr<scalar_t>(), *gacp = gac.data_ptr<scalar_t>();
        at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
          EdgeBlock<scalar_t> block(kEdgePointBlock * k);
          for (int64_t bc = begin; bc < end; ++bc) {
            const auto rows = edge_rows<scalar_t>(a, ac, dd, dc, idx, bc);
            const auto constants = with_means.at<scalar_t>(bc % c);
            const int64_t row = bc * 3 * n;
            for (int64_t i0 = 0; i0 < n; i0 += kEdgePointBlock) {
              const int64_t i1 = std::min(n, i0 + kEdgePointBlock);
              rows.gather(block, i0, i1, true, gp + row);
              kernels.backward_feature(block, constants);
              rows.scatter(block, i0, i1, gap + row, gacp + row);
            }
          }
        });
      });
    return {ga,           gac,          gdd,          gdc,          at::Tensor(), grad_weight,  grad_bias,
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }

 private:
  template <typename T>
  static EdgeRows<T> edge_rows(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd, const at::Tensor& dc,
                               const at::Tensor& idx, int64_t bc) {
    const int64_t c = a.size(1), n = a.size(3), k = idx.size(2), row = bc * 3 * n;
    return {a.data_ptr<T>() + row,
            ac.data_ptr<T>() + row,
            dd.data_ptr<T>() + row,
            dc.data_ptr<T>() + row,
            idx.data_ptr<int64_t>() + (bc / c) * n * k,
            n,
            k};
  }
};

// Whether the fused kernels take x: float32 or float64 on the CPU, or on a GPU
// that this build's CUDA kernels have code for, with every other tensor on x's
// device (undefined ones aside).
bool fused_kernels_take(const at::Tensor& x, std::initializer_list<const at::Tensor*> others) {
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble) return false;
  if (!x.device().is_cpu() && !cuda::kernels_run_on(x.device())) return false;
  for (const auto* t : others)
    if (t->defined() && t->device() != x.device()) return false;
  return x.numel() > 0 && !under_function_transform();
}

}  // namespace

at::Tensor vn_leaky_relu(const at::Tensor& x, const at::Tensor& direction, double negative_slope, double eps) {
  require_vn(x, "vn_leaky_relu");
  const bool fused = fused_kernels_take(x, {&direction}) && direction.scalar_type() == x.scalar_type() &&
                     direction.dim() == x.dim() && direction.size(0) == x.size(0) &&
                     (direction.size(1) == x.size(1) || direction.size(1) == 1) &&
                     direction.sizes().slice(2).equals(x.sizes().slice(2));
  if (!fused) return vn_leaky_relu_composed(x, direction, negative_slope, eps);
  return VNLeakyReLUFunction::apply(x, direction, negative_slope, eps);
}

at::Tensor vn_frame_coordinates(const at::Tensor& x, const at::Tensor& frame) {
  require_vn(x, "vn_frame_coordinates");
  std::vector<int64_t> frame_shape = x.sizes().vec();
  frame_shape[1] = 3;
  if (!frame.sizes().equals(frame_shape))
    throw UsageError("vn_frame_coordinates: frame must be " + shape_of(at::IntArrayRef(frame_shape)) + " for x " +
                     shape_of(x) + ", got " + shape_of(frame));
  const bool fused = fused_kernels_take(x, {&frame}) && frame.scalar_type() == x.scalar_type();
  if (!fused) return vn_frame_coordinates_composed(x, frame);
  return VNFrameCoordinatesFunction::apply(x, frame);
}

namespace {

// Running statistics, where given, are one per channel, both of them: the
// kernels index them by channel, and a single value was broadcast to every
// channel without a word (the composed path's batch_norm refuses it).
void check_running_stats(const char* op, const at::Tensor& running_mean, const at::Tensor& running_var,
                         int64_t channels) {
  if (!running_mean.defined() && !running_var.defined()) return;
  const auto wanted = std::vector<int64_t>{channels};
  if (!running_mean.defined() || !running_var.defined() || !running_mean.sizes().equals(wanted) ||
      !running_var.sizes().equals(wanted))
    throw UsageError(std::string(op) + ": running_mean " +
                     (running_mean.defined() ? shape_of(running_mean) : std::string("None")) + " and running_var " +
                     (running_var.defined() ? shape_of(running_var) : std::string("None")) + " must both be [" +
                     std::to_string(channels) + "], one per channel");
}

}  // namespace

at::Tensor vn_batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double momentum,
                         double eps, RankSum* group) {
  require_vn(x, "vn_batch_norm");
  check_running_stats("vn_batch_norm", running_mean, running_var, x.size(1));
  const bool fused = fused_kernels_take(x, {&weight, &bias, &running_mean, &running_var}) && weight.defined() &&
                     bias.defined() && (training || (running_mean.defined() && running_var.defined()));
  if (!fused) return vn_batch_norm_composed(x, weight, bias, running_mean, running_var, training, momentum, eps, group);
  if (weight.dim() != 1 || weight.size(0) != x.size(1) || bias.sizes() != weight.sizes())
    throw UsageError("vn_batch_norm: weight " + shape_of(weight) + " and bias " + shape_of(bias) + " do not match " +
                     std::to_string(x.size(1)) + " channels");
  return VNBatchNormFunction::apply(x, weight, bias, running_mean, running_var, training, momentum, eps, group);
}

at::Tensor edge_conv_mean_composed(const at::Tensor& feat_towards, const at::Tensor& feat_centre,
                                   const at::Tensor& dir_towards, const at::Tensor& dir_centre, const at::Tensor& idx,
                                   const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& running_mean,
                                   const at::Tensor& running_var, bool training, double momentum, double eps,
                                   RankSum* group, double negative_slope) {
  const auto p = gather_neighbours(feat_towards, idx) + feat_centre.unsqueeze(-1);
  const auto d = gather_neighbours(dir_towards, idx) + dir_centre.unsqueeze(-1);
  return vn_mean_pool(vn_leaky_relu(
      vn_batch_norm(p, weight, bias, running_mean, running_var, training, momentum, eps, group), d, negative_slope));
}

at::Tensor edge_conv_mean(const at::Tensor& feat_towards, const at::Tensor& feat_centre, const at::Tensor& dir_towards,
                          const at::Tensor& dir_centre, const at::Tensor& idx, const at::Tensor& weight,
                          const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                          bool training, double momentum, double eps, RankSum* group, double negative_slope) {
  for (const auto* t : {&feat_towards, &feat_centre, &dir_towards, &dir_centre})
    if (t->dim() != 4 || t->size(2) != 3 || !t->sizes().equals(feat_towards.sizes()) ||
        t->scalar_type() != feat_towards.scalar_type() || t->device() != feat_towards.device())
      throw UsageError("edge_conv_mean: expected four VN features [B, C, 3, N] of one shape, type and device, got " +
                       shape_of(feat_towards) + ", " + shape_of(feat_centre) + ", " + shape_of(dir_towards) + ", " +
                       shape_of(dir_centre));
  const int64_t b = feat_towards.size(0), c = feat_towards.size(1), n = feat_towards.size(3);
  if (idx.dim() != 3 || idx.size(0) != b || idx.size(1) != n || idx.size(2) < 1 || idx.scalar_type() != at::kLong)
    throw UsageError("edge_conv_mean: idx " + shape_of(idx) + " is not int64 [B, N, k] for features " +
                     shape_of(feat_towards));
  if (weight.dim() != 1 || weight.size(0) != c || !bias.sizes().equals(weight.sizes()))
    throw UsageError("edge_conv_mean: batch-norm weight " + shape_of(weight) + " and bias " + shape_of(bias) +
                     " do not match " + std::to_string(c) + " channels");
  check_running_stats("edge_conv_mean", running_mean, running_var, c);
  const bool fused = fused_kernels_take(feat_towards, {&idx, &weight, &bias, &running_mean, &running_var}) &&
                     (training || (running_mean.defined() && running_var.defined()));
  if (!fused)
    return edge_conv_mean_composed(feat_towards, feat_centre, dir_towards, dir_centre, idx, weight, bias, running_mean,
                                   running_var, training, momentum, eps, group, negative_slope);
  // The kernel reads idx unchecked: a neighbour outside the cloud is an error here.
  if (idx.min().item<int64_t>() < 0 || idx.max().item<int64_t>() >= n)
    throw UsageError("edge_conv_mean: idx holds a point outside 0.." + std::to_string(n - 1));
  return EdgeConvMeanFunction::apply(feat_towards, feat_centre, dir_towards, dir_centre, idx, weight, bias,
                                     running_mean, running_var, training, momentum, eps, negative_slope, group);
}

}  // namespace qkv::vn
