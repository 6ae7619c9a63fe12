#pragma once
// A k-d tree over one cloud of 3-D points, for the point-cloud kernels whose
// brute-force forms grow as N^2 (kNN) or N m (farthest point sampling):
// vn::knn_indices and pointcloud::farthest_point_sample switch to it above
// the sizes where it wins (measured in bench/pointcloud.cpp, docs/vnt.md).
//
// Exact, not approximate: every answer is bit for bit the brute-force
// kernel's, ties included.
// - A distance is computed as the brute-force kernels compute it, in the
//   points' own precision: d = (x_j - x_q)^2, then + (y_j - y_q)^2, then
//   + (z_j - z_q)^2, without fused multiply-adds.
// - A subtree is skipped only when the distance to its bounding box,
//   computed by the same formula from the box's faces, already rules it out.
//   IEEE rounding is monotone, so that box distance is a true lower bound of
//   every computed distance inside: no margin, no rounding case missed.
// - Ties go to the lower index, as in the brute-force kernels. Each node
//   knows the lowest index below it, so a subtree that can only tie, and
//   only with higher indices, is skipped too: a cloud of many duplicates
//   costs no more than a spread one.
//
// Points must be finite (the caller checks, tree_points_finite): a NaN
// would break the ordering the tree is built on.
#include <cstdint>
#include <vector>

namespace qkv::spatial {

// Whether every coordinate of n points is finite; coordinates of point i at
// xs[i * stride], ys[i * stride], zs[i * stride].
template <typename T>
bool tree_points_finite(const T* xs, const T* ys, const T* zs, int64_t n, int64_t stride);

template <typename T>
class KdTree {
 public:
  // Builds the tree over n points (copied; coordinates as in
  // tree_points_finite). O(N log N).
  KdTree(const T* xs, const T* ys, const T* zs, int64_t n, int64_t stride);

  int64_t size() const { return static_cast<int64_t>(index_.size()); }

  // The k nearest points of every point of the cloud: row i of out [N, k]
  // (original order) holds point i first (before any duplicate of it), then
  // the others by (distance, index), as vn::knn_indices. k in [1, size()].
  // The points run in parallel (ATen's threads), in tree order.
  void nearest_of_members(int64_t k, int64_t* out) const;

  // The index of the point nearest to (x, y, z), the lowest index among
  // equal distances. Thread-safe (const).
  int64_t nearest(T x, T y, T z) const;

  // Farthest point sampling: m indices into out, the first `start`, each
  // next the point farthest from those picked (the minimum over them of
  // the squared distance), ties to the lowest index. Each pick revisits
  // only the subtrees the new point can bring nearer, whose size shrinks
  // as the picks spread: far below the N m of the brute-force kernel.
  void farthest_point_sample(int64_t m, int64_t start, int64_t* out) const;

  // Points per leaf: a leaf's points are scanned as a block.
  static constexpr int64_t kLeafSize = 16;
  // Farthest point sampling updates subtrees of up to this many points as
  // one vectorised block: cheaper than walking their leaves one by one.
  static constexpr int64_t kFpsBucketSize = 128;

 private:
  struct Node {
    T lo[3], hi[3];       // bounding box of the node's points
    int64_t begin, end;   // its points: slots [begin, end) of the tree order
    int64_t min_index;    // the lowest original index among them
    int32_t left, right;  // children, -1 for a leaf
  };
  struct Query;
  struct BuildPoint {
    T at[3];
    int64_t index;
  };

  // Makes the node of points [begin, end) and its subtree; returns its id.
  int32_t build(std::vector<BuildPoint>& points, int64_t begin, int64_t end);
  // Squared distance from (x, y, z) to a node's box, by the points' formula.
  T box_distance(const Node& node, T x, T y, T z) const;
  void search(int32_t node, T bound, Query& query) const;

  // Coordinates in tree order (a leaf's points are contiguous), and the
  // original index of each slot.
  std::vector<T> x_, y_, z_;
  std::vector<int64_t> index_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
};

extern template class KdTree<float>;
extern template class KdTree<double>;

}  // namespace qkv::spatial
