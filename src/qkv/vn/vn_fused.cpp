// The VN nonlinearity and VN batch norm as one pass forward and one (leaky
// ReLU) or two (batch norm) passes backward over the vectors, instead of the
// ~10 broadcast products, reductions over the size-3 axis and their autograd
// nodes of the composed versions (vn_ops.cpp). In VN-DGCNN these ran on
// [B, C, 3, N, k] edge tensors and took most of a training step, much of it
// in page faults of the temporaries (docs/vnt.md, "Profile"). Both keep the
// composed versions as references (tests/vn/vn_fused_test.cpp: gradcheck in
// float64 and equality with the composed versions).
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/distributed/process_group.h"
#include "qkv/distributed/sync_batch_norm.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::vn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Points (or edges) per task of the leaky-ReLU backward: the task owns a
// block of every channel's rows, so a shared direction's gradient is summed
// over channels without atomics.
constexpr int64_t kPointBlock = 1024;

template <typename T>
inline T norm3(T a, T b, T c, T eps2) {
  return std::sqrt(a * a + b * b + c * c + eps2);
}

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
          for (int64_t i = 0; i < m; ++i) {
            const scalar_t xa = x0[i], xb = x0[m + i], xc = x0[2 * m + i];
            const scalar_t da = d0[i], db = d0[m + i], dc = d0[2 * m + i];
            const scalar_t f = (xa * da + xb * db + xc * dc) / (da * da + db * db + dc * dc + e);
            const scalar_t s = f <= 0 ? a * f : scalar_t(0);
            y0[i] = xa - s * da, y0[m + i] = xb - s * db, y0[2 * m + i] = xc - s * dc;
          }
        }
      });
    });
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &d = saved[1];
    const double slope = ctx->saved_data["slope"].toDouble(), eps = ctx->saved_data["eps"].toDouble();
    const auto g = grad[0].contiguous();
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
              const scalar_t xa = x0[i], xb = x0[m + i], xc = x0[2 * m + i];
              const scalar_t da = d0[i], db = d0[m + i], dc = d0[2 * m + i];
              const scalar_t ga = g0[i], gb = g0[m + i], gc = g0[2 * m + i];
              const scalar_t q = da * da + db * db + dc * dc + e;
              const scalar_t f = (xa * da + xb * db + xc * dc) / q;
              if (f > 0) {
                gx0[i] = ga, gx0[m + i] = gb, gx0[2 * m + i] = gc;
                continue;
              }
              // y = x - a f d: dL/dx = g - a <g,d>/q d; dL/dd = -a (f g + <g,d>/q (x - 2 f d)).
              const scalar_t h = (ga * da + gb * db + gc * dc) / q;
              gx0[i] = ga - a * h * da, gx0[m + i] = gb - a * h * db, gx0[2 * m + i] = gc - a * h * dc;
              gd0[i] -= a * (f * ga + h * (xa - 2 * f * da));
              gd0[m + i] -= a * (f * gb + h * (xb - 2 * f * db));
              gd0[2 * m + i] -= a * (f * gc + h * (xc - 2 * f * dc));
            }
          }
        }
      });
    });
    return {gx, gd, at::Tensor(), at::Tensor()};
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

