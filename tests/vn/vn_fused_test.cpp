// The fused VN leaky ReLU and VN batch norm (vn_fused.cpp) against their
// composed LibTorch versions: the same values, gradients and running
// statistics, in float32 and float64, on point ([B, C, 3, N]) and edge
// ([B, C, 3, N, k]) features; and their gradients against central
// differences in float64. The fused edge convolution (gather + batch norm +
// leaky ReLU + mean over neighbours, edge_conv.h) the same way.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"
#include "support/gradcheck.h"
#include "support/tolerance.h"

namespace qkv::testing {
namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

double tolerance(torch::Dtype dtype) { return dtype == torch::kDouble ? 1e-12 : 2e-5; }

TEST(VNFusedLeakyReLU, EqualsTheComposedVersion) {
  torch::manual_seed(1);
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const bool shared : {false, true})
      for (const auto& sizes : {std::vector<int64_t>{2, 5, 3, 300}, std::vector<int64_t>{2, 4, 3, 50, 7}}) {
        const auto x0 = torch::randn(sizes, dtype);
        auto dsizes = sizes;
        if (shared) dsizes[1] = 1;
        const auto d0 = torch::randn(dsizes, dtype);
        for (const double slope : {0.2, 0.0}) {
          auto x = x0.clone().requires_grad_(), d = d0.clone().requires_grad_();
          auto xr = x0.clone().requires_grad_(), dr = d0.clone().requires_grad_();
          const auto fast = vn::vn_leaky_relu(x, d, slope), ref = vn::vn_leaky_relu_composed(xr, dr, slope);
          ASSERT_EQ(fast.sizes(), ref.sizes());
          const double tol = tolerance(dtype);
          EXPECT_LT(max_diff(fast, ref), tol) << dtype << " shared " << shared << " slope " << slope;
          const auto up = torch::randn_like(ref);
          (fast * up).sum().backward();
          (ref * up).sum().backward();
          EXPECT_LT(max_diff(x.grad(), xr.grad()), tol) << dtype << " shared " << shared;
          // The shared direction's gradient sums over every channel.
          EXPECT_LT(precision_difference(d.grad(), dr.grad()), 10 * tol) << dtype << " shared " << shared;
        }
      }
}

TEST(VNFusedLeakyReLU, GradcheckInFloat64) {
  torch::manual_seed(2);
  for (const bool shared : {false, true}) {
    const auto x = torch::randn({2, 3, 3, 6}, torch::kDouble);
    const auto d = torch::randn({2, shared ? 1 : 3, 3, 6}, torch::kDouble);
    const auto f = [](const std::vector<at::Tensor>& in) { return vn::vn_leaky_relu(in[0], in[1], 0.2); };
    EXPECT_LT(max_gradient_error(f, {x, d}), 1e-6) << "shared " << shared;
  }
}

TEST(VNFusedLeakyReLU, OtherShapesTakeTheComposedPath) {
  // A direction that broadcasts over the points is not what the fused kernel
  // takes; the result must still be the composed one.
  const auto x = torch::randn({2, 3, 3, 8}), d = torch::randn({2, 3, 3, 1});
  EXPECT_LT(max_diff(vn::vn_leaky_relu(x, d, 0.2), vn::vn_leaky_relu_composed(x, d, 0.2)), 1e-6);
  EXPECT_THROW(vn::vn_leaky_relu(torch::randn({2, 3, 4}), torch::randn({2, 3, 4}), 0.2), UsageError);
}

