#include "qkv/vn/vn_ops.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/cuda/point_kernels.h"
#include "qkv/layers/function_transforms.h"
#include "qkv/layers/second_order.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/spatial/kd_tree.h"
#include "qkv/vn/vn_heads.h"

namespace qkv::vn {

void require_vn(const at::Tensor& x, const char* what) {
  if (x.dim() < 3 || x.size(2) != 3)
    throw UsageError(std::string(what) + ": expected a VN feature [B, C, 3, ...], got " + shape_of(x));
  // An integer feature had gone through the norms as float32 without a word.
  if (!x.is_floating_point())
    throw UsageError(std::string(what) + ": a VN feature is floating point, got " + c10::toString(x.scalar_type()));
}

at::Tensor vn_linear(const at::Tensor& x, const at::Tensor& weight) {
  require_vn(x, "vn_linear");
  if (weight.dim() != 2 || weight.size(1) != x.size(1))
    throw UsageError("vn_linear: weight " + shape_of(weight) + " does not take " + std::to_string(x.size(1)) +
                     " input channels");
  auto sizes = x.sizes().vec();
  sizes[1] = weight.size(0);
  // [B, 3*rest, C_in] @ [C_in, C_out]: one GEMM over all points and axes. (The
  // same product as W @ x, which LibTorch runs as a batched GEMM that is up to
  // 75x slower for few input channels.)
  return torch::matmul(x.flatten(2).transpose(1, 2), weight.t()).transpose(1, 2).reshape(sizes);
}

at::Tensor vn_dot(const at::Tensor& a, const at::Tensor& b) { return (a * b).sum(2, /*keepdim=*/true); }

at::Tensor vn_leaky_relu_composed(const at::Tensor& x, const at::Tensor& direction, double negative_slope, double eps) {
  // x where <x,d> >= 0, else x minus its component along d, blended with x by
  // the slope: x - (1 - slope) * min(0, <x,d> / |d|^2) d. One broadcast
  // product on the full tensor instead of a mask blend (~5x faster).
  const auto coef = (vn_dot(x, direction) / (vn_dot(direction, direction) + eps)).clamp_max(0.0);
  return x - (1.0 - negative_slope) * coef * direction;
}

at::Tensor vn_norm(const at::Tensor& x, double eps) {
  require_vn(x, "vn_norm");
  return (vn_dot(x, x).squeeze(2) + eps * eps).sqrt();
}

at::Tensor vn_rescale(const at::Tensor& x, const at::Tensor& norm, const at::Tensor& new_norm) {
  return x * (new_norm / norm).unsqueeze(2);
}

at::Tensor vn_batch_norm_composed(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                  const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                                  double momentum, double eps, RankSum* group) {
  const auto norm = vn_norm(x);  // [B, C, ...]: invariant, so normalising it is too
  return vn_rescale(x, norm,
                    layers::batch_norm(norm, weight, bias, running_mean, running_var, training, momentum, eps, group));
}

at::Tensor vn_mean_pool(const at::Tensor& x) { return x.mean(-1); }

namespace {

// Queries per block on other devices: distances of a block to all N points,
// Q x N values (8 MiB at N = 8192 in float32), never B x N x N.
constexpr int64_t kKnnQueryBlock = 256;
// On the CPU a block holds up to this many distances (16 MiB in float32): up
// to four clouds of 1,024 points are one round of GEMMs and one parallel
// selection. Each switch between OpenBLAS's GEMM threads and OpenMP's
// selection threads costs a hand-over on a busy core (bench_vnt_step knn).
constexpr int64_t kKnnBlockValues = int64_t{1} << 22;

// The k smallest (distance, index) pairs of a row of distances, nearest
// first; equal distances go to the lower index, and a distance that is not a
// number (a point with a NaN coordinate) ranks as infinite, after every
// other: NaN compares false with all, and among the first k it would stop
// every later point from entering the row. The k best so far are kept
// sorted: a later point enters only when strictly nearer than the worst, and
// goes after the entries of its distance (they have lower indices). About
// k ln(N/k) points enter a row in random order (~80 at N = 1,024, k = 20);
// a short shift in two small arrays costs far less than a heap of pairs.
template <typename T>
void select_k_nearest(const T* dist, int64_t n, int64_t k, int64_t* out, std::vector<T>& best) {
  best.resize(static_cast<size_t>(k));
  T* bd = best.data();
  auto insert = [&](int64_t j, int64_t at) {
    const T v = std::isnan(dist[j]) ? std::numeric_limits<T>::infinity() : dist[j];
    while (at > 0 && v < bd[at - 1]) {
      bd[at] = bd[at - 1], out[at] = out[at - 1];
      --at;
    }
    bd[at] = v, out[at] = j;
  };
  for (int64_t j = 0; j < k; ++j) insert(j, j);
  T worst = bd[k - 1];
  for (int64_t j = k; j < n; ++j) {
    if (!(dist[j] < worst)) continue;
    insert(j, k - 1);
    worst = bd[k - 1];
  }
}

// Up to this many dims (xyz, xyz + normals) distances are taken directly, as
// sums of squared differences: exact where the expansion |a|^2 + |b|^2 - 2ab
// cancels, and as fast as a product of rank 3.
constexpr int64_t kKnnDirectMaxDims = 8;

// row[j] += (x[j] - xq)^2 for every point j of one dim's row x.
template <typename T>
void add_squared_differences(const T* x, T xq, int64_t n, T* row) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const T diff = x[j] - xq;
    row[j] += diff * diff;
  }
}