distributed::ProcessGroup* group_of(AutogradContext* ctx) {
  return reinterpret_cast<distributed::ProcessGroup*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

class VNBatchNormFunction : public torch::autograd::Function<VNBatchNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                            bool training, double momentum, double eps, distributed::ProcessGroup* group) {
    const auto x = x_in.contiguous();
    const int64_t b = x.size(0), c = x.size(1), m = x.numel() / (b * c * 3);
    double count = static_cast<double>(b * m);
    at::Tensor mean, invstd;  // [C] double
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm_stats", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      const scalar_t eps2 = static_cast<scalar_t>(kVNEps * kVNEps);
      if (training) {
        auto sums = channel_sums(b, c, [&](int64_t bc, double& s, double& ss) {
          const scalar_t* x0 = xp + bc * 3 * m;
          for (int64_t i = 0; i < m; ++i) {
            const double n = norm3(x0[i], x0[m + i], x0[2 * m + i], eps2);
            s += n, ss += n * n;
          }
        });
        if (group != nullptr && group->world_size() > 1) {
          auto packed = torch::cat({sums.flatten(), torch::full({1}, count, torch::kDouble)});
          group->all_reduce_sum(packed, "batch-norm statistics");
          sums = packed.slice(0, 0, 2 * c).view({2, c});
          count = packed[2 * c].item<double>();
        }
        if (count <= 1)
          throw UsageError("VN batch norm: " + std::to_string(static_cast<int64_t>(count)) +
                           " vectors per channel in the batch; training needs more than one");
        mean = sums[0] / count;
        const auto var = (sums[1] / count - mean * mean).clamp_min(0);
        if (running_mean.defined())
          distributed::update_running_stats(running_mean, running_var, mean, var, count, momentum);
        invstd = (var + eps).rsqrt();
      } else {
        mean = running_mean.to(torch::kDouble);
        invstd = (running_var.to(torch::kDouble) + eps).rsqrt();
      }
    });
    const auto w = weight.to(torch::kDouble).contiguous(), bi = bias.to(torch::kDouble).contiguous();
    // n' = scale n + shift per channel.
    const auto scale = (w * invstd).contiguous(), shift = (bi - w * mean * invstd).contiguous();
    auto y = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      auto* yp = y.data_ptr<scalar_t>();
      const auto* sc = scale.data_ptr<double>();
      const auto* sh = shift.data_ptr<double>();
      const scalar_t eps2 = static_cast<scalar_t>(kVNEps * kVNEps);
      at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bc = begin; bc < end; ++bc) {
          const scalar_t k1 = static_cast<scalar_t>(sc[bc % c]), k0 = static_cast<scalar_t>(sh[bc % c]);
          const scalar_t* x0 = xp + bc * 3 * m;
          scalar_t* y0 = yp + bc * 3 * m;
          for (int64_t i = 0; i < m; ++i) {
            const scalar_t xa = x0[i], xb = x0[m + i], xc = x0[2 * m + i];
            const scalar_t n = norm3(xa, xb, xc, eps2);
            const scalar_t r = (k1 * n + k0) / n;
            y0[i] = xa * r, y0[m + i] = xb * r, y0[2 * m + i] = xc * r;
          }
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
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3];
    const auto &scale = saved[4], &shift = saved[5];
    const bool training = ctx->saved_data["training"].toBool();
    const double count = ctx->saved_data["count"].toDouble();
    auto* group = group_of(ctx);
    const auto g = grad[0].contiguous();
    const int64_t b = x.size(0), c = x.size(1), m = x.numel() / (b * c * 3);
    const auto* mu = mean.data_ptr<double>();
    const auto* is = invstd.data_ptr<double>();
    // n' = w nhat + b with nhat = (n - mean) invstd; y = x n'/n. Per vector,
    // with r = <g, x>: dL/dn' = r/n (=: gm), and through the 1/n, -r n'/n^2.
    // Pass 1: the channel sums of gm and gm * nhat (bias and weight gradients,
    // and batch norm's backward terms).
    at::Tensor sums;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm_backward_sums", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* gp = g.data_ptr<scalar_t>();
      const scalar_t eps2 = static_cast<scalar_t>(kVNEps * kVNEps);
      sums = channel_sums(b, c, [&](int64_t bc, double& s_gm, double& s_gm_nhat) {
        const scalar_t mu_c = static_cast<scalar_t>(mu[bc % c]), is_c = static_cast<scalar_t>(is[bc % c]);
        const scalar_t *x0 = xp + bc * 3 * m, *g0 = gp + bc * 3 * m;
        for (int64_t i = 0; i < m; ++i) {
          const scalar_t xa = x0[i], xb = x0[m + i], xc = x0[2 * m + i];
          const scalar_t n = norm3(xa, xb, xc, eps2);
          const scalar_t gm = (g0[i] * xa + g0[m + i] * xb + g0[2 * m + i] * xc) / n;
          s_gm += gm, s_gm_nhat += gm * ((n - mu_c) * is_c);
        }
      });
    });
    const auto grad_bias = sums[0].to(weight.scalar_type()), grad_weight = sums[1].to(weight.scalar_type());
    // Batch norm's backward in training mode needs the means of gm and
    // gm * nhat over the whole (global) batch; in eval mode the statistics
    // are constants.
    auto global = sums.clone();
    if (training && group != nullptr && group->world_size() > 1) group->all_reduce_sum(global, "batch-norm gradient");
    const auto* gs = global.data_ptr<double>();
    const auto* sc = scale.data_ptr<double>();
    const auto* sh = shift.data_ptr<double>();
    auto gx = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_batch_norm_backward", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* gp = g.data_ptr<scalar_t>();
      auto* gxp = gx.data_ptr<scalar_t>();
      const scalar_t eps2 = static_cast<scalar_t>(kVNEps * kVNEps);
      at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bc = begin; bc < end; ++bc) {
          const int64_t ci = bc % c;
          const scalar_t mu_c = static_cast<scalar_t>(mu[ci]), is_c = static_cast<scalar_t>(is[ci]);
          const scalar_t k1 = static_cast<scalar_t>(sc[ci]), k0 = static_cast<scalar_t>(sh[ci]);
          // Batch norm's backward: dL/dn = w invstd (gm - mean(gm) - nhat mean(gm nhat)) in training.
          const scalar_t mean_gm = training ? static_cast<scalar_t>(gs[ci] / count) : scalar_t(0);
          const scalar_t mean_gm_nhat = training ? static_cast<scalar_t>(gs[c + ci] / count) : scalar_t(0);
          const scalar_t *x0 = xp + bc * 3 * m, *g0 = gp + bc * 3 * m;
          scalar_t* gx0 = gxp + bc * 3 * m;
          for (int64_t i = 0; i < m; ++i) {
            const scalar_t xa = x0[i], xb = x0[m + i], xc = x0[2 * m + i];
            const scalar_t ga = g0[i], gb = g0[m + i], gc = g0[2 * m + i];
            const scalar_t n = norm3(xa, xb, xc, eps2);
            const scalar_t inv_n = 1 / n;
            const scalar_t nhat = (n - mu_c) * is_c;
            const scalar_t n_new = k1 * n + k0;
            const scalar_t r = ga * xa + gb * xb + gc * xc;
            const scalar_t gm = r * inv_n;
            const scalar_t gn = k1 * (gm - mean_gm - nhat * mean_gm_nhat) - gm * n_new * inv_n;
            const scalar_t s = n_new * inv_n, t = gn * inv_n;
            gx0[i] = ga * s + xa * t, gx0[m + i] = gb * s + xb * t, gx0[2 * m + i] = gc * s + xc * t;
          }
        }
      });
    });
    return {gx, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor vn_leaky_relu(const at::Tensor& x, const at::Tensor& direction, double negative_slope, double eps) {
  require_vn(x, "vn_leaky_relu");
  const bool fused = x.device().is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) &&
                     direction.scalar_type() == x.scalar_type() && direction.device() == x.device() &&
                     direction.dim() == x.dim() && direction.size(0) == x.size(0) &&
                     (direction.size(1) == x.size(1) || direction.size(1) == 1) &&
                     direction.sizes().slice(2).equals(x.sizes().slice(2)) && x.numel() > 0;
  if (!fused) return vn_leaky_relu_composed(x, direction, negative_slope, eps);
  return VNLeakyReLUFunction::apply(x, direction, negative_slope, eps);
}

at::Tensor vn_batch_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                         double momentum, double eps, distributed::ProcessGroup* group) {
  require_vn(x, "vn_batch_norm");
  const bool fused = x.device().is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) &&
                     weight.defined() && bias.defined() && x.numel() > 0 &&
                     (training || (running_mean.defined() && running_var.defined()));
  if (!fused)
    return vn_batch_norm_composed(x, weight, bias, running_mean, running_var, training, momentum, eps, group);
  if (weight.dim() != 1 || weight.size(0) != x.size(1) || bias.sizes() != weight.sizes())
    throw UsageError("vn_batch_norm: weight " + shape_of(weight) + " and bias " + shape_of(bias) + " do not match " +
                     std::to_string(x.size(1)) + " channels");
  return VNBatchNormFunction::apply(x, weight, bias, running_mean, running_var, training, momentum, eps, group);
}

}  // namespace qkv::vn
