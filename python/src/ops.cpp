// qkv.ops: the library's kernels on torch tensors. Autograd comes from the
// library's own autograd Functions; the devices and dtypes each kernel serves
// are the library's rules (docs/python.md lists them).
#include <pybind11/stl.h>

#include "bindings.h"
#include "qkv/attention/sdpa.h"
#include "qkv/core/errors.h"
#include "qkv/core/shape.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"

namespace qkv::python {
namespace {

// [N, D] -> [1, N, D]; [B, N, D] as it is; anything else a UsageError naming `what`.
at::Tensor as_batch_of_clouds(const at::Tensor& points, const char* what) {
  if (points.dim() == 2) return points.unsqueeze(0);
  if (points.dim() == 3) return points;
  throw UsageError(std::string(what) + ": expected points [B, N, D] or [N, D], got " + shape_of(points));
}

at::Tensor knn(const at::Tensor& points, int64_t k) {
  const auto batch = as_batch_of_clouds(points, "knn");
  if (!batch.is_floating_point()) throw UsageError("knn: expected floating-point points, got " + shape_of(points));
  at::Tensor idx;
  {
    py::gil_scoped_release release;
    idx = vn::knn_indices(batch.transpose(1, 2), k);
  }
  return points.dim() == 2 ? idx.squeeze(0) : idx;
}

at::Tensor farthest_point_sample(const at::Tensor& points, int64_t m, int64_t start) {
  // On a GPU, qkv's kernel where the build has it, else the CPU's on a copy
  // (pointcloud::farthest_point_sample decides).
  py::gil_scoped_release release;
  return pointcloud::farthest_point_sample(points.detach(), m, start);
}

at::Tensor nearest_points(const at::Tensor& queries, const at::Tensor& points) {
  py::gil_scoped_release release;
  return pointcloud::nearest_point_indices(queries.detach().cpu(), points.detach().cpu()).to(queries.device());
}

attention::AttentionBackend parse_backend(const std::string& name) {
  if (name == "auto") return attention::AttentionBackend::Auto;
  if (name == "naive") return attention::AttentionBackend::Naive;
  if (name == "tiled") return attention::AttentionBackend::Tiled;
  if (name == "torch") return attention::AttentionBackend::Torch;
  throw UsageError("attention: backend '" + name + "': expected tiled, torch, naive or auto");
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                     const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
                     const c10::optional<std::string>& backend) {
  attention::SdpaOptions o;
  o.causal = causal;
  if (key_padding_mask) o.key_padding_mask = *key_padding_mask;
  if (scale) o.scale = *scale;
  if (backend) {
    o.backend = parse_backend(*backend);
  } else {
    // The tiled kernel wherever it runs (exact, O(N d) memory); elsewhere
    // (a GPU, another dtype) the library's choice: PyTorch's fused kernels
    // on a GPU where this build has them, the composed version otherwise.
    o.backend = attention::tiled_unsupported_reason(q, k, v, o).empty() ? attention::AttentionBackend::Tiled
                                                                        : attention::AttentionBackend::Auto;
  }
  return attention::scaled_dot_product_attention(q, k, v, o).output;
}

}  // namespace

void bind_ops(py::module_& m) {
  auto ops = m.def_submodule("ops");
  ops.def("knn", &knn, py::arg("points"), py::arg("k"),
          R"doc(knn(points, k) -> LongTensor [B, N, k] (or [N, k])

Indices of the k nearest neighbours of every point (squared Euclidean
distance), nearest first, the point itself first (also before a duplicate of it); ties by index.
points: [B, N, D] or [N, D], float32/float64. N < k is a qkv.DataError.
Clouds of xyz (D = 3) from 1,024 points on go through a k-d tree per
cloud: the same indices, O(N log N) instead of O(N^2).)doc");
  ops.def("farthest_point_sample", &farthest_point_sample, py::arg("points"), py::arg("m"), py::arg("start") = 0,
          R"doc(farthest_point_sample(points, m, start=0) -> LongTensor [B, m] (or [m])

Farthest point sampling from point `start`; ties to the lowest index.
points: [B, N, 3] or [N, 3], float32/float64. Large clouds (from 4,096
points) are sampled through a k-d tree: the same picks, in a fraction of the
time (docs/vnt.md).)doc");
  ops.def("nearest_points", &nearest_points, py::arg("queries"), py::arg("points"),
          R"doc(nearest_points(queries, points) -> LongTensor [Q]

For each of queries [Q, 3], the index of its nearest of points [P, 3]
(squared Euclidean, computed in float64; ties to the lowest index), through
a k-d tree of the points: O((Q + P) log P). The way to carry labels or
features of a sample back to every point of a scan:
labels_of_all = sample_labels[qkv.ops.nearest_points(scan, scan[sample])].)doc");
  ops.def("attention", &attention, py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(),
          py::arg("causal") = qkv::attention::SdpaOptions().causal, py::arg("key_padding_mask") = py::none(),
          py::arg("scale") = py::none(), py::arg("backend") = py::none(),
          R"doc(attention(q, k, v, *, causal=False, key_padding_mask=None, scale=None, backend=None)

softmax(scale * q k^T) v with q [B, H, Nq, d], k [B, H, Nk, d], v [B, H, Nk, dv].
On the CPU in float32/float64 the tiled (FlashAttention-style) kernel: exact,
never forms the Nq x Nk matrix; on a GPU PyTorch's fused kernels where qkv
was built against torch 2.1 or later; elsewhere the composed version.
causal is end-aligned (query i sees key j <= i + Nk - Nq);
key_padding_mask [B, Nk] bool, True = padding; scale defaults to 1/sqrt(d);
backend 'tiled' | 'torch' | 'naive' | 'auto' forces a path.)doc");
  ops.def("torch_attention_available", &attention::torch_attention_available,
          R"doc(torch_attention_available() -> bool

Whether this build of qkv has attention(..., backend='torch'): PyTorch's
fused kernels, in a build against torch 2.1 or later.)doc");
  ops.def("edge_features", &vn::edge_features, py::arg("x"), py::arg("idx"), py::arg("with_cross") = false,
          R"doc(edge_features(x, idx, with_cross=False) -> [B, 2C (3C), 3, N, k]

[x_j - x_i, x_i (, x_j x x_i)] for x [B, C, 3, N] and neighbours idx [B, N, k].)doc");
  ops.def("edge_features_composed", &vn::edge_features_composed, py::arg("x"), py::arg("idx"),
          py::arg("with_cross") = false,
          R"doc(edge_features_composed(x, idx, with_cross=False): edge_features from plain LibTorch ops
(index_select, expand, cat), the reference the fused kernel is tested against.)doc");
  ops.def("vn_linear", &vn::vn_linear, py::arg("x"), py::arg("weight"),
          R"doc(vn_linear(x, weight) -> [B, C_out, 3, ...]: W x over channels, weight [C_out, C_in].)doc");
  ops.def("vn_leaky_relu", &vn::vn_leaky_relu, py::arg("x"), py::arg("direction"), py::arg("negative_slope") = 0.2,
          py::arg("eps") = vn::kVNEps,
          R"doc(vn_leaky_relu(x, direction, negative_slope=0.2, eps=1e-6)

Where <x, d> < 0, the component of x along d is removed (blended with x by
negative_slope); direction [B, C or 1, 3, ...].)doc");
  ops.def("vn_leaky_relu_composed", &vn::vn_leaky_relu_composed, py::arg("x"), py::arg("direction"),
          py::arg("negative_slope") = 0.2, py::arg("eps") = vn::kVNEps,
          R"doc(vn_leaky_relu_composed(x, direction, negative_slope=0.2, eps=1e-6): vn_leaky_relu from plain
LibTorch ops, the reference the fused kernel is tested against.)doc");
  ops.def(
      "vn_batch_norm",
      [](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& running_mean,
         const at::Tensor& running_var, bool training, double momentum, double eps) {
        return vn::vn_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, nullptr);
      },
      py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("running_mean"), py::arg("running_var"),
      py::arg("training"), py::arg("momentum") = 0.1, py::arg("eps") = 1e-5,
      R"doc(vn_batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5)

Batch norm of the vector norms of x [B, C, 3, ...], directions kept.)doc");
  ops.def(
      "vn_batch_norm_composed",
      [](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& running_mean,
         const at::Tensor& running_var, bool training, double momentum, double eps) {
        return vn::vn_batch_norm_composed(x, weight, bias, running_mean, running_var, training, momentum, eps, nullptr);
      },
      py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("running_mean"), py::arg("running_var"),
      py::arg("training"), py::arg("momentum") = 0.1, py::arg("eps") = 1e-5,
      R"doc(vn_batch_norm_composed(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
vn_batch_norm from plain LibTorch ops, the reference the fused kernel is tested against.)doc");
  ops.def("vn_frame_coordinates", &vn::vn_frame_coordinates, py::arg("x"), py::arg("frame"),
          R"doc(vn_frame_coordinates(x, frame) -> [B, C, 3, ...]

Coordinates of every vector of x [B, C, 3, ...] in the per-point frame
[B, 3, 3, ...] (dim 1 frame vector, dim 2 xyz): invariant when both rotate.)doc");
  ops.def("vn_frame_coordinates_composed", &vn::vn_frame_coordinates_composed, py::arg("x"), py::arg("frame"),
          R"doc(vn_frame_coordinates_composed(x, frame): vn_frame_coordinates from plain LibTorch ops, the
reference the fused kernel is tested against.)doc");
  ops.def(
      "vn_attention",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, c10::optional<double> scale) {
        attention::SdpaOptions o;
        if (scale) o.scale = *scale;
        return vn::vn_attention(q, k, v, o).output;
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(), py::arg("scale") = py::none(),
      R"doc(vn_attention(q, k, v, *, scale=None) -> [B, H, Nq, Cv, 3]

VNT-Net's VNAttention: softmax(sum_c Q_c K_c^T / sqrt(C)) V with
q [B, H, Nq, C, 3], k [B, H, Nk, C, 3], v [B, H, Nk, Cv, 3].)doc");
  ops.def("vn_norm", &vn::vn_norm, py::arg("x"), py::arg("eps") = vn::kVNEps,
          R"doc(vn_norm(x, eps=1e-6) -> [B, C, ...]

The Euclidean norm of every vector of x [B, C, 3, ...], as sqrt(|x|^2 + eps^2):
rotation invariant, with a finite gradient at 0.)doc");
}

}  // namespace qkv::python