TEST(VNFusedFrameCoordinates, EqualsTheComposedVersionAndPassesGradcheck) {
  // Values and both gradients against the batched matmul, on point and edge
  // features, float32 and float64; then central differences in float64; a
  // frame of the wrong shape is a usage error.
  torch::manual_seed(9);
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const auto& sizes : {std::vector<int64_t>{2, 5, 3, 300}, std::vector<int64_t>{2, 4, 3, 50, 7}}) {
      auto fsizes = sizes;
      fsizes[1] = 3;
      const auto x0 = torch::randn(sizes, dtype), f0 = torch::randn(fsizes, dtype);
      auto x = x0.clone().requires_grad_(), f = f0.clone().requires_grad_();
      auto xr = x0.clone().requires_grad_(), fr = f0.clone().requires_grad_();
      const auto fast = vn::vn_frame_coordinates(x, f), ref = vn::vn_frame_coordinates_composed(xr, fr);
      ASSERT_EQ(fast.sizes(), ref.sizes());
      const double tol = tolerance(dtype);
      EXPECT_LT(precision_difference(fast, ref), tol) << dtype;
      const auto up = torch::randn_like(ref);
      (fast * up).sum().backward();
      (ref * up).sum().backward();
      EXPECT_LT(precision_difference(x.grad(), xr.grad()), tol) << dtype;
      EXPECT_LT(precision_difference(f.grad(), fr.grad()), 10 * tol) << dtype;  // summed over channels
    }
  const auto f = [](const std::vector<at::Tensor>& in) { return vn::vn_frame_coordinates(in[0], in[1]); };
  EXPECT_LT(
      max_gradient_error(f, {torch::randn({2, 3, 3, 5}, torch::kDouble), torch::randn({2, 3, 3, 5}, torch::kDouble)}),
      1e-6);
  EXPECT_THROW(vn::vn_frame_coordinates(torch::randn({2, 3, 3, 5}), torch::randn({2, 2, 3, 5})), UsageError);
  EXPECT_THROW(vn::vn_frame_coordinates(torch::randn({2, 3, 3, 5}), torch::randn({1, 3, 3, 5})), UsageError);
}

struct BatchNormState {
  at::Tensor weight, bias, running_mean, running_var;
};

BatchNormState random_state(int64_t channels, torch::Dtype dtype) {
  return {torch::rand({channels}, dtype) + 0.5, torch::randn({channels}, dtype), torch::rand({channels}, dtype),
          torch::rand({channels}, dtype) + 0.5};
}

TEST(VNFusedBatchNorm, EqualsTheComposedVersionInTrainingAndEval) {
  torch::manual_seed(3);
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const bool training : {true, false})
      for (const auto& sizes : {std::vector<int64_t>{3, 4, 3, 200}, std::vector<int64_t>{2, 5, 3, 40, 6}}) {
        const auto x0 = torch::randn(sizes, dtype) * 2;
        const auto s0 = random_state(sizes[1], dtype);
        auto run = [&](bool fused, BatchNormState& s, at::Tensor& x) {
          s = {s0.weight.clone().requires_grad_(), s0.bias.clone().requires_grad_(), s0.running_mean.clone(),
               s0.running_var.clone()};
          x = x0.clone().requires_grad_();
          return (fused ? vn::vn_batch_norm : vn::vn_batch_norm_composed)(x, s.weight, s.bias, s.running_mean,
                                                                          s.running_var, training, 0.1, 1e-5, nullptr);
        };
        BatchNormState sf, sr;
        at::Tensor xf, xr;
        const auto fast = run(true, sf, xf), ref = run(false, sr, xr);
        // torch::batch_norm's float32 statistics and ours (float64 sums) round differently.
        const double tol = dtype == torch::kDouble ? 1e-11 : 1e-4;
        EXPECT_LT(max_diff(fast, ref), tol) << dtype << " training " << training;
        EXPECT_LT(max_diff(sf.running_mean, sr.running_mean), tol);
        EXPECT_LT(max_diff(sf.running_var, sr.running_var), tol);
        if (training) {
          EXPECT_GT(max_diff(sf.running_mean, s0.running_mean), 1e-3);  // updated
        }
        const auto up = torch::randn_like(ref);
        (fast * up).sum().backward();
        (ref * up).sum().backward();
        EXPECT_LT(precision_difference(xf.grad(), xr.grad()), 10 * tol) << dtype << " training " << training;
        EXPECT_LT(precision_difference(sf.weight.grad(), sr.weight.grad()), 100 * tol)
            << dtype << " training " << training;
        EXPECT_LT(precision_difference(sf.bias.grad(), sr.bias.grad()), 100 * tol) << dtype << " training " << training;
      }
}

