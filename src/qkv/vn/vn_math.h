#pragma once
// The per-vector math of the fused VN ops, written once for the CPU loops
// (vn_fused.cpp) and the CUDA kernels (vn/vn_fused_cuda.cu), so that the two
// devices compute the same formulas and the CPU's tests (gradcheck, equality
// with the composed versions) check the GPU's math too. A VN feature stores
// the three coordinates of a vector m apart ([..., 3, M] rows): load() and
// store() take the row and the vector's index.
//
// Formulas (x a vector, d a direction, n = sqrt(|x|^2 + eps2)):
//   leaky ReLU   f = <x,d> / (|d|^2 + e); y = x - a f d where f <= 0, else x
//                (a = 1 - negative slope; the gradient at f = 0 is the
//                composed clamp_max's, which passes it)
//   rescale      y = x n'/n with n' = k1 n + k0 (the batch norm of the norms
//                as an affine map per channel, vn_ops.h)
//   edge         the edge convolution's rescale, then leaky ReLU (edge_conv.h)
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define QKV_VN_MATH __host__ __device__ __forceinline__
#else
#define QKV_VN_MATH inline __attribute__((always_inline))
#endif

namespace qkv::vn::math {

template <typename T>
struct Vec3 {
  T x, y, z;
};

template <typename T>
QKV_VN_MATH Vec3<T> operator+(Vec3<T> u, Vec3<T> v) {
  return {u.x + v.x, u.y + v.y, u.z + v.z};
}

template <typename T>
QKV_VN_MATH Vec3<T> operator-(Vec3<T> u, Vec3<T> v) {
  return {u.x - v.x, u.y - v.y, u.z - v.z};
}

template <typename T>
QKV_VN_MATH Vec3<T> operator*(T s, Vec3<T> v) {
  return {s * v.x, s * v.y, s * v.z};
}

template <typename T>
QKV_VN_MATH T dot(Vec3<T> u, Vec3<T> v) {
  return u.x * v.x + u.y * v.y + u.z * v.z;
}

template <typename T>
QKV_VN_MATH T square_root(T v) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(v);
#else
  return std::sqrt(v);
#endif
}

// sqrt(|v|^2 + eps2): finite, with a finite gradient, at 0.
template <typename T>
QKV_VN_MATH T norm(Vec3<T> v, T eps2) {
  return square_root(dot(v, v) + eps2);
}

template <typename T>
QKV_VN_MATH Vec3<T> load(const T* row, int64_t m, int64_t i) {
  return {row[i], row[m + i], row[2 * m + i]};
}

template <typename T>
QKV_VN_MATH void store(T* row, int64_t m, int64_t i, Vec3<T> v) {
  row[i] = v.x, row[m + i] = v.y, row[2 * m + i] = v.z;
}

// row[i] += v (one thread owns vector i).
template <typename T>
QKV_VN_MATH void add_to(T* row, int64_t m, int64_t i, Vec3<T> v) {
  row[i] += v.x, row[m + i] += v.y, row[2 * m + i] += v.z;
}

// ---- leaky ReLU ----------------------------------------------------------------

template <typename T>
QKV_VN_MATH Vec3<T> leaky_relu(Vec3<T> x, Vec3<T> d, T a, T e) {
  const T f = dot(x, d) / (dot(d, d) + e);
  const T w = f <= 0 ? a : T(0);  // a select, not a branch: the CPU's loops vectorise
  return x - (w * f) * d;
}

template <typename T>
struct LeakyReLUGradient {
  Vec3<T> x, d;
};

// The gradients of x and d for the gradient g of y. Where f <= 0,
// y = x - a f d: dL/dx = g - a h d and dL/dd = -a (f g + h (x - 2 f d)) with
// h = <g,d> / (|d|^2 + e); elsewhere g and 0 (w = 0 below, no branch).
template <typename T>
QKV_VN_MATH LeakyReLUGradient<T> leaky_relu_backward(Vec3<T> x, Vec3<T> d, Vec3<T> g, T a, T e) {
  const T inv_q = T(1) / (dot(d, d) + e);
  const T f = dot(x, d) * inv_q;
  const T w = f <= 0 ? a : T(0);
  const T h = dot(g, d) * inv_q;
  return {g - (w * h) * d, -w * (f * g + h * (x - (2 * f) * d))};
}

// ---- the batch norm of the norms, per channel ----------------------------------

// One channel's constants: n' = k1 n + k0 with statistics mu and is (invstd);
// in backward the batch means of gm and gm * nhat (zero in eval, where the
// statistics are constants); the leaky ReLU's a and e where one follows.
template <typename T>
struct ChannelConstants {
  T k1, k0, mu, is, mean_gm, mean_gm_nhat, a, e, eps2;
};

// Channel ci's constants from [C] doubles: scale (k1), shift (k0), mean,
// invstd; `global` [2, C] the batch's sums of gm and gm * nhat over `count`
// vectors (training backward), or null; eps the norms' (kVNEps), which is
// also the leaky ReLU's e.
template <typename T>
QKV_VN_MATH ChannelConstants<T> channel_constants(const double* scale, const double* shift, const double* mean,
                                                  const double* invstd, const double* global, double count, int64_t c,
                                                  int64_t ci, double slope, double eps) {
  ChannelConstants<T> r{};
  r.k1 = static_cast<T>(scale[ci]);
  r.k0 = static_cast<T>(shift[ci]);
  r.mu = static_cast<T>(mean[ci]);
  r.is = static_cast<T>(invstd[ci]);
  r.mean_gm = global ? static_cast<T>(global[ci] / count) : T(0);
  r.mean_gm_nhat = global ? static_cast<T>(global[c + ci] / count) : T(0);
  r.a = static_cast<T>(1.0 - slope);
  r.e = static_cast<T>(eps);
  r.eps2 = static_cast<T>(eps * eps);
  return r;
}