// dist[j] = |q|^2 + |x_j|^2 - 2 <q, x_j> from the inner products of one query.
template <typename T>
void expanded_distances(T sq_query, const T* sq, const T* inner, int64_t n, T* dist) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dist[j] = sq_query + sq[j] - 2 * inner[j];
}

// From this many points of xyz on, a cloud's kNN graph comes from a k-d
// tree (spatial/kd_tree.h: the same indices, ties included) instead of a row
// of N distances per point: O(N log N) against O(N^2). The tree took half
// the time at 1,024 points, k = 20, and its share falls with N
// (`bench_pointcloud 0 3 spatial`, docs/vnt.md); below, both are fast and
// the measurement is noise.
constexpr int64_t kKnnTreeMinPoints = 1024;

// Each cloud's tree, then its points' searches in parallel. False (nothing
// written) when a cloud holds a coordinate that is not finite: the brute
// force ranks those points (select_k_nearest).
bool knn_indices_tree(const at::Tensor& points, int64_t k, int64_t* out) {
  const int64_t b = points.size(0), n = points.size(2);
  bool finite = true;
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "knn_indices_tree", [&] {
    const auto* p = points.data_ptr<scalar_t>();
    for (int64_t i = 0; i < b && finite; ++i)
      finite = spatial::tree_points_finite(p + i * 3 * n, p + i * 3 * n + n, p + i * 3 * n + 2 * n, n, 1);
    for (int64_t i = 0; i < b && finite; ++i) {
      const scalar_t* cloud = p + i * 3 * n;  // [3, N]: a row per axis
      spatial::KdTree<scalar_t>(cloud, cloud + n, cloud + 2 * n, n, 1).nearest_of_members(k, out + i * n * k);
    }
  });
  return finite;
}