TEST(VNFusedBatchNorm, GradcheckInFloat64) {
  torch::manual_seed(4);
  for (const bool training : {true, false}) {
    const auto x = torch::randn({3, 2, 3, 5}, torch::kDouble);
    const auto s = random_state(2, torch::kDouble);
    const auto f = [&](const std::vector<at::Tensor>& in) {
      // Fresh running statistics per call: the training forward updates them.
      return vn::vn_batch_norm(in[0], in[1], in[2], s.running_mean.clone(), s.running_var.clone(), training, 0.1, 1e-5,
                               nullptr);
    };
    EXPECT_LT(max_gradient_error(f, {x, s.weight, s.bias}), 1e-6) << "training " << training;
  }
}

TEST(VNFusedBatchNorm, ModuleCountsBatchesAndNeedsTwoVectorsPerChannel) {
  vn::VNBatchNorm bn(3);
  bn->train();
  bn->forward(torch::randn({2, 3, 3, 4}));
  bn->forward(torch::randn({2, 3, 3, 4}));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_THROW(bn->forward(torch::randn({1, 3, 3, 1})), UsageError);
  bn->eval();
  EXPECT_EQ(bn->forward(torch::randn({1, 3, 3, 1})).sizes(), (std::vector<int64_t>{1, 3, 3, 1}));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
}

TEST(VNFusedBatchNorm, KeepsDirectionsAndIsRotationEquivariant) {
  torch::manual_seed(5);
  const auto x = torch::randn({4, 3, 3, 30});
  const auto s = random_state(3, torch::kFloat);
  const auto y =
      vn::vn_batch_norm(x, s.weight, s.bias, s.running_mean.clone(), s.running_var.clone(), true, 0.1, 1e-5, nullptr);
  // y = x * (n'/n): parallel to x, so the cross product vanishes.
  const auto cross = torch::cross(x, y, 2);
  EXPECT_LT(cross.abs().max().item<double>() / y.abs().max().item<double>(), 1e-5);
  const auto q = std::get<0>(torch::linalg_qr(torch::randn({3, 3})));
  const auto rotate = [&](const at::Tensor& t) { return torch::einsum("ij,bcjn->bcin", {q, t}); };
  const auto yr = vn::vn_batch_norm(rotate(x), s.weight, s.bias, s.running_mean.clone(), s.running_var.clone(), true,
                                    0.1, 1e-5, nullptr);
  EXPECT_LT(max_diff(yr, rotate(y)), 1e-4);
}

// ---------------------------------------------------------------------------- edge conv mean

struct EdgeInputs {
  at::Tensor towards, centre, dir_towards, dir_centre, idx;
};

// Random per-point products and neighbours; repeated neighbours and a point
// among its own neighbours are left in on purpose (the backward's scatter).
EdgeInputs random_edge_inputs(int64_t b, int64_t c, int64_t n, int64_t k, torch::Dtype dtype) {
  return {torch::randn({b, c, 3, n}, dtype), torch::randn({b, c, 3, n}, dtype), torch::randn({b, c, 3, n}, dtype),
          torch::randn({b, c, 3, n}, dtype), torch::randint(0, n, {b, n, k}, torch::kLong)};
}

