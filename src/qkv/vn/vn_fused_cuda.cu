// CUDA kernels of the fused VN ops (vn_fused_cuda.h). Each thread's work is a
// functor of vn_fused_cuda_bodies.h (whose math is vn/vn_math.h's, as on the
// CPU): a body per index of a grid-stride loop, or an item of a channel sum,
// the two kernels of vn_fused_cuda_kernels.h.
// Channel sums: double per thread, a block reduction per (channel, slice of
// the batch), then ATen's sum over the slices, so they do not depend on
// scheduling. The edge convolution's backward scatters each edge's gradient
// to its neighbour with atomicAdd, whose order is not fixed: those float sums
// may differ in their last bits from run to run, as ATen's index_add on a GPU.
#include "qkv/vn/vn_fused_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <initializer_list>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/vn/vn_fused_cuda_bodies.h"
#include "qkv/vn/vn_fused_cuda_kernels.h"

namespace qkv::vn::gpu {
namespace {

using namespace bodies;

cudaStream_t stream() { return at::cuda::getCurrentCUDAStream(); }

void require_cuda(std::initializer_list<const at::Tensor*> tensors, const char* fn) {
  for (const auto* t : tensors)
    if (!t->is_cuda() || !t->is_contiguous())
      throw UsageError(std::string(fn) + ": expected contiguous tensors on a CUDA device");
}

// body(index) for every index below total.
template <typename Body>
void for_each_index(const Body& body, int64_t total) {
  if (total <= 0) return;
  for_each_index_kernel<<<static_cast<unsigned>(for_each_index_blocks(total)), kThreads, 0, stream()>>>(body, total);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// [2, C] float64: the sums of item over `items` per channel.
template <typename Item>
at::Tensor channel_sums(const Item& item, int64_t c, int64_t items, const at::Tensor& like) {
  const int64_t slices = channel_sum_slices(c, items);
  auto partial = at::zeros({slices, 2, c}, like.options().dtype(at::kDouble));
  if (c > 0 && items > 0) {
    channel_sums_kernel<<<static_cast<unsigned>(c * slices), kThreads, 0, stream()>>>(item, c, items, slices,
                                                                                      partial.data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return partial.sum(0);
}

template <typename T>
EdgeRows<T> edge_rows(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd, const at::Tensor& dc,
                      const at::Tensor& idx) {
  return {a.data_ptr<T>(),
          ac.data_ptr<T>(),
          dd.defined() ? dd.data_ptr<T>() : nullptr,
          dc.defined() ? dc.data_ptr<T>() : nullptr,
          idx.data_ptr<int64_t>(),
          a.size(1),
          a.size(3),
          idx.size(2)};
}

// [B, C, 3, M] -> (B, C, M).
struct VnSizes {
  int64_t b, c, m;
};

VnSizes sizes_of(const at::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1);
  return {b, c, b * c == 0 ? 0 : x.numel() / (b * c * 3)};
}

}  // namespace

at::Tensor vn_leaky_relu(const at::Tensor& x, const at::Tensor& d, double slope, double eps) {
  require_cuda({&x, &d}, "vn_leaky_relu");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  auto y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_leaky_relu_cuda", [&] {
    for_each_index(LeakyReLU<scalar_t>{x.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), s.c,
                                       d.size(1), s.m, static_cast<scalar_t>(1.0 - slope), static_cast<scalar_t>(eps)},
                   s.b * s.c * s.m);
  });
  return y;
}

std::pair<at::Tensor, at::Tensor> vn_leaky_relu_backward(const at::Tensor& x, const at::Tensor& d, const at::Tensor& g,
                                                         double slope, double eps) {
  require_cuda({&x, &d, &g}, "vn_leaky_relu_backward");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  auto gx = at::empty_like(x), gd = at::empty_like(d);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_leaky_relu_backward_cuda", [&] {
    for_each_index(LeakyReLUBackward<scalar_t>{x.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                                               gx.data_ptr<scalar_t>(), gd.data_ptr<scalar_t>(), s.c, d.size(1), s.m,
                                               static_cast<scalar_t>(1.0 - slope), static_cast<scalar_t>(eps)},
                   s.b * d.size(1) * s.m);
  });
  return {gx, gd};
}

at::Tensor vn_frame_coordinates(const at::Tensor& x, const at::Tensor& frame) {
  require_cuda({&x, &frame}, "vn_frame_coordinates");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  auto y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_frame_coordinates_cuda", [&] {
    for_each_index(FrameCoordinates<scalar_t>{x.data_ptr<scalar_t>(), frame.data_ptr<scalar_t>(),
                                              y.data_ptr<scalar_t>(), s.c, s.m},
                   s.b * s.c * s.m);
  });
  return y;
}

std::pair<at::Tensor, at::Tensor> vn_frame_coordinates_backward(const at::Tensor& x, const at::Tensor& frame,
                                                                const at::Tensor& g) {
  require_cuda({&x, &frame, &g}, "vn_frame_coordinates_backward");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  auto gx = at::empty_like(x), gf = at::zeros_like(frame);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_frame_coordinates_backward_cuda", [&] {
    for_each_index(
        FrameCoordinatesBackward<scalar_t>{x.data_ptr<scalar_t>(), frame.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                                           gx.data_ptr<scalar_t>(), gf.data_ptr<scalar_t>(), s.c, s.m},
        s.c == 0 ? 0 : s.b * s.m);
  });
  return {gx, gf};
}