at::Tensor knn_indices_cpu(const at::Tensor& features, int64_t k, bool tree_allowed) {
  const int64_t b = features.size(0), dims = features.size(1), n = features.size(2);
  auto out = torch::empty({b, n, k}, features.options().dtype(torch::kLong));
  auto* o = out.data_ptr<int64_t>();
  if (tree_allowed && dims == 3 && n >= kKnnTreeMinPoints && knn_indices_tree(features.detach().contiguous(), k, o))
    return out;
  if (dims <= kKnnDirectMaxDims) {
    const auto points = features.detach().contiguous();  // [B, D, N]: a row of N per dim
    AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "knn_indices", [&] {
      const auto* p = points.data_ptr<scalar_t>();
      // One task per query: a row of N distances (vectorised over the points), then the selection.
      at::parallel_for(0, b * n, 64, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> dist(static_cast<size_t>(n)), best;
        scalar_t* row = dist.data();
        for (int64_t task = begin; task < end; ++task) {
          const scalar_t* cloud = p + (task / n) * dims * n;
          const int64_t q = task % n;
          std::fill(dist.begin(), dist.end(), scalar_t(0));
          for (int64_t c = 0; c < dims; ++c) add_squared_differences(cloud + c * n, cloud[c * n + q], n, row);
          row[q] = -std::numeric_limits<scalar_t>::infinity();  // itself first, before its duplicates
          select_k_nearest<scalar_t>(row, n, k, o + task * k, best);
        }
      });
    });
    return out;
  }
  const auto points = features.detach().transpose(1, 2).contiguous();  // [B, N, D]
  const auto sq = (points * points).sum(-1).contiguous();              // [B, N]
  // Blocks of queries, of one cloud or of several whole clouds, up to
  // kKnnBlockValues distances: the GEMMs of a block first (OpenBLAS's
  // threads), then its selection in parallel (OpenMP's).
  const int64_t block_queries = std::max<int64_t>(1, kKnnBlockValues / n);
  const auto inner = torch::empty({std::min(block_queries, b * n), n}, points.options());
  std::vector<int64_t> row_query;  // global query index (cloud * n + q) of each row of the block
  auto select_block = [&] {
    AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "knn_indices_select", [&] {
      const auto* in = inner.data_ptr<scalar_t>();
      const auto* s = sq.data_ptr<scalar_t>();
      at::parallel_for(0, static_cast<int64_t>(row_query.size()), 16, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> dist(static_cast<size_t>(n)), best;
        scalar_t* d = dist.data();
        for (int64_t r = begin; r < end; ++r) {
          const int64_t query = row_query[static_cast<size_t>(r)], cloud = query / n;
          const scalar_t* row = in + r * n;
          const scalar_t* sc = s + cloud * n;
          const scalar_t sq_query = s[query];
          expanded_distances(sq_query, sc, row, n, d);
          d[query % n] = -std::numeric_limits<scalar_t>::infinity();  // itself first, whatever the rounding
          select_k_nearest<scalar_t>(d, n, k, o + query * k, best);
        }
      });
    });
    row_query.clear();
  };
  for (int64_t i = 0; i < b; ++i) {
    const auto cloud = points[i];
    for (int64_t q0 = 0; q0 < n; q0 += block_queries) {
      const int64_t q1 = std::min(n, q0 + block_queries);
      if (static_cast<int64_t>(row_query.size()) + (q1 - q0) > inner.size(0)) select_block();
      const int64_t at = static_cast<int64_t>(row_query.size());
      auto rows = inner.narrow(0, at, q1 - q0);
      torch::mm_out(rows, cloud.slice(0, q0, q1), cloud.transpose(0, 1));
      for (int64_t q = q0; q < q1; ++q) row_query.push_back(i * n + q);
    }
  }
  if (!row_query.empty()) select_block();
  return out;
}

void check_knn_inputs(const at::Tensor& features, int64_t k) {
  if (features.dim() != 3) throw UsageError("knn_indices: expected features [B, D, N], got " + shape_of(features));
  const int64_t n = features.size(2);
  if (k < 1) throw UsageError("knn_indices: k must be >= 1, got " + std::to_string(k));
  if (n < k)
    throw DataError("a cloud of " + std::to_string(n) + " points has fewer points than k = " + std::to_string(k) +
                    " neighbours");
}

}  // namespace

at::Tensor knn_indices_exhaustive(const at::Tensor& features, int64_t k) {
  check_knn_inputs(features, k);
  return knn_indices_cpu(features.cpu(), k, /*tree_allowed=*/false).to(features.device());
}

at::Tensor knn_indices(const at::Tensor& features, int64_t k) {
  check_knn_inputs(features, k);
  const int64_t n = features.size(2);
  // Under a torch.func transform the features are wrappers without storage:
  // the blocks below (ATen ops) serve them.
  if (features.device().is_cpu() && !under_function_transform())
    return knn_indices_cpu(features, k, /*tree_allowed=*/true);
  if (cuda::kernels_run_on(features.device()) && features.size(1) <= cuda::kKnnMaxDims && k <= cuda::kKnnMaxK)
    return cuda::knn_direct(features, k);
  // Other devices, and feature spaces on a GPU (where a GEMM of the blocks is
  // the fast way to the distances): the same blocks with topk (ties in topk's order).
  std::vector<at::Tensor> blocks;
  const auto points = features.detach().transpose(1, 2);        // [B, N, D]
  const auto sq = (points * points).sum(-1, /*keepdim=*/true);  // [B, N, 1]
  for (int64_t q0 = 0; q0 < n; q0 += kKnnQueryBlock) {
    const int64_t q1 = std::min(n, q0 + kKnnQueryBlock);
    const auto q = points.slice(1, q0, q1);
    const auto dist = sq.slice(1, q0, q1) + sq.transpose(1, 2) - 2 * torch::matmul(q, points.transpose(1, 2));
    dist.diagonal(q0, 1, 2).fill_(-std::numeric_limits<double>::infinity());  // itself first
    blocks.push_back(std::get<1>(dist.topk(k, -1, /*largest=*/false, /*sorted=*/true)));
  }
  return torch::cat(blocks, 1);
}