template <typename T>
QKV_VN_MATH Vec3<T> rescale(Vec3<T> x, const ChannelConstants<T>& c) {
  const T n = norm(x, c.eps2);
  return ((c.k1 * n + c.k0) / n) * x;
}

// What backward needs of a vector's rescale, computed once per vector (the
// CPU's SIMD loops recompute nothing): n, 1/n and the factor r = n'/n.
template <typename T>
struct RescaleFactors {
  T n, inv_n, r;
};

template <typename T>
QKV_VN_MATH RescaleFactors<T> rescale_factors(Vec3<T> x, const ChannelConstants<T>& c) {
  const T n = norm(x, c.eps2);
  const T inv_n = T(1) / n;
  return {n, inv_n, (c.k1 * n + c.k0) * inv_n};
}

// Batch norm's backward terms of one vector for the gradient g of its
// output: gm = dL/dn' = <g, x>/n and nhat = (n - mu) is, whose channel sums
// give the bias and weight gradients.
template <typename T>
struct RescaleTerms {
  T gm, nhat;
};

template <typename T>
QKV_VN_MATH RescaleTerms<T> rescale_terms(Vec3<T> x, Vec3<T> g, RescaleFactors<T> f, const ChannelConstants<T>& c) {
  return {dot(g, x) * f.inv_n, (f.n - c.mu) * c.is};
}

// dL/dx of y = x n'/n: through n', dL/dn = k1 (gm - mean(gm) - nhat
// mean(gm nhat)) in training (k1 gm in eval), and through the 1/n,
// -gm n'/n.
template <typename T>
QKV_VN_MATH Vec3<T> rescale_backward(Vec3<T> x, Vec3<T> g, RescaleFactors<T> f, const ChannelConstants<T>& c) {
  const auto terms = rescale_terms(x, g, f, c);
  const T t = (c.k1 * (terms.gm - c.mean_gm - terms.nhat * c.mean_gm_nhat) - terms.gm * f.r) * f.inv_n;
  return f.r * g + t * x;
}

// ---- one edge of the edge convolution: rescale p, then leaky ReLU by d ---------
// Whole per-edge functions: the CPU calls them from `omp simd` loops, where a
// named aggregate passed on (rather than only read) would be kept in memory
// per lane and stop the loop from vectorising.

template <typename T>
QKV_VN_MATH Vec3<T> edge_forward(Vec3<T> p, Vec3<T> d, const ChannelConstants<T>& c) {
  return leaky_relu(rescale(p, c), d, c.a, c.e);
}

// Backward, pass 1, for the gradient g of the edge's output: the direction's
// gradient and the rescale's backward terms (summed per channel).
template <typename T>
struct EdgeDirectionGradient {
  Vec3<T> d;
  T gm, nhat;
};

template <typename T>
QKV_VN_MATH EdgeDirectionGradient<T> edge_backward_direction(Vec3<T> p, Vec3<T> d, Vec3<T> g,
                                                             const ChannelConstants<T>& c) {
  const auto f = rescale_factors(p, c);
  const auto grad = leaky_relu_backward(f.r * p, d, g, c.a, c.e);
  const auto terms = rescale_terms(p, grad.x, f, c);
  return {grad.d, terms.gm, terms.nhat};
}

// Backward, pass 2: the gradient of p, with the batch means of the terms in c.
template <typename T>
QKV_VN_MATH Vec3<T> edge_backward_feature(Vec3<T> p, Vec3<T> d, Vec3<T> g, const ChannelConstants<T>& c) {
  const auto f = rescale_factors(p, c);
  return rescale_backward(p, leaky_relu_backward(f.r * p, d, g, c.a, c.e).x, f, c);
}

// ---- coordinates in a per-point frame --------------------------------------------
// y_j = sum_i x_i F[j, i]; the frame's rows are F[j] = (F[j, 0], F[j, 1], F[j, 2]).

template <typename T>
struct Frame {
  Vec3<T> row[3];
};

// Point i's frame from its [3(j), 3(i), m] block.
template <typename T>
QKV_VN_MATH Frame<T> load_frame(const T* block, int64_t m, int64_t i) {
  return {{load(block, m, i), load(block + 3 * m, m, i), load(block + 6 * m, m, i)}};
}

template <typename T>
QKV_VN_MATH Vec3<T> frame_coordinates(Vec3<T> x, const Frame<T>& f) {
  return {dot(x, f.row[0]), dot(x, f.row[1]), dot(x, f.row[2])};
}

// dL/dx_i = sum_j g_j F[j, i].
template <typename T>
QKV_VN_MATH Vec3<T> frame_coordinates_backward(Vec3<T> g, const Frame<T>& f) {
  return g.x * f.row[0] + g.y * f.row[1] + g.z * f.row[2];
}

// The frame's gradient: dF[j, i] += g_j x_i, into point i's [3(j), 3(i), m] block.
template <typename T>
QKV_VN_MATH void add_outer(T* block, int64_t m, int64_t i, Vec3<T> g, Vec3<T> x) {
  add_to(block, m, i, g.x * x);
  add_to(block + 3 * m, m, i, g.y * x);
  add_to(block + 6 * m, m, i, g.z * x);
}

}  // namespace qkv::vn::math