TEST(VNFusedEdgeConvMean, EqualsTheComposedVersionInTrainingAndEval) {
  torch::manual_seed(6);
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const bool training : {true, false})
      for (const double slope : {0.2, 0.0}) {
        const auto in = random_edge_inputs(3, 4, 40, 6, dtype);
        const auto s0 = random_state(4, dtype);
        struct Run {
          BatchNormState s;
          std::vector<at::Tensor> x;
          at::Tensor out;
        };
        auto run = [&](bool fused) {
          Run r;
          r.s = {s0.weight.clone().requires_grad_(), s0.bias.clone().requires_grad_(), s0.running_mean.clone(),
                 s0.running_var.clone()};
          for (const auto* t : {&in.towards, &in.centre, &in.dir_towards, &in.dir_centre})
            r.x.push_back(t->clone().requires_grad_());
          r.out = (fused ? vn::edge_conv_mean : vn::edge_conv_mean_composed)(
              r.x[0], r.x[1], r.x[2], r.x[3], in.idx, r.s.weight, r.s.bias, r.s.running_mean, r.s.running_var, training,
              0.1, 1e-5, nullptr, slope);
          return r;
        };
        auto fast = run(true), ref = run(false);
        ASSERT_EQ(fast.out.sizes(), (std::vector<int64_t>{3, 4, 3, 40}));
        const double tol = dtype == torch::kDouble ? 1e-11 : 1e-4;
        const auto trace = std::string(dtype == torch::kDouble ? "float64" : "float32") +
                           (training ? " training" : " eval") + " slope " + std::to_string(slope);
        EXPECT_LT(max_diff(fast.out, ref.out), tol) << trace;
        EXPECT_LT(max_diff(fast.s.running_mean, ref.s.running_mean), tol) << trace;
        EXPECT_LT(max_diff(fast.s.running_var, ref.s.running_var), tol) << trace;
        if (training) {
          EXPECT_GT(max_diff(fast.s.running_mean, s0.running_mean), 1e-3) << trace;
        }
        const auto up = torch::randn_like(ref.out);
        (fast.out * up).sum().backward();
        (ref.out * up).sum().backward();
        for (size_t i = 0; i < 4; ++i)
          EXPECT_LT(precision_difference(fast.x[i].grad(), ref.x[i].grad()), 10 * tol) << trace << " input " << i;
        EXPECT_LT(precision_difference(fast.s.weight.grad(), ref.s.weight.grad()), 100 * tol) << trace;
        EXPECT_LT(precision_difference(fast.s.bias.grad(), ref.s.bias.grad()), 100 * tol) << trace;
      }
}

TEST(VNFusedEdgeConvMean, GradcheckInFloat64) {
  torch::manual_seed(7);
  for (const bool training : {true, false}) {
    const auto in = random_edge_inputs(2, 2, 5, 3, torch::kDouble);
    const auto s = random_state(2, torch::kDouble);
    const auto f = [&](const std::vector<at::Tensor>& x) {
      return vn::edge_conv_mean(x[0], x[1], x[2], x[3], in.idx, x[4], x[5], s.running_mean.clone(),
                                s.running_var.clone(), training, 0.1, 1e-5, nullptr, 0.2);
    };
    EXPECT_LT(max_gradient_error(f, {in.towards, in.centre, in.dir_towards, in.dir_centre, s.weight, s.bias}), 1e-6)
        << "training " << training;
  }
}

TEST(VNFusedEdgeConvMean, BadShapesAndNeighboursAreUsageErrors) {
  const auto in = random_edge_inputs(2, 3, 8, 4, torch::kFloat);
  const auto s = random_state(3, torch::kFloat);
  auto call = [&](const at::Tensor& towards, const at::Tensor& idx, const at::Tensor& weight) {
    return vn::edge_conv_mean(towards, in.centre, in.dir_towards, in.dir_centre, idx, weight, weight, s.running_mean,
                              s.running_var, false, 0.1, 1e-5, nullptr, 0.2);
  };
  EXPECT_EQ(call(in.towards, in.idx, s.weight).sizes(), (std::vector<int64_t>{2, 3, 3, 8}));
  auto bad_idx = in.idx.clone();
  bad_idx[1][7][3] = 8;  // one past the cloud: read unchecked by the kernel otherwise
  EXPECT_THROW(call(in.towards, bad_idx, s.weight), UsageError);
  bad_idx[1][7][3] = -1;
  EXPECT_THROW(call(in.towards, bad_idx, s.weight), UsageError);
  EXPECT_THROW(call(in.towards, in.idx.to(torch::kInt), s.weight), UsageError);
  EXPECT_THROW(call(in.towards, in.idx.slice(1, 0, 7), s.weight), UsageError);
  EXPECT_THROW(call(torch::randn({2, 3, 3, 9}), in.idx, s.weight), UsageError);
  EXPECT_THROW(call(in.towards.to(torch::kDouble), in.idx, s.weight), UsageError);
  EXPECT_THROW(call(in.towards, in.idx, torch::ones({4})), UsageError);
}

}  // namespace
}  // namespace qkv::testing