namespace {

void check_edge_inputs(const at::Tensor& x, const at::Tensor& idx) {
  require_vn(x, "edge_features");
  if (x.dim() != 4) throw UsageError("edge_features: expected x [B, C, 3, N], got " + shape_of(x));
  if (idx.dim() != 3 || idx.size(0) != x.size(0) || idx.size(1) != x.size(3))
    throw UsageError("edge_features: idx " + shape_of(idx) + " does not match x " + shape_of(x));
}

}  // namespace

at::Tensor edge_features_composed(const at::Tensor& x, const at::Tensor& idx, bool with_cross) {
  check_edge_inputs(x, idx);
  const int64_t b = x.size(0), c = x.size(1), n = x.size(3);
  const int64_t k = idx.size(2);
  const auto points = x.permute({0, 3, 1, 2}).reshape({b * n, c, 3});  // [B*N, C, 3]
  const auto base = torch::arange(b, idx.options()).view({b, 1, 1}) * n;
  const auto neighbours = points.index_select(0, (idx + base).reshape({-1})).view({b, n, k, c, 3});
  const auto centres = points.view({b, n, 1, c, 3}).expand({b, n, k, c, 3});
  std::vector<at::Tensor> parts = {neighbours - centres, centres};
  if (with_cross) parts.push_back(torch::cross(neighbours, centres, /*dim=*/-1));
  return torch::cat(parts, 3).permute({0, 3, 4, 1, 2}).contiguous();  // [B, 2C|3C, 3, N, k]
}

