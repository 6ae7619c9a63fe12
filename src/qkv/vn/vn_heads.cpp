#include "qkv/vn/vn_heads.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/layers/second_order.h"
#include "qkv/runtime/blas.h"
#include "qkv/runtime/parallel.h"

namespace qkv::vn {
namespace {

using blas::gemm;

// Sizes of one split/merge: B clouds, C channels on the VN side, N points,
// H heads of d channels. Head h's block W_h of the weight is rows h*d.. of
// split's w [H*d, C] ([d, C]) or columns h*d.. of merge's w [C, H*d] ([C, d]).
struct HeadGeometry {
  int64_t B, C, N, H, d;
  int64_t x_axis(int64_t b, int64_t c, int64_t i) const { return ((b * C + c) * 3 + i) * N; }     // x[b, c, i, 0]
  int64_t row(int64_t b, int64_t h, int64_t i) const { return (b * H + h) * N * 3 * d + i * d; }  // rows[b, h, 0, i*d]
  int64_t block(int64_t h, bool split) const { return split ? h * d * C : h * d; }                // W_h[0, 0]
  int64_t weight_stride(bool split) const { return split ? C : H * d; }
};

bool served_here(const at::Tensor& a, const at::Tensor& w) {
  return a.device().is_cpu() && w.device().is_cpu() && a.scalar_type() == w.scalar_type() &&
         (a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble) && !under_function_transform();
}

// Tasks are (cloud, axis) pairs: each owns its slice of the VN-side tensor
// and, for every head, its axis's entries of the rows, so writes never overlap.
// Weight gradients go to per-worker buffers summed at the end.
int64_t cloud_axis_workers(const HeadGeometry& g) {
  const double flops = 2.0 * g.B * 3 * g.N * g.C * g.H * g.d;
  return parallel_workers(g.B * 3, flops < 4e6 ? 1 : 0);
}

template <typename Fn>
void for_each_cloud_axis(const HeadGeometry& g, const Fn& fn) {
  blas::OneBlasThread one_blas_thread;  // small GEMMs, the workers use the cores
  parallel_tasks(g.B * 3, cloud_axis_workers(g), [&](int64_t worker, int64_t task) { fn(worker, task / 3, task % 3); });
}

// rows_bhi [N, d] (row stride 3d) = X_bi^T [N, C] V_h [C, d] for every head:
// split's forward (V_h = W_h^T) and merge's backward (x the output gradient,
// V_h = W_h).
template <typename T>
void to_rows(const T* x, const T* w, T* rows, const HeadGeometry& g, bool split) {
  for_each_cloud_axis(g, [&](int64_t, int64_t b, int64_t i) {
    for (int64_t h = 0; h < g.H; ++h)
      gemm(true, split, g.N, g.d, g.C, T(1), x + g.x_axis(b, 0, i), 3 * g.N, w + g.block(h, split),
           g.weight_stride(split), T(0), rows + g.row(b, h, i), 3 * g.d);
  });
}

// out_bi [C, N] (row stride 3N) = sum_h U_h [C, d] rows_bhi^T [d, N]: merge's
// forward (U_h = W_h) and split's backward (out is dX, U_h = W_h^T).
template <typename T>
void from_rows(const T* rows, const T* w, T* out, const HeadGeometry& g, bool split) {
  for_each_cloud_axis(g, [&](int64_t, int64_t b, int64_t i) {
    for (int64_t h = 0; h < g.H; ++h)
      gemm(split, true, g.C, g.N, g.d, T(1), w + g.block(h, split), g.weight_stride(split), rows + g.row(b, h, i),
           3 * g.d, h == 0 ? T(0) : T(1), out + g.x_axis(b, 0, i), 3 * g.N);
  });
}

// The weight gradient of either direction: W_h's block [d, C] (split) or
// [C, d] (merge) = sum over clouds and axes of rows_bhi^T [d, N] X_bi^T [N, C]
// (or its transpose).
template <typename T>
at::Tensor weight_grad(const T* rows, const T* x, const HeadGeometry& g, bool split, const at::TensorOptions& opts) {
  const int64_t size = g.H * g.d * g.C;
  at::Tensor partial = at::zeros({cloud_axis_workers(g), size}, opts);
  T* base = partial.data_ptr<T>();
  for_each_cloud_axis(g, [&](int64_t worker, int64_t b, int64_t i) {
    T* dw = base + worker * size;
    for (int64_t h = 0; h < g.H; ++h) {
      const T* r = rows + g.row(b, h, i);
      const T* xb = x + g.x_axis(b, 0, i);
      T* block = dw + g.block(h, split);
      if (split)
        gemm(true, true, g.d, g.C, g.N, T(1), r, 3 * g.d, xb, 3 * g.N, T(1), block, g.weight_stride(split));
      else
        gemm(false, false, g.C, g.d, g.N, T(1), xb, 3 * g.N, r, 3 * g.d, T(1), block, g.weight_stride(split));
    }
  });
  return partial.sum(0);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// split: x [B, C, 3, N] -> rows [B, H, N, 3d]; merge: rows -> [B, C, 3, N].
// Each one's backward is the other's product plus the weight gradient.
struct VNHeadsFunction : public torch::autograd::Function<VNHeadsFunction> {
  static HeadGeometry geometry(const at::Tensor& input, const at::Tensor& w, int64_t heads, bool split) {
    return split ? HeadGeometry{input.size(0), input.size(1), input.size(3), heads, w.size(0) / heads}
                 : HeadGeometry{input.size(0), w.size(0), input.size(2), input.size(1), input.size(3) / 3};
  }

  static variable_list forward(AutogradContext* ctx, const at::Tensor& input_in, const at::Tensor& w_in, int64_t heads,
                               bool split) {
    const at::Tensor input = input_in.contiguous(), w = w_in.contiguous();
    const HeadGeometry g = geometry(input, w, heads, split);
    at::Tensor out =
        split ? at::empty({g.B, g.H, g.N, 3 * g.d}, input.options()) : at::empty({g.B, g.C, 3, g.N}, input.options());
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "vn_heads", [&] {
      const scalar_t *in = input.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
      split ? to_rows(in, wp, out.data_ptr<scalar_t>(), g, true)
            : from_rows(in, wp, out.data_ptr<scalar_t>(), g, false);
    });
    ctx->save_for_backward({input, w});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["split"] = split;
    keep_inputs_for_graph(ctx, "vn_heads", {input_in, w_in});  // for create_graph (layers/second_order.h)
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const bool split = ctx->saved_data["split"].toBool();
    if (gradient_graph_requested()) {
      const int64_t heads = ctx->saved_data["heads"].toInt();
      auto g = composed_vjp(
          [&](const auto& in) {
            return variable_list{split ? vn_heads_split_composed(in[0], in[1], heads)
                                       : vn_heads_merge_composed(in[0], in[1])};
          },
          inputs_for_graph(ctx), grads);
      return {g[0], g[1], at::Tensor(), at::Tensor()};
    }
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &w = saved[1];
    const HeadGeometry g = geometry(input, w, ctx->saved_data["heads"].toInt(), split);
    const at::Tensor grad = grads[0].contiguous();
    at::Tensor dinput, dw;
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "vn_heads_backward", [&] {
      const scalar_t *gp = grad.data_ptr<scalar_t>(), *in = input.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
      if (ctx->needs_input_grad(0)) {
        dinput = at::empty_like(input);
        split ? from_rows(gp, wp, dinput.data_ptr<scalar_t>(), g, true)
              : to_rows(gp, wp, dinput.data_ptr<scalar_t>(), g, false);
      }
      // The rows side is the gradient for split, the input for merge.
      if (ctx->needs_input_grad(1))
        dw = (split ? weight_grad(gp, in, g, true, w.options()) : weight_grad(in, gp, g, false, w.options()))
                 .view(w.sizes());
    });
    return {dinput, dw, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vn_heads_split(const at::Tensor& x, const at::Tensor& weight, int64_t heads) {
  require_vn(x, "vn_heads_split");
  if (x.dim() != 4 || weight.dim() != 2 || weight.size(1) != x.size(1) || heads < 1 || weight.size(0) % heads != 0 ||
      weight.size(0) == 0)
    throw UsageError("vn_heads_split: expected x [B, C, 3, N] and weight [H*d, C] with H = " + std::to_string(heads) +
                     ", got " + shape_of(x) + " and " + shape_of(weight));
  if (!served_here(x, weight) || x.numel() == 0) return vn_heads_split_composed(x, weight, heads);
  return VNHeadsFunction::apply(x, weight, heads, true)[0];
}

at::Tensor vn_heads_split_composed(const at::Tensor& x, const at::Tensor& weight, int64_t heads) {
  return vn_heads_rows(vn_linear(x, weight), heads);
}

at::Tensor vn_heads_rows(const at::Tensor& features, int64_t heads) {
  const int64_t b = features.size(0), n = features.size(3), d = features.size(1) / heads;
  // [B, H*d, 3, N] -> [B, H, N, 3, d] -> rows of 3d
  return features.view({b, heads, d, 3, n}).permute({0, 1, 4, 3, 2}).reshape({b, heads, n, 3 * d});
}

at::Tensor vn_heads_merge(const at::Tensor& rows, const at::Tensor& weight) {
  if (rows.dim() != 4 || rows.size(3) % 3 != 0 || rows.size(3) == 0 || weight.dim() != 2 ||
      weight.size(1) != rows.size(1) * rows.size(3) / 3)
    throw UsageError("vn_heads_merge: expected rows [B, H, N, 3d] and weight [C, H*d], got " + shape_of(rows) +
                     " and " + shape_of(weight));
  if (!served_here(rows, weight) || rows.numel() == 0 || weight.numel() == 0)
    return vn_heads_merge_composed(rows, weight);
  return VNHeadsFunction::apply(rows, weight, rows.size(1), false)[0];
}

at::Tensor vn_heads_merge_composed(const at::Tensor& rows, const at::Tensor& weight) {
  return vn_linear(vn_heads_features(rows), weight);
}

at::Tensor vn_heads_features(const at::Tensor& rows) {
  const int64_t b = rows.size(0), heads = rows.size(1), n = rows.size(2), d = rows.size(3) / 3;
  // [B, H, N, 3, d] -> [B, H, d, 3, N] -> [B, H*d, 3, N]
  return rows.view({b, heads, n, 3, d}).permute({0, 1, 4, 3, 2}).reshape({b, heads * d, 3, n});
}

VNAttentionResult vn_attention_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t channels,
                                    attention::SdpaOptions options) {
  if (channels < 1 || q.dim() != 4 || q.size(3) != 3 * channels)
    throw UsageError("vn_attention_rows: expected q [B, H, N, 3C] with C = " + std::to_string(channels) + ", got " +
                     shape_of(q));
  if (!options.scale) options.scale = 1.0 / std::sqrt(static_cast<double>(channels));
  auto r = attention::scaled_dot_product_attention(q, k, v, options);
  return {r.output, r.weights};
}

}  // namespace qkv::vn