at::Tensor vn_norm_sums(const at::Tensor& x, double eps) {
  require_cuda({&x}, "vn_norm_sums");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  at::Tensor sums;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_norm_sums_cuda", [&] {
    sums = channel_sums(NormSums<scalar_t>{x.data_ptr<scalar_t>(), s.c, s.m, static_cast<scalar_t>(eps * eps)}, s.c,
                        s.b * s.m, x);
  });
  return sums;
}

at::Tensor vn_rescale(const at::Tensor& x, const ChannelPointers& norm) {
  require_cuda({&x}, "vn_rescale");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  auto y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_rescale_cuda", [&] {
    for_each_index(Rescale<scalar_t>{x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), norm, s.c, s.m}, s.b * s.c * s.m);
  });
  return y;
}

at::Tensor vn_rescale_backward_sums(const at::Tensor& x, const at::Tensor& g, const ChannelPointers& norm) {
  require_cuda({&x, &g}, "vn_rescale_backward_sums");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  at::Tensor sums;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_rescale_backward_sums_cuda", [&] {
    sums = channel_sums(RescaleBackwardSums<scalar_t>{x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), norm, s.c, s.m},
                        s.c, s.b * s.m, x);
  });
  return sums;
}

at::Tensor vn_rescale_backward(const at::Tensor& x, const at::Tensor& g, const ChannelPointers& norm) {
  require_cuda({&x, &g}, "vn_rescale_backward");
  const c10::cuda::CUDAGuard guard(x.device());
  const auto s = sizes_of(x);
  auto gx = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "vn_rescale_backward_cuda", [&] {
    for_each_index(RescaleBackward<scalar_t>{x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(),
                                             norm, s.c, s.m},
                   s.b * s.c * s.m);
  });
  return gx;
}

at::Tensor edge_norm_sums(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& idx, double eps) {
  require_cuda({&a, &ac, &idx}, "edge_norm_sums");
  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor sums;
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_norm_sums_cuda", [&] {
    const auto rows = edge_rows<scalar_t>(a, ac, at::Tensor(), at::Tensor(), idx);
    sums = channel_sums(EdgeNormSums<scalar_t>{rows, static_cast<scalar_t>(eps * eps)}, rows.c, a.size(0) * rows.n, a);
  });
  return sums;
}

at::Tensor edge_conv_mean(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd, const at::Tensor& dc,
                          const at::Tensor& idx, const ChannelPointers& norm) {
  require_cuda({&a, &ac, &dd, &dc, &idx}, "edge_conv_mean");
  const c10::cuda::CUDAGuard guard(a.device());
  auto out = at::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean_cuda", [&] {
    for_each_index(EdgeForward<scalar_t>{edge_rows<scalar_t>(a, ac, dd, dc, idx), out.data_ptr<scalar_t>(), norm},
                   a.size(0) * a.size(1) * a.size(3));
  });
  return out;
}

at::Tensor edge_conv_mean_backward_direction(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd,
                                             const at::Tensor& dc, const at::Tensor& idx, const at::Tensor& g,
                                             const ChannelPointers& norm, at::Tensor& grad_dd, at::Tensor& grad_dc) {
  require_cuda({&a, &ac, &dd, &dc, &idx, &g, &grad_dd, &grad_dc}, "edge_conv_mean_backward_direction");
  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor sums;
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean_backward_direction_cuda", [&] {
    const auto rows = edge_rows<scalar_t>(a, ac, dd, dc, idx);
    sums = channel_sums(EdgeBackwardDirection<scalar_t>{rows, g.data_ptr<scalar_t>(), grad_dd.data_ptr<scalar_t>(),
                                                        grad_dc.data_ptr<scalar_t>(), norm},
                        rows.c, a.size(0) * rows.n, a);
  });
  return sums;
}

void edge_conv_mean_backward_feature(const at::Tensor& a, const at::Tensor& ac, const at::Tensor& dd,
                                     const at::Tensor& dc, const at::Tensor& idx, const at::Tensor& g,
                                     const ChannelPointers& norm, at::Tensor& grad_a, at::Tensor& grad_ac) {
  require_cuda({&a, &ac, &dd, &dc, &idx, &g, &grad_a, &grad_ac}, "edge_conv_mean_backward_feature");
  const c10::cuda::CUDAGuard guard(a.device());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "edge_conv_mean_backward_feature_cuda", [&] {
    for_each_index(EdgeBackwardFeature<scalar_t>{edge_rows<scalar_t>(a, ac, dd, dc, idx), g.data_ptr<scalar_t>(),
                                                 grad_a.data_ptr<scalar_t>(), grad_ac.data_ptr<scalar_t>(), norm},
                   a.size(0) * a.size(1) * a.size(3));
  });
}

}  // namespace qkv::vn::gpu
