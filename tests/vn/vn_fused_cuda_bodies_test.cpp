// qkv's CUDA kernels for the fused VN ops run the functors of
// vn/vn_fused_cuda_bodies.h. Here the same functors run on the CPU, index by
// index, and give the CPU's fused ops' outputs, gradients and batch-norm sums
// (training and eval, a direction shared across channels, repeated
// neighbours), so the kernels' indexing is checked on every machine; a GPU
// adds the launches, block reductions and atomics (cuda_test.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_fused_cuda_bodies.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"
#include "support/tolerance.h"
#include "support/vn_kernel_loops.h"

namespace qkv::testing {
namespace {

namespace bodies = vn::gpu::bodies;

constexpr double kSlope = 0.2, kBatchNormEps = 1e-5;

at::Tensor body_gaussian(std::vector<int64_t> shape, torch::Dtype dtype, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, gen, torch::kDouble).to(dtype);
}

double bound(torch::Dtype dtype) { return dtype == torch::kDouble ? 1e-10 : 1e-4; }

template <typename T>
T* ptr(const at::Tensor& t) {
  return t.data_ptr<T>();
}

// The batch norm of the norms as an affine map per channel, from the sums of
// n and n^2 over `count` vectors (training) or from running statistics
// (eval), as vn_fused.cpp's norm_affine computes it; the tensors stay alive
// while the pointers are used.
struct Affine {
  at::Tensor scale, shift, mean, invstd;
  double count = 0;

  bodies::ChannelPointers pointers(double slope, const at::Tensor* global = nullptr) const {
    return {ptr<double>(scale),
            ptr<double>(shift),
            ptr<double>(mean),
            ptr<double>(invstd),
            global ? ptr<double>(*global) : nullptr,
            scale.size(0),
            count,
            slope,
            vn::kVNEps};
  }
};

Affine affine(const at::Tensor& sums, double count, const at::Tensor& weight, const at::Tensor& bias,
              const at::Tensor& running_mean, const at::Tensor& running_var, bool training) {
  Affine a;
  if (training) {
    a.mean = sums[0] / count;
    a.invstd = ((sums[1] / count - a.mean * a.mean).clamp_min(0) + kBatchNormEps).rsqrt();
  } else {
    a.mean = running_mean.to(torch::kDouble);
    a.invstd = (running_var.to(torch::kDouble) + kBatchNormEps).rsqrt();
  }
  const auto w = weight.detach().to(torch::kDouble), b = bias.detach().to(torch::kDouble);
  a.scale = (w * a.invstd).contiguous();
  a.shift = (b - w * a.mean * a.invstd).contiguous();
  a.mean = a.mean.contiguous(), a.invstd = a.invstd.contiguous();
  a.count = count;
  return a;
}

TEST(VnKernelBodies, LeakyReLUGivesTheFusedOpsValuesAndGradients) {
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const bool shared : {false, true}) {
      AT_DISPATCH_FLOATING_TYPES(dtype, "leaky", [&] {
        const int64_t b = 2, c = 5, m = 30 * 4;
        auto x = body_gaussian({b, c, 3, 30, 4}, dtype, 1).requires_grad_();
        auto d = body_gaussian({b, shared ? 1 : c, 3, 30, 4}, dtype, 2).requires_grad_();
        const auto g = body_gaussian({b, c, 3, 30, 4}, dtype, 3);
        const auto y = vn::vn_leaky_relu(x, d, kSlope);
        (y * g).sum().backward();
        const scalar_t a = static_cast<scalar_t>(1 - kSlope), e = static_cast<scalar_t>(vn::kVNEps);
        auto y_body = torch::empty_like(y), gx = torch::empty_like(y), gd = torch::empty_like(d);
        run_body(bodies::LeakyReLU<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(d), ptr<scalar_t>(y_body), c, d.size(1), m,
                                             a, e},
                 b * c * m);
        run_body(bodies::LeakyReLUBackward<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(d), ptr<scalar_t>(g),
                                                     ptr<scalar_t>(gx), ptr<scalar_t>(gd), c, d.size(1), m, a, e},
                 b * d.size(1) * m);
        const auto what = std::string(c10::toString(dtype)) + (shared ? " shared direction" : "");
        EXPECT_LE(precision_difference(y_body, y.detach()), bound(dtype)) << what;
        EXPECT_LE(precision_difference(gx, x.grad()), bound(dtype)) << what;
        EXPECT_LE(precision_difference(gd, d.grad()), bound(dtype)) << what;
      });
    }
}

