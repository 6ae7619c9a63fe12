#include "qkv/spatial/kd_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/Parallel.h>

namespace qkv::spatial {

template <typename T>
bool tree_points_finite(const T* xs, const T* ys, const T* zs, int64_t n, int64_t stride) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(xs[i * stride]) || !std::isfinite(ys[i * stride]) || !std::isfinite(zs[i * stride]))
      return false;
  return true;
}

namespace {

// The squared distance of the brute-force kernels, term by term in the same
// order (see the header): the tree's answers are theirs bit for bit.
template <typename T>
inline T squared_distance(T dx, T dy, T dz) {
  T d = dx * dx;
  d = d + dy * dy;
  d = d + dz * dz;
  return d;
}

// How far q is outside [lo, hi] along one axis (0 inside), rounded as the
// difference of q and the nearest point coordinate would be: never more
// than |p - q| for any p in [lo, hi].
template <typename T>
inline T gap(T q, T lo, T hi) {
  return q < lo ? lo - q : (q > hi ? q - hi : T(0));
}

// (d, i) before (e, j): nearer, or as near with a lower index.
template <typename T>
inline bool nearer(T d, int64_t i, T e, int64_t j) {
  return d < e || (d == e && i < j);
}

// (d, i) before (e, j) for farthest point sampling: farther, or as far with
// a lower index.
template <typename T>
inline bool farther(T d, int64_t i, T e, int64_t j) {
  return d > e || (d == e && i < j);
}

}  // namespace

