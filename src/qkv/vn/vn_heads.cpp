#include "qkv/vn/vn_heads.h"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "qkv/core/blas.h"
#include "qkv/core/errors.h"
#include "qkv/core/parallel.h"
#include "qkv/core/shape.h"

namespace qkv::vn {
namespace {

using blas::gemm;

// Sizes of one split/merge: B clouds, C channels on the VN side, N points,
// H heads of d channels.
struct HeadGeometry {
  int64_t B, C, N, H, d;
  int64_t x_axis(int64_t b, int64_t c, int64_t i) const { return ((b * C + c) * 3 + i) * N; }  // x[b, c, i, 0]
  int64_t row(int64_t b, int64_t h, int64_t i) const { return (b * H + h) * N * 3 * d + i * d; }  // rows[b, h, 0, i*d]
};

bool served_here(const at::Tensor& a, const at::Tensor& w) {
  return a.device().is_cpu() && w.device().is_cpu() && a.scalar_type() == w.scalar_type() &&
         (a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble);
}

// Tasks are (cloud, axis) pairs: each owns its slice of the VN-side tensor
// and, for every head, its axis's entries of the rows, so writes never overlap.
// Weight gradients go to per-worker buffers summed at the end.
template <typename Fn>
void for_each_cloud_axis(const HeadGeometry& g, const Fn& fn) {
  blas::OneBlasThread one_blas_thread;  // small GEMMs, the workers use the cores
  const int64_t tasks = g.B * 3;
  const double flops = 2.0 * g.B * 3 * g.N * g.C * g.H * g.d;
  parallel_tasks(tasks, parallel_workers(tasks, flops < 4e6 ? 1 : 0),
                 [&](int64_t worker, int64_t task) { fn(worker, task / 3, task % 3); });
}

// rows_bhi [N, d] (row stride 3d) = X_bi^T [N, C] W_h^T [C, d] for every head.
template <typename T>
void split_kernel(const T* x, const T* w, T* rows, const HeadGeometry& g) {
  for_each_cloud_axis(g, [&](int64_t, int64_t b, int64_t i) {
    for (int64_t h = 0; h < g.H; ++h)
      gemm(true, true, g.N, g.d, g.C, T(1), x + g.x_axis(b, 0, i), 3 * g.N, w + h * g.d * g.C, g.C, T(0),
           rows + g.row(b, h, i), 3 * g.d);
  });
}

// out_bi [C, N] (row stride 3N) = sum_h W_h [C, d] rows_bhi^T [d, N], W_h the
// columns h*d.. of w [C, H*d].
template <typename T>
void merge_kernel(const T* rows, const T* w, T* out, const HeadGeometry& g) {
  for_each_cloud_axis(g, [&](int64_t, int64_t b, int64_t i) {
    for (int64_t h = 0; h < g.H; ++h)
      gemm(false, true, g.C, g.N, g.d, T(1), w + h * g.d, g.H * g.d, rows + g.row(b, h, i), 3 * g.d,
           h == 0 ? T(0) : T(1), out + g.x_axis(b, 0, i), 3 * g.N);
  });
}

// The weight gradient of either direction: dW_h [d, C] (split: w [H*d, C]) or
// its transpose [C, d] (merge: w [C, H*d]) = sum over clouds and axes of
// rows_bhi^T [d, N] X_bi^T [N, C].
template <typename T>
at::Tensor weight_grad(const T* rows, const T* x, const HeadGeometry& g, bool split, const at::TensorOptions& opts) {
  const int64_t size = g.H * g.d * g.C;
  const int64_t workers = parallel_workers(g.B * 3, 0);
  at::Tensor partial = at::zeros({workers, size}, opts);
  T* base = partial.data_ptr<T>();
  for_each_cloud_axis(g, [&](int64_t worker, int64_t b, int64_t i) {
    T* dw = base + worker * size;
    for (int64_t h = 0; h < g.H; ++h) {
      const T* r = rows + g.row(b, h, i);
      const T* xb = x + g.x_axis(b, 0, i);
      if (split)  // [d, C] block at rows h*d of [H*d, C]
        gemm(true, true, g.d, g.C, g.N, T(1), r, 3 * g.d, xb, 3 * g.N, T(1), dw + h * g.d * g.C, g.C);
      else  // [C, d] block at columns h*d of [C, H*d]
        gemm(false, false, g.C, g.d, g.N, T(1), xb, 3 * g.N, r, 3 * g.d, T(1), dw + h * g.d, g.H * g.d);
    }
  });
  return partial.sum(0);
}

// x_bi [C, N] = sum_h W_h^T [C, d] rows_bhi^T [d, N] (split's dX; w [H*d, C]).
template <typename T>
void split_input_grad(const T* grad_rows, const T* w, T* dx, const HeadGeometry& g) {
  for_each_cloud_axis(g, [&](int64_t, int64_t b, int64_t i) {
    for (int64_t h = 0; h < g.H; ++h)
      gemm(true, true, g.C, g.N, g.d, T(1), w + h * g.d * g.C, g.C, grad_rows + g.row(b, h, i), 3 * g.d,
           h == 0 ? T(0) : T(1), dx + g.x_axis(b, 0, i), 3 * g.N);
  });
}

// rows_bhi [N, d] = grad_bi^T [N, C] W_h [C, d] (merge's dRows; w [C, H*d]).
template <typename T>
void merge_rows_grad(const T* grad_out, const T* w, T* drows, const HeadGeometry& g) {
  for_each_cloud_axis(g, [&](int64_t, int64_t b, int64_t i) {
    for (int64_t h = 0; h < g.H; ++h)
      gemm(true, false, g.N, g.d, g.C, T(1), grad_out + g.x_axis(b, 0, i), 3 * g.N, w + h * g.d, g.H * g.d, T(0),
           drows + g.row(b, h, i), 3 * g.d);
  });
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VNHeadsSplitFunction : public torch::autograd::Function<VNHeadsSplitFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w_in, int64_t heads) {
    const at::Tensor x = x_in.contiguous(), w = w_in.contiguous();
    const HeadGeometry g{x.size(0), x.size(1), x.size(3), heads, w.size(0) / heads};
    at::Tensor rows = at::empty({g.B, g.H, g.N, 3 * g.d}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_heads_split", [&] {
      split_kernel<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), rows.data_ptr<scalar_t>(), g);
    });
    ctx->save_for_backward({x, w});
    ctx->saved_data["heads"] = heads;
    return {rows};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const HeadGeometry g{x.size(0), x.size(1), x.size(3), heads, w.size(0) / heads};
    const at::Tensor grad = grads[0].contiguous();
    at::Tensor dx, dw;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_heads_split_backward", [&] {
      if (ctx->needs_input_grad(0)) {
        dx = at::empty_like(x);
        split_input_grad<scalar_t>(grad.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(), g);
      }
      if (ctx->needs_input_grad(1))
        dw = weight_grad<scalar_t>(grad.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), g, true, w.options())
                 .view(w.sizes());
    });
    return {dx, dw, at::Tensor()};
  }
};