TEST(VnKernelBodies, FrameCoordinatesGiveTheFusedOpsValuesAndGradients) {
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    AT_DISPATCH_FLOATING_TYPES(dtype, "frame", [&] {
      const int64_t b = 2, c = 6, m = 25;
      auto x = body_gaussian({b, c, 3, m}, dtype, 4).requires_grad_();
      auto frame = body_gaussian({b, 3, 3, m}, dtype, 5).requires_grad_();
      const auto g = body_gaussian({b, c, 3, m}, dtype, 6);
      const auto y = vn::vn_frame_coordinates(x, frame);
      (y * g).sum().backward();
      auto y_body = torch::empty_like(y), gx = torch::empty_like(y), gf = torch::zeros_like(frame);
      run_body(bodies::FrameCoordinates<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(frame), ptr<scalar_t>(y_body), c, m},
               b * c * m);
      run_body(bodies::FrameCoordinatesBackward<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(frame), ptr<scalar_t>(g),
                                                          ptr<scalar_t>(gx), ptr<scalar_t>(gf), c, m},
               b * m);
      EXPECT_LE(precision_difference(y_body, y.detach()), bound(dtype)) << dtype;
      EXPECT_LE(precision_difference(gx, x.grad()), bound(dtype)) << dtype;
      EXPECT_LE(precision_difference(gf, frame.grad()), bound(dtype)) << dtype;
    });
}

TEST(VnKernelBodies, BatchNormGivesTheFusedOpsSumsValuesAndGradients) {
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const bool training : {true, false})
      AT_DISPATCH_FLOATING_TYPES(dtype, "batch_norm", [&] {
        const int64_t b = 3, c = 5, m = 20;
        auto x = body_gaussian({b, c, 3, m}, dtype, 7).requires_grad_();
        auto weight = body_gaussian({c}, dtype, 8).requires_grad_(),
             bias = body_gaussian({c}, dtype, 9).requires_grad_();
        const auto running_mean = torch::linspace(0.5, 1.5, c, dtype),
                   running_var = torch::linspace(0.25, 2.0, c, dtype);
        const auto g = body_gaussian({b, c, 3, m}, dtype, 10);
        const auto y = vn::vn_batch_norm(x, weight, bias, running_mean.clone(), running_var.clone(), training, 0.1,
                                         kBatchNormEps, nullptr);
        (y * g).sum().backward();
        const auto what = std::string(c10::toString(dtype)) + (training ? " training" : " eval");

        const auto n = vn::vn_norm(x.detach()).to(torch::kDouble);  // [B, C, M]
        const auto sums =
            run_sums(bodies::NormSums<scalar_t>{ptr<scalar_t>(x), c, m, static_cast<scalar_t>(vn::kVNEps * vn::kVNEps)},
                     c, b * m);
        EXPECT_LE(
            scaled_difference(sums, torch::stack({n.sum(at::IntArrayRef{0, 2}), (n * n).sum(at::IntArrayRef{0, 2})})),
            1e-6)
            << what;

        const auto norm = affine(sums, static_cast<double>(b * m), weight, bias, running_mean, running_var, training);
        auto y_body = torch::empty_like(y);
        run_body(bodies::Rescale<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(y_body), norm.pointers(0), c, m}, b * c * m);
        EXPECT_LE(precision_difference(y_body, y.detach()), bound(dtype)) << what;

        const auto grad_sums =
            run_sums(bodies::RescaleBackwardSums<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(g), norm.pointers(0), c, m},
                     c, b * m);
        EXPECT_LE(precision_difference(grad_sums[0].to(dtype), bias.grad()), 10 * bound(dtype)) << what;
        EXPECT_LE(precision_difference(grad_sums[1].to(dtype), weight.grad()), 10 * bound(dtype)) << what;
        auto gx = torch::empty_like(y);
        run_body(bodies::RescaleBackward<scalar_t>{ptr<scalar_t>(x), ptr<scalar_t>(g), ptr<scalar_t>(gx),
                                                   norm.pointers(0, training ? &grad_sums : nullptr), c, m},
                 b * c * m);
        EXPECT_LE(precision_difference(gx, x.grad()), bound(dtype)) << what;
      });
}