template <typename T>
KdTree<T>::KdTree(const T* xs, const T* ys, const T* zs, int64_t n, int64_t stride) {
  // The points travel with their coordinates while the tree is built: the
  // median splits move whole records through contiguous memory, where an
  // array of indices into the coordinates would read them at random (at a
  // million points, most of the build's time).
  std::vector<BuildPoint> points(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    points[static_cast<size_t>(i)] = {{xs[i * stride], ys[i * stride], zs[i * stride]}, i};
  nodes_.reserve(static_cast<size_t>(2 * (n / kLeafSize + 1)));
  if (n > 0) build(points, 0, n);
  const auto size = static_cast<size_t>(n);
  x_.resize(size), y_.resize(size), z_.resize(size), index_.resize(size);
  for (size_t s = 0; s < size; ++s) {
    x_[s] = points[s].at[0], y_[s] = points[s].at[1], z_[s] = points[s].at[2];
    index_[s] = points[s].index;
  }
}

template <typename T>
int32_t KdTree<T>::build(std::vector<BuildPoint>& points, int64_t begin, int64_t end) {
  Node node{};
  node.begin = begin, node.end = end, node.left = node.right = -1;
  node.min_index = std::numeric_limits<int64_t>::max();
  for (int a = 0; a < 3; ++a) node.lo[a] = node.hi[a] = points[static_cast<size_t>(begin)].at[a];
  for (int64_t s = begin; s < end; ++s) {
    const BuildPoint& p = points[static_cast<size_t>(s)];
    node.min_index = std::min(node.min_index, p.index);
    for (int a = 0; a < 3; ++a) {
      node.lo[a] = std::min(node.lo[a], p.at[a]);
      node.hi[a] = std::max(node.hi[a], p.at[a]);
    }
  }
  const auto id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back(node);
  if (end - begin <= kLeafSize) return id;
  // Split the widest axis at the median. Equal coordinates are ordered by
  // index, so coincident points split by index: the lower half's subtree
  // holds the lower indices, and its min_index lets searches skip the rest.
  int axis = 0;
  for (int a = 1; a < 3; ++a)
    if (node.hi[a] - node.lo[a] > node.hi[axis] - node.lo[axis]) axis = a;
  const int64_t middle = begin + (end - begin) / 2;
  std::nth_element(points.begin() + begin, points.begin() + middle, points.begin() + end,
                   [axis](const BuildPoint& p, const BuildPoint& q) {
                     return p.at[axis] < q.at[axis] || (p.at[axis] == q.at[axis] && p.index < q.index);
                   });
  const int32_t left = build(points, begin, middle);
  const int32_t right = build(points, middle, end);
  nodes_[static_cast<size_t>(id)].left = left;
  nodes_[static_cast<size_t>(id)].right = right;
  return id;
}

template <typename T>
T KdTree<T>::box_distance(const Node& node, T x, T y, T z) const {
  return squared_distance(gap(x, node.lo[0], node.hi[0]), gap(y, node.lo[1], node.hi[1]),
                          gap(z, node.lo[2], node.hi[2]));
}

// The best `want` points so far of one search, sorted by (distance, index).
template <typename T>
struct KdTree<T>::Query {
  T x, y, z;
  int64_t self;  // excluded from the candidates; -1: none
  int64_t want, count = 0;
  T* dist;
  int64_t* idx;

  bool full() const { return count == want; }
  // Whether a subtree whose computed distances are all >= bound and whose
  // indices are all >= min_index can still change the result.
  bool rules_out(T bound, int64_t min_index) const {
    const T worst = dist[want - 1];
    return bound > worst || (bound == worst && min_index > idx[want - 1]);
  }
  void offer(T d, int64_t j) {
    int64_t at;
    if (full()) {
      if (!nearer(d, j, dist[want - 1], idx[want - 1])) return;
      at = want - 1;
    } else {
      at = count++;
    }
    for (; at > 0 && nearer(d, j, dist[at - 1], idx[at - 1]); --at) dist[at] = dist[at - 1], idx[at] = idx[at - 1];
    dist[at] = d, idx[at] = j;
  }
};

template <typename T>
void KdTree<T>::search(int32_t id, T bound, Query& query) const {
  const Node& node = nodes_[static_cast<size_t>(id)];
  if (query.full() && query.rules_out(bound, node.min_index)) return;
  if (node.left < 0) {
    for (int64_t s = node.begin; s < node.end; ++s) {
      const int64_t j = index_[static_cast<size_t>(s)];
      if (j == query.self) continue;
      const auto at = static_cast<size_t>(s);
      query.offer(squared_distance(x_[at] - query.x, y_[at] - query.y, z_[at] - query.z), j);
    }
    return;
  }
  // The nearer child first (on a tie the one with the lower indices): the
  // best list tightens early and rules out more of the other.
  const Node& a = nodes_[static_cast<size_t>(node.left)];
  const Node& b = nodes_[static_cast<size_t>(node.right)];
  const T to_a = box_distance(a, query.x, query.y, query.z), to_b = box_distance(b, query.x, query.y, query.z);
  if (nearer(to_a, a.min_index, to_b, b.min_index)) {
    search(node.left, to_a, query);
    search(node.right, to_b, query);
  } else {
    search(node.right, to_b, query);
    search(node.left, to_a, query);
  }
}

template <typename T>
void KdTree<T>::nearest_of_members(int64_t k, int64_t* out) const {
  // Consecutive queries in tree order are near each other: their searches
  // walk the same nodes, warm in cache.
  at::parallel_for(0, size(), 256, [&](int64_t begin, int64_t end) {
    std::vector<T> dist(static_cast<size_t>(std::max<int64_t>(k - 1, 1)));
    for (int64_t s = begin; s < end; ++s) {
      const auto at = static_cast<size_t>(s);
      const int64_t self = index_[at];
      int64_t* row = out + self * k;
      row[0] = self;  // itself first, before its duplicates (as the brute-force kernel)
      if (k == 1) continue;
      Query query{x_[at], y_[at], z_[at], self, k - 1, 0, dist.data(), row + 1};
      search(0, box_distance(nodes_[0], query.x, query.y, query.z), query);
    }
  });
}

template <typename T>
int64_t KdTree<T>::nearest(T x, T y, T z) const {
  T dist;
  int64_t best = -1;
  Query query{x, y, z, -1, 1, 0, &dist, &best};
  if (size() > 0) search(0, box_distance(nodes_[0], x, y, z), query);
  return best;
}

template <typename T>
void KdTree<T>::farthest_point_sample(int64_t m, int64_t start, int64_t* out) const {
  if (m <= 0) return;
  const auto n = static_cast<size_t>(size());
  std::vector<int64_t> slot_of(n);
  for (size_t s = 0; s < n; ++s) slot_of[static_cast<size_t>(index_[s])] = static_cast<int64_t>(s);
  // Each slot's squared distance to the picks so far, and each node's
  // farthest point (distance, lowest index among the farthest).
  std::vector<T> dist(n, std::numeric_limits<T>::infinity());
  std::vector<T> node_far(nodes_.size(), std::numeric_limits<T>::infinity());
  std::vector<int64_t> node_far_index(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) node_far_index[i] = nodes_[i].min_index;

  // Brings the points of a subtree nearer to the new pick (cx, cy, cz). A
  // subtree whose box is no nearer to the pick than its farthest point is
  // to the picks so far keeps every distance: computed distances inside are
  // at least the box's (monotone rounding), so no minimum changes.
  auto update = [&](auto&& self, int32_t id, T cx, T cy, T cz) -> void {
    const auto at = static_cast<size_t>(id);
    const Node& node = nodes_[at];
    if (!(box_distance(node, cx, cy, cz) < node_far[at])) return;
    if (node.left < 0 || node.end - node.begin <= kFpsBucketSize) {
      // A bucket: one vectorised pass over its slots, then its farthest.
      T* d = dist.data();
      const T *x = x_.data(), *y = y_.data(), *z = z_.data();
      T far = -1;
#pragma omp simd reduction(max : far)
      for (int64_t p = node.begin; p < node.end; ++p) {
        const T to_pick = squared_distance(x[p] - cx, y[p] - cy, z[p] - cz);
        d[p] = to_pick < d[p] ? to_pick : d[p];
        far = far > d[p] ? far : d[p];
      }
      int64_t far_index = std::numeric_limits<int64_t>::max();
      for (int64_t p = node.begin; p < node.end; ++p)
        if (d[p] == far) far_index = std::min(far_index, index_[static_cast<size_t>(p)]);
      node_far[at] = far, node_far_index[at] = far_index;
      return;
    }
    self(self, node.left, cx, cy, cz);
    self(self, node.right, cx, cy, cz);
    const auto l = static_cast<size_t>(node.left), r = static_cast<size_t>(node.right);
    const bool left_wins = farther(node_far[l], node_far_index[l], node_far[r], node_far_index[r]);
    node_far[at] = left_wins ? node_far[l] : node_far[r];
    node_far_index[at] = left_wins ? node_far_index[l] : node_far_index[r];
  };
  int64_t current = start;
  for (int64_t pick = 0; pick < m; ++pick) {
    out[pick] = current;
    const auto s = static_cast<size_t>(slot_of[static_cast<size_t>(current)]);
    update(update, 0, x_[s], y_[s], z_[s]);
    current = node_far_index[0];
  }
}

template class KdTree<float>;
template class KdTree<double>;
template bool tree_points_finite<float>(const float*, const float*, const float*, int64_t, int64_t);
template bool tree_points_finite<double>(const double*, const double*, const double*, int64_t, int64_t);

}  // namespace qkv::spatial
