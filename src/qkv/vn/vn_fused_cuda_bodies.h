#pragma once
// The per-thread work of qkv's CUDA kernels for the fused VN ops
// (vn_fused_cuda.cu), as functors that compile for the host and the device. A
// body's operator()(index) is one thread's work at one index of a
// grid-stride loop over `total` indices; a channel sum's item(ci, j, s0, s1)
// adds one vector's (or point's) terms of channel ci to s0 and s1, j running
// over the batch's B * M vectors (points) of that channel. vn_fused_cuda.cu
// launches them; tests/vn/vn_fused_cuda_bodies_test.cpp runs the same functors
// on the CPU over every index and checks them against the CPU's fused ops, so
// the kernels' indexing is tested on machines without a GPU.
//
// Layouts (contiguous): VN features [B, C, 3, M] (the vector (b, c, i) has
// its coordinates at row (b C + c) 3 M + {0, M, 2M} + i), directions
// [B, C or 1, 3, M], frames [B, 3, 3, M], edge features [B, C, 3, N] with
// idx [B, N, k]. The math is vn/vn_math.h's.
#include <cstdint>

#include "qkv/vn/vn_math.h"

namespace qkv::vn::gpu::bodies {

using vn::math::ChannelConstants;
using vn::math::load;
using vn::math::store;
using vn::math::Vec3;

// row[i] += v where other threads may add to the same vector (an edge's
// neighbour): atomically on the device.
template <typename T>
QKV_VN_MATH void scatter_add(T* row, int64_t m, int64_t i, Vec3<T> v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(row + i, v.x);
  atomicAdd(row + m + i, v.y);
  atomicAdd(row + 2 * m + i, v.z);
#else
  vn::math::add_to(row, m, i, v);
#endif
}

// The batch norm of the norms per channel ([C] doubles each; global [2, C]
// or null) and the constants around it, on the device of the loop that reads
// them (vn_fused.cpp's NormAffine::pointers).
struct ChannelPointers {
  const double *scale, *shift, *mean, *invstd, *global;
  int64_t c;
  double count, slope, eps;

  template <typename T>
  QKV_VN_MATH ChannelConstants<T> at(int64_t ci) const {
    return vn::math::channel_constants<T>(scale, shift, mean, invstd, global, count, c, ci, slope, eps);
  }
};

// ---- leaky ReLU: total B C M; backward total B Cd M ------------------------------

template <typename T>
struct LeakyReLU {
  const T *x, *d;
  T* y;
  int64_t c, cd, m;
  T a, e;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bc = index / m, i = index % m;
    const int64_t d_row = ((bc / c) * cd + (cd == 1 ? 0 : bc % c)) * 3 * m;
    store(y + bc * 3 * m, m, i, vn::math::leaky_relu(load(x + bc * 3 * m, m, i), load(d + d_row, m, i), a, e));
  }
};

// One thread per direction vector: it alone writes that vector's gradient,
// the sum over the channels that share it (in channel order, as the CPU).
template <typename T>
struct LeakyReLUBackward {
  const T *x, *d, *g;
  T *gx, *gd;
  int64_t c, cd, m;
  T a, e;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bd = index / m, i = index % m, bi = bd / cd;
    const int64_t c0 = cd == 1 ? 0 : bd % cd, c1 = cd == 1 ? c : c0 + 1;
    const auto direction = load(d + bd * 3 * m, m, i);
    Vec3<T> sum{0, 0, 0};
    for (int64_t ci = c0; ci < c1; ++ci) {
      const int64_t row = (bi * c + ci) * 3 * m;
      const auto grad = vn::math::leaky_relu_backward(load(x + row, m, i), direction, load(g + row, m, i), a, e);
      store(gx + row, m, i, grad.x);
      sum = sum + grad.d;
    }
    store(gd + bd * 3 * m, m, i, sum);
  }
};

// ---- coordinates in a per-point frame: total B C M; backward total B M -----------