namespace {

// Edge features in one pass, and their gradient as one scatter per channel,
// without the gathered [B, N, k, C, 3] copies and the cat of the composed
// version. x [B, C, 3, N] contiguous, idx [B, N, k] int64.
class EdgeFeaturesFunction : public torch::autograd::Function<EdgeFeaturesFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& idx_in,
                            bool with_cross) {
    const auto x = x_in.contiguous();
    const auto idx = idx_in.contiguous();
    ctx->save_for_backward({x, idx});
    ctx->saved_data["cross"] = with_cross;
    keep_inputs_for_graph(ctx, "edge_features", {x_in});  // for create_graph (layers/second_order.h)
    const int64_t b = x.size(0), c = x.size(1), n = x.size(3), k = idx.size(2), parts = with_cross ? 3 : 2;
    auto out = torch::empty({b, parts * c, 3, n, k}, x.options());
    const auto* id = idx.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "edge_features", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      auto* op = out.data_ptr<scalar_t>();
      at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bc = begin; bc < end; ++bc) {
          const int64_t bi = bc / c, ci = bc % c;
          const scalar_t* xv = xp + bc * 3 * n;  // [3, N] of this channel
          const int64_t* nb = id + bi * n * k;
          scalar_t* diff = op + ((bi * parts * c) + ci) * 3 * n * k;
          scalar_t* ctr = diff + c * 3 * n * k;
          scalar_t* crs = with_cross ? ctr + c * 3 * n * k : nullptr;
          for (int64_t p = 0; p < n; ++p)
            for (int64_t j = 0; j < k; ++j) {
              const int64_t q = nb[p * k + j], at = p * k + j;
              const scalar_t a0 = xv[q], a1 = xv[n + q], a2 = xv[2 * n + q];  // neighbour
              const scalar_t c0 = xv[p], c1 = xv[n + p], c2 = xv[2 * n + p];  // centre
              diff[at] = a0 - c0, diff[n * k + at] = a1 - c1, diff[2 * n * k + at] = a2 - c2;
              ctr[at] = c0, ctr[n * k + at] = c1, ctr[2 * n * k + at] = c2;
              if (crs) {
                crs[at] = a1 * c2 - a2 * c1;
                crs[n * k + at] = a2 * c0 - a0 * c2;
                crs[2 * n * k + at] = a0 * c1 - a1 * c0;
              }
            }
        }
      });
    });
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& idx = saved[1];
    const bool with_cross = ctx->saved_data["cross"].toBool();
    if (gradient_graph_requested()) {
      const auto g = composed_vjp(
          [&](const auto& in) {
            return torch::autograd::variable_list{edge_features_composed(in[0], idx, with_cross)};
          },
          inputs_for_graph(ctx), grad);
      return {g[0], at::Tensor(), at::Tensor()};
    }
    const auto g = grad[0].contiguous();
    const int64_t b = x.size(0), c = x.size(1), n = x.size(3), k = idx.size(2), parts = with_cross ? 3 : 2;
    auto gx = torch::zeros_like(x);
    const auto* id = idx.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "edge_features_backward", [&] {
      const auto* xp = x.data_ptr<scalar_t>();
      const auto* gp = g.data_ptr<scalar_t>();
      auto* gxp = gx.data_ptr<scalar_t>();
      // One task per (batch, channel): it alone writes that channel's rows.
      at::parallel_for(0, b * c, 1, [&](int64_t begin, int64_t end) {
        for (int64_t bc = begin; bc < end; ++bc) {
          const int64_t bi = bc / c, ci = bc % c;
          const scalar_t* xv = xp + bc * 3 * n;
          scalar_t* gv = gxp + bc * 3 * n;
          const int64_t* nb = id + bi * n * k;
          const scalar_t* g_diff = gp + ((bi * parts * c) + ci) * 3 * n * k;
          const scalar_t* g_ctr = g_diff + c * 3 * n * k;
          const scalar_t* g_crs = with_cross ? g_ctr + c * 3 * n * k : nullptr;
          for (int64_t p = 0; p < n; ++p)
            for (int64_t j = 0; j < k; ++j) {
              const int64_t q = nb[p * k + j], at = p * k + j;
              for (int64_t d = 0; d < 3; ++d) {
                const scalar_t gd = g_diff[d * n * k + at];
                gv[d * n + q] += gd;                          // neighbour - centre
                gv[d * n + p] += g_ctr[d * n * k + at] - gd;  // centre
              }
              if (g_crs) {
                // y = a x b: dL/da = b x g, dL/db = g x a.
                const scalar_t a0 = xv[q], a1 = xv[n + q], a2 = xv[2 * n + q];
                const scalar_t c0 = xv[p], c1 = xv[n + p], c2 = xv[2 * n + p];
                const scalar_t g0 = g_crs[at], g1 = g_crs[n * k + at], g2 = g_crs[2 * n * k + at];
                gv[q] += c1 * g2 - c2 * g1, gv[n + q] += c2 * g0 - c0 * g2, gv[2 * n + q] += c0 * g1 - c1 * g0;
                gv[p] += g1 * a2 - g2 * a1, gv[n + p] += g2 * a0 - g0 * a2, gv[2 * n + p] += g0 * a1 - g1 * a0;
              }
            }
        }
      });
    });
    return {gx, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor edge_features(const at::Tensor& x, const at::Tensor& idx, bool with_cross) {
  // Another integer type is taken as int64 (the kernel's), so that its range is checked as int64's is.
  if (x.device().is_cpu() && c10::isIntegralType(idx.scalar_type(), /*includeBool=*/false) &&
      idx.scalar_type() != torch::kLong)
    return edge_features(x, idx.to(torch::kLong), with_cross);
  if (!x.device().is_cpu() || idx.scalar_type() != torch::kLong || under_function_transform())
    return edge_features_composed(x, idx, with_cross);
  check_edge_inputs(x, idx);
  const int64_t n = x.size(3);
  if (idx.numel() > 0 && (idx.min().item<int64_t>() < 0 || idx.max().item<int64_t>() >= n))
    throw UsageError("edge_features: idx holds a point outside 0.." + std::to_string(n - 1));
  return EdgeFeaturesFunction::apply(x, idx, with_cross);
}

VNAttentionResult vn_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               attention::SdpaOptions options) {
  for (const auto* t : {&q, &k, &v})
    if (t->dim() != 5 || t->size(4) != 3)
      throw UsageError("vn_attention: expected q, k, v [B, H, N, C, 3], got " + shape_of(*t));
  if (q.size(3) != k.size(3))
    throw UsageError("vn_attention: q " + shape_of(q) + " and k " + shape_of(k) + " differ in channels");
  auto r = vn_attention_rows(q.flatten(3), k.flatten(3), v.flatten(3), q.size(3), options);
  auto out_sizes = v.sizes().vec();
  out_sizes[2] = q.size(2);
  return {r.output.view(out_sizes), r.weights};
}

}  // namespace qkv::vn