TEST(VnKernelBodies, EdgeConvolutionGivesTheFusedOpsSumsValuesAndGradients) {
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const bool training : {true, false})
      AT_DISPATCH_FLOATING_TYPES(dtype, "edge_conv", [&] {
        const int64_t b = 3, c = 4, n = 20, k = 5;
        std::vector<at::Tensor> x;
        for (int64_t s = 0; s < 4; ++s) x.push_back(body_gaussian({b, c, 3, n}, dtype, 11 + s).requires_grad_());
        auto gen = at::make_generator<at::CPUGeneratorImpl>(15);
        const auto idx = torch::randint(0, n, {b, n, k}, gen, torch::kLong);  // repeats and self-loops on purpose
        auto weight = body_gaussian({c}, dtype, 16).requires_grad_(),
             bias = body_gaussian({c}, dtype, 17).requires_grad_();
        const auto running_mean = torch::linspace(0.5, 1.5, c, dtype),
                   running_var = torch::linspace(0.25, 2.0, c, dtype);
        const auto g = body_gaussian({b, c, 3, n}, dtype, 18);
        const auto out = vn::edge_conv_mean(x[0], x[1], x[2], x[3], idx, weight, bias, running_mean.clone(),
                                            running_var.clone(), training, 0.1, kBatchNormEps, nullptr, kSlope);
        (out * g).sum().backward();
        const auto what = std::string(c10::toString(dtype)) + (training ? " training" : " eval");
        const bodies::EdgeRows<scalar_t> rows{ptr<scalar_t>(x[0]),
                                              ptr<scalar_t>(x[1]),
                                              ptr<scalar_t>(x[2]),
                                              ptr<scalar_t>(x[3]),
                                              ptr<int64_t>(idx),
                                              c,
                                              n,
                                              k};

        const auto p = vn::gather_neighbours(x[0].detach(), idx) + x[1].detach().unsqueeze(-1);  // [B, C, 3, N, k]
        const auto norms = vn::vn_norm(p).to(torch::kDouble);
        const auto sums =
            run_sums(bodies::EdgeNormSums<scalar_t>{rows, static_cast<scalar_t>(vn::kVNEps * vn::kVNEps)}, c, b * n);
        EXPECT_LE(scaled_difference(sums, torch::stack({norms.sum(at::IntArrayRef{0, 2, 3}),
                                                        (norms * norms).sum(at::IntArrayRef{0, 2, 3})})),
                  1e-6)
            << what;

        const auto norm =
            affine(sums, static_cast<double>(b * n * k), weight, bias, running_mean, running_var, training);
        auto out_body = torch::empty_like(out);
        run_body(bodies::EdgeForward<scalar_t>{rows, ptr<scalar_t>(out_body), norm.pointers(kSlope)}, b * c * n);
        EXPECT_LE(precision_difference(out_body, out.detach()), bound(dtype)) << what;

        std::vector<at::Tensor> grads;
        for (int s = 0; s < 4; ++s) grads.push_back(torch::zeros_like(x[s]));
        const auto grad_sums =
            run_sums(bodies::EdgeBackwardDirection<scalar_t>{rows, ptr<scalar_t>(g), ptr<scalar_t>(grads[2]),
                                                             ptr<scalar_t>(grads[3]), norm.pointers(kSlope)},
                     c, b * n);
        run_body(bodies::EdgeBackwardFeature<scalar_t>{rows, ptr<scalar_t>(g), ptr<scalar_t>(grads[0]),
                                                       ptr<scalar_t>(grads[1]),
                                                       norm.pointers(kSlope, training ? &grad_sums : nullptr)},
                 b * c * n);
        for (int s = 0; s < 4; ++s)
          EXPECT_LE(precision_difference(grads[s], x[s].grad()), 10 * bound(dtype)) << what << " input " << s;
        EXPECT_LE(precision_difference(grad_sums[0].to(dtype), bias.grad()), 100 * bound(dtype)) << what;
        EXPECT_LE(precision_difference(grad_sums[1].to(dtype), weight.grad()), 100 * bound(dtype)) << what;
      });
}

}  // namespace
}  // namespace qkv::testing