template <typename T>
struct FrameCoordinates {
  const T *x, *frame;
  T* y;
  int64_t c, m;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bc = index / m, i = index % m;
    const auto f = vn::math::load_frame(frame + (bc / c) * 9 * m, m, i);
    store(y + bc * 3 * m, m, i, vn::math::frame_coordinates(load(x + bc * 3 * m, m, i), f));
  }
};

// One thread per point: it alone writes the point's frame gradient (gf zeroed).
template <typename T>
struct FrameCoordinatesBackward {
  const T *x, *frame, *g;
  T *gx, *gf;
  int64_t c, m;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bi = index / m, i = index % m;
    const auto f = vn::math::load_frame(frame + bi * 9 * m, m, i);
    for (int64_t ci = 0; ci < c; ++ci) {
      const int64_t row = (bi * c + ci) * 3 * m;
      const auto gv = load(g + row, m, i);
      store(gx + row, m, i, vn::math::frame_coordinates_backward(gv, f));
      vn::math::add_outer(gf + bi * 9 * m, m, i, gv, load(x + row, m, i));
    }
  }
};

// ---- batch norm of the norms: bodies total B C M, sums over B M per channel ------

template <typename T>
struct NormSums {
  const T* x;
  int64_t c, m;
  T eps2;
  QKV_VN_MATH void operator()(int64_t ci, int64_t j, double& s0, double& s1) const {
    const int64_t bi = j / m, i = j % m;
    const double n = vn::math::norm(load(x + (bi * c + ci) * 3 * m, m, i), eps2);
    s0 += n, s1 += n * n;
  }
};

template <typename T>
struct Rescale {
  const T* x;
  T* y;
  ChannelPointers p;
  int64_t c, m;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bc = index / m, i = index % m;
    store(y + bc * 3 * m, m, i, vn::math::rescale(load(x + bc * 3 * m, m, i), p.at<T>(bc % c)));
  }
};

template <typename T>
struct RescaleBackwardSums {
  const T *x, *g;
  ChannelPointers p;
  int64_t c, m;
  QKV_VN_MATH void operator()(int64_t ci, int64_t j, double& s0, double& s1) const {
    const int64_t bi = j / m, i = j % m, row = (bi * c + ci) * 3 * m;
    const auto constants = p.at<T>(ci);
    const auto xv = load(x + row, m, i);
    const auto terms =
        vn::math::rescale_terms(xv, load(g + row, m, i), vn::math::rescale_factors(xv, constants), constants);
    s0 += terms.gm, s1 += terms.gm * terms.nhat;
  }
};

template <typename T>
struct RescaleBackward {
  const T *x, *g;
  T* gx;
  ChannelPointers p;
  int64_t c, m;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bc = index / m, i = index % m, row = bc * 3 * m;
    const auto constants = p.at<T>(bc % c);
    const auto xv = load(x + row, m, i);
    store(gx + row, m, i,
          vn::math::rescale_backward(xv, load(g + row, m, i), vn::math::rescale_factors(xv, constants), constants));
  }
};

// ---- edge convolution: bodies total B C N, sums over B N points per channel ------
// Per edge of point i: p = a[q] + ac[i], d = dd[q] + dc[i] with q =
// nb[(b N + i) k + e]; the gradient arriving at each edge is the point's / k.

// One point of one (batch, channel): its rows, its neighbours, and the
// centre's feature and direction that every edge of the point adds.
template <typename T>
struct EdgePoint {
  int64_t row;
  const int64_t* neighbours;
  Vec3<T> centre, centre_direction;
};

template <typename T>
struct EdgeRows {
  const T *a, *ac, *dd, *dc;  // dd and dc may be null where no direction is read
  const int64_t* nb;
  int64_t c, n, k;