struct VNHeadsMergeFunction : public torch::autograd::Function<VNHeadsMergeFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& rows_in, const at::Tensor& w_in) {
    const at::Tensor rows = rows_in.contiguous(), w = w_in.contiguous();
    const int64_t heads = rows.size(1), d = rows.size(3) / 3;
    const HeadGeometry g{rows.size(0), w.size(0), rows.size(2), heads, d};
    at::Tensor out = at::empty({g.B, g.C, 3, g.N}, rows.options());
    AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "vn_heads_merge", [&] {
      merge_kernel<scalar_t>(rows.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), g);
    });
    ctx->save_for_backward({rows, w});
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &rows = saved[0], &w = saved[1];
    const HeadGeometry g{rows.size(0), w.size(0), rows.size(2), rows.size(1), rows.size(3) / 3};
    const at::Tensor grad = grads[0].contiguous();
    at::Tensor drows, dw;
    AT_DISPATCH_FLOATING_TYPES(rows.scalar_type(), "vn_heads_merge_backward", [&] {
      if (ctx->needs_input_grad(0)) {
        drows = at::empty_like(rows);
        merge_rows_grad<scalar_t>(grad.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), drows.data_ptr<scalar_t>(), g);
      }
      if (ctx->needs_input_grad(1))
        dw = weight_grad<scalar_t>(rows.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), g, false, w.options())
                 .view(w.sizes());
    });
    return {drows, dw};
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
  return VNHeadsSplitFunction::apply(x, weight, heads)[0];
}

at::Tensor vn_heads_split_composed(const at::Tensor& x, const at::Tensor& weight, int64_t heads) {
  const int64_t b = x.size(0), n = x.size(3), d = weight.size(0) / heads;
  // [B, H*d, 3, N] -> [B, H, N, 3, d] -> rows of 3d
  return vn_linear(x, weight).view({b, heads, d, 3, n}).permute({0, 1, 4, 3, 2}).reshape({b, heads, n, 3 * d});
}

at::Tensor vn_heads_merge(const at::Tensor& rows, const at::Tensor& weight) {
  if (rows.dim() != 4 || rows.size(3) % 3 != 0 || rows.size(3) == 0 || weight.dim() != 2 ||
      weight.size(1) != rows.size(1) * rows.size(3) / 3)
    throw UsageError("vn_heads_merge: expected rows [B, H, N, 3d] and weight [C, H*d], got " + shape_of(rows) +
                     " and " + shape_of(weight));
  if (!served_here(rows, weight) || rows.numel() == 0 || weight.numel() == 0)
    return vn_heads_merge_composed(rows, weight);
  return VNHeadsMergeFunction::apply(rows, weight)[0];
}

at::Tensor vn_heads_merge_composed(const at::Tensor& rows, const at::Tensor& weight) {
  const int64_t b = rows.size(0), heads = rows.size(1), n = rows.size(2), d = rows.size(3) / 3;
  // [B, H, N, 3, d] -> [B, H, d, 3, N] -> [B, H*d, 3, N]
  return vn_linear(rows.view({b, heads, n, 3, d}).permute({0, 1, 4, 3, 2}).reshape({b, heads * d, 3, n}), weight);
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