  QKV_VN_MATH EdgePoint<T> point(int64_t bi, int64_t ci, int64_t i) const {
    const int64_t row = (bi * c + ci) * 3 * n;
    return {row, nb + (bi * n + i) * k, load(ac + row, n, i), dc ? load(dc + row, n, i) : Vec3<T>{0, 0, 0}};
  }
  // Edge e's feature p and direction d.
  QKV_VN_MATH Vec3<T> feature(const EdgePoint<T>& at, int64_t e) const {
    return load(a + at.row, n, at.neighbours[e]) + at.centre;
  }
  QKV_VN_MATH Vec3<T> direction(const EdgePoint<T>& at, int64_t e) const {
    return load(dd + at.row, n, at.neighbours[e]) + at.centre_direction;
  }
};

template <typename T>
struct EdgeNormSums {
  EdgeRows<T> r;
  T eps2;
  QKV_VN_MATH void operator()(int64_t ci, int64_t j, double& s0, double& s1) const {
    const auto at = r.point(j / r.n, ci, j % r.n);
    for (int64_t e = 0; e < r.k; ++e) {
      const double n = vn::math::norm(r.feature(at, e), eps2);
      s0 += n, s1 += n * n;
    }
  }
};

template <typename T>
struct EdgeForward {
  EdgeRows<T> r;
  T* out;
  ChannelPointers p;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bc = index / r.n, i = index % r.n;
    const auto at = r.point(bc / r.c, bc % r.c, i);
    const auto constants = p.at<T>(bc % r.c);
    Vec3<T> sum{0, 0, 0};
    for (int64_t e = 0; e < r.k; ++e)
      sum = sum + vn::math::edge_forward(r.feature(at, e), r.direction(at, e), constants);
    store(out + at.row, r.n, i, (T(1) / static_cast<T>(r.k)) * sum);
  }
};

// Backward pass 1, a channel sum whose items also write: the direction
// gradients of the point's edges go to their neighbours (scatter_add) and,
// summed, to the point itself (this item's alone; grad_dd, grad_dc zeroed).
template <typename T>
struct EdgeBackwardDirection {
  EdgeRows<T> r;
  const T* g;
  T *grad_dd, *grad_dc;
  ChannelPointers p;
  QKV_VN_MATH void operator()(int64_t ci, int64_t j, double& s0, double& s1) const {
    const int64_t i = j % r.n;
    const auto at = r.point(j / r.n, ci, i);
    const auto constants = p.at<T>(ci);
    const auto grad_edge = (T(1) / static_cast<T>(r.k)) * load(g + at.row, r.n, i);
    Vec3<T> to_centre{0, 0, 0};
    for (int64_t e = 0; e < r.k; ++e) {
      const auto edge = vn::math::edge_backward_direction(r.feature(at, e), r.direction(at, e), grad_edge, constants);
      scatter_add(grad_dd + at.row, r.n, at.neighbours[e], edge.d);
      to_centre = to_centre + edge.d;
      s0 += edge.gm, s1 += edge.gm * edge.nhat;
    }
    vn::math::add_to(grad_dc + at.row, r.n, i, to_centre);
  }
};

// Backward pass 2: the features' gradients, to the neighbours (scatter_add)
// and the point itself (grad_a, grad_ac zeroed; p.global holds pass 1's sums
// in training).
template <typename T>
struct EdgeBackwardFeature {
  EdgeRows<T> r;
  const T* g;
  T *grad_a, *grad_ac;
  ChannelPointers p;
  QKV_VN_MATH void operator()(int64_t index) const {
    const int64_t bc = index / r.n, i = index % r.n;
    const auto at = r.point(bc / r.c, bc % r.c, i);
    const auto constants = p.at<T>(bc % r.c);
    const auto grad_edge = (T(1) / static_cast<T>(r.k)) * load(g + at.row, r.n, i);
    Vec3<T> to_centre{0, 0, 0};
    for (int64_t e = 0; e < r.k; ++e) {
      const auto gp = vn::math::edge_backward_feature(r.feature(at, e), r.direction(at, e), grad_edge, constants);
      scatter_add(grad_a + at.row, r.n, at.neighbours[e], gp);
      to_centre = to_centre + gp;
    }
    vn::math::add_to(grad_ac + at.row, r.n, i, to_centre);
  }
};

}  // namespace qkv::vn::gpu::bodies
