// qkv on a GPU, each op against its CPU reference: qkv's CUDA kernels (kNN,
// FPS, and the fused VN ops: leaky ReLU, batch norm of the norms, the edge
// convolution, frame coordinates) give the CPU kernels' indices, outputs and
// gradients and pass gradcheck there; the ops that run composed ATen code on
// a GPU (VN linear, edge features) and attention (PyTorch's fused kernels,
// with qkv's masks) give the CPU's outputs and gradients; a VN-DGCNN training
// step matches the CPU's, VNT-Net's logits stay invariant under rotation
// there, and its weights go GPU -> file -> CPU -> GPU bit for bit; an NCCL
// group of one rank runs every collective the trainer uses.
// Every test skips where no GPU is visible (this machine); scripts/gpu-check
// runs them on one.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <limits>
#include <map>

#include "qkv/attention/sdpa.h"
#include "qkv/core/errors.h"
#include "qkv/cuda/point_kernels.h"
#include "qkv/distributed/process_group.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/runtime/build_parts.h"
#include "qkv/runtime/runtime.h"
#include "qkv/train/checkpoint.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"
#include "support/clouds_with_ties.h"
#include "support/gradcheck.h"
#include "support/haar_rotation.h"
#include "support/test_files.h"
#include "support/tolerance.h"

namespace {

using namespace qkv;
using qkv::testing::clouds_with_ties;

#define QKV_REQUIRE_GPU()                                               \
  do {                                                                  \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible"; \
  } while (0)

#define QKV_REQUIRE_CUDA_KERNELS()                                                               \
  do {                                                                                           \
    QKV_REQUIRE_GPU();                                                                           \
    if (!cuda::kernels_built()) GTEST_SKIP() << "this build has no CUDA kernels (QKV_CUDA off)"; \
  } while (0)

const torch::Device kGpu(torch::kCUDA, 0);

at::Tensor gaussian(std::vector<int64_t> shape, torch::Dtype dtype, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, gen, torch::kDouble).to(dtype);
}

TEST(CudaDevice, ParseDeviceRefusesWhatIsNotThere) {
  if (torch::cuda::is_available()) {
    const auto visible = static_cast<int64_t>(torch::cuda::device_count());
    EXPECT_TRUE(parse_device("cuda").is_cuda());
    EXPECT_THROW(parse_device("cuda:" + std::to_string(visible)), UsageError);
  } else {
    EXPECT_THROW(parse_device("cuda"), UsageError);
    EXPECT_THROW(parse_device("cuda:0"), UsageError);
  }
}

// The bundle's kernels are built for the GPU the check runs on (sm_90: H100,
// H200), so every kernel test below runs qkv's kernels, not the fallback.
TEST(CudaKernels, TheKernelsHaveCodeForThisGpu) {
  QKV_REQUIRE_CUDA_KERNELS();
  const auto info = cuda::gpu_info(0);
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(cuda::kernels_run_on(kGpu)) << info->name << " (compute capability " << info->major << "." << info->minor
                                          << ") with kernels built for " << cuda::built_architectures();
  EXPECT_TRUE(cuda::kernels_run_on(torch::Device(torch::kCUDA))) << "a bare cuda is the current GPU";
  EXPECT_FALSE(cuda::kernels_run_on(torch::Device(torch::kCPU)));
  EXPECT_GT(info->memory_bytes, 0);
}

TEST(CudaKernels, KnnGivesTheCpuKernelsIndices) {
  QKV_REQUIRE_CUDA_KERNELS();
  for (const auto dtype : {torch::kFloat, torch::kDouble})
    for (const int64_t dims : {3, 6})
      for (const int64_t k : {int64_t{1}, int64_t{20}, cuda::kKnnMaxK}) {
        const auto x = clouds_with_ties(2, 1000, dims, dtype, 7 + dims + k);
        const auto expected = vn::knn_indices(x, k);
        const auto got = vn::knn_indices(x.to(kGpu), k);
        ASSERT_TRUE(got.is_cuda());
        EXPECT_TRUE(torch::equal(got.cpu(), expected)) << "dtype " << dtype << " dims " << dims << " k " << k;
      }
}

TEST(CudaKernels, KnnBeyondTheKernelStillFindsTheNearest) {
  QKV_REQUIRE_GPU();
  // k > kKnnMaxK and feature spaces (D = 3C) take the GEMM + topk path: the
  // same neighbour distances as the CPU (indices may differ among ties).
  const auto x = gaussian({2, 24, 300}, torch::kDouble, 5);
  for (const int64_t k : {int64_t{16}, cuda::kKnnMaxK + 8}) {
    const auto got = vn::knn_indices(x.to(kGpu), k).cpu();
    const auto expected = vn::knn_indices(x, k);
    auto distances = [&](const at::Tensor& idx) {
      const auto p = x.transpose(1, 2);  // [B, N, D]
      const auto nb = p.unsqueeze(1)
                          .expand({2, 300, 300, 24})
                          .gather(2, idx.unsqueeze(-1).expand({2, 300, k, 24}));  // [B, N, k, D]
      return (nb - p.unsqueeze(2)).pow(2).sum(-1);
    };
    EXPECT_LE(qkv::testing::max_abs_difference(distances(got), distances(expected)), 1e-9) << "k " << k;
    EXPECT_TRUE(torch::equal(got.select(2, 0), torch::arange(300).expand({2, 300}))) << "itself first";
  }
}

TEST(CudaKernels, FarthestPointSampleGivesTheCpuKernelsIndices) {
  QKV_REQUIRE_CUDA_KERNELS();
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto points = clouds_with_ties(3, 2000, 3, dtype, 11).transpose(1, 2).contiguous();  // [B, N, 3]
    EXPECT_TRUE(torch::equal(pointcloud::farthest_point_sample(points.to(kGpu), 512, 17).cpu(),
                             pointcloud::farthest_point_sample(points, 512, 17)));
    EXPECT_TRUE(torch::equal(pointcloud::farthest_point_sample(points[0].to(kGpu), 2000, 0).cpu(),
                             pointcloud::farthest_point_sample(points[0], 2000, 0)))
        << "every point, one cloud [N, 3]";
  }
  const auto one = torch::zeros({1, 5, 3});
  EXPECT_TRUE(torch::equal(pointcloud::farthest_point_sample(one.to(kGpu), 5, 2).cpu(),
                           pointcloud::farthest_point_sample(one, 5, 2)))
      << "all points the same: ties to the lowest index";
}

// Forward and the gradient of a fixed random projection, GPU against CPU.
template <typename Op>
void expect_same_on_gpu(const char* what, Op op, std::vector<at::Tensor> inputs, double float64_bound) {
  std::vector<at::Tensor> cpu_in, gpu_in;
  for (const auto& t : inputs) {
    cpu_in.push_back(t.clone().requires_grad_(t.is_floating_point()));
    gpu_in.push_back(t.to(kGpu).requires_grad_(t.is_floating_point()));
  }
  const auto cpu_out = op(cpu_in);
  const auto gpu_out = op(gpu_in);
  ASSERT_TRUE(gpu_out.is_cuda()) << what;
  const auto probe = gaussian(cpu_out.sizes().vec(), cpu_out.scalar_type(), 99);
  (cpu_out * probe).sum().backward();
  (gpu_out * probe.to(kGpu)).sum().backward();
  const bool f64 = cpu_out.scalar_type() == torch::kDouble;
  const double bound = f64 ? float64_bound : 1e-4;
  EXPECT_LE(qkv::testing::precision_difference(gpu_out.cpu(), cpu_out), bound) << what << " forward";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!cpu_in[i].grad().defined()) continue;
    EXPECT_LE(qkv::testing::precision_difference(gpu_in[i].grad().cpu(), cpu_in[i].grad()), bound)
        << what << " gradient of input " << i;
  }
}

TEST(CudaOps, VectorNeuronOpsMatchTheCpu) {
  QKV_REQUIRE_GPU();
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto x = gaussian({2, 6, 3, 50}, dtype, 1);
    const auto d = gaussian({2, 6, 3, 50}, dtype, 2);
    expect_same_on_gpu(
        "vn_leaky_relu", [](auto& in) { return vn::vn_leaky_relu(in[0], in[1], 0.2); }, {x, d}, 1e-10);
    const auto w = gaussian({4, 6}, dtype, 3);
    expect_same_on_gpu(
        "vn_linear", [](auto& in) { return vn::vn_linear(in[0], in[1]); }, {x, w}, 1e-10);
    const auto idx = vn::knn_indices(gaussian({2, 3, 50}, dtype, 4), 8);
    expect_same_on_gpu(
        "edge_features", [](auto& in) { return vn::edge_features(in[0], in[1], true); }, {x, idx}, 1e-12);
    const auto gamma = gaussian({6}, dtype, 5), beta = gaussian({6}, dtype, 6);
    expect_same_on_gpu(
        "vn_batch_norm",
        [](auto& in) {
          auto mean = torch::zeros({in[1].size(0)}, in[1].options()).detach();
          auto var = torch::ones({in[1].size(0)}, in[1].options()).detach();
          return vn::vn_batch_norm(in[0], in[1], in[2], mean, var, true, 0.1, 1e-5, nullptr);
        },
        {x, gamma, beta}, 1e-9);
  }
}

// The node of a fused op's output: its autograd Function's name.
std::string node_of(const at::Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "(no node)"; }

// On a GPU the fused VN ops run qkv's CUDA kernels (vn_fused_cuda.cu), whose
// per-vector math is the CPU loops' (vn/vn_math.h): outputs, gradients and
// running statistics match the CPU's fused kernels, with a direction shared
// across channels, in eval mode, and with repeated neighbours; the running
// statistics travel in the compared output, after the op's own.
TEST(CudaKernels, FusedVectorNeuronOpsMatchTheCpuKernels) {
  QKV_REQUIRE_CUDA_KERNELS();
  auto fused_on_gpu = [](const at::Tensor& out, const char* function) {
    if (out.is_cuda()) {
      EXPECT_NE(node_of(out).find(function), std::string::npos) << node_of(out);
    }
  };
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const bool shared : {false, true}) {
      const auto x = gaussian({2, 6, 3, 50, 4}, dtype, 11), d = gaussian({2, shared ? 1 : 6, 3, 50, 4}, dtype, 12);
      expect_same_on_gpu(
          shared ? "vn_leaky_relu, shared direction" : "vn_leaky_relu",
          [&](auto& in) {
            const auto y = vn::vn_leaky_relu(in[0], in[1], 0.2);
            fused_on_gpu(y, "VNLeakyReLUFunction");
            return y;
          },
          {x, d}, 1e-10);
    }
    expect_same_on_gpu(
        "vn_frame_coordinates",
        [&](auto& in) {
          const auto y = vn::vn_frame_coordinates(in[0], in[1]);
          fused_on_gpu(y, "VNFrameCoordinatesFunction");
          return y;
        },
        {gaussian({2, 6, 3, 50}, dtype, 13), gaussian({2, 3, 3, 50}, dtype, 14)}, 1e-10);
    for (const bool training : {true, false}) {
      // Running statistics that eval mode uses and training updates.
      auto statistics = [](const at::Tensor& like, int64_t c) {
        return std::make_pair(torch::linspace(0.5, 1.5, c, like.options()).detach(),
                              torch::linspace(0.25, 2.0, c, like.options()).detach());
      };
      expect_same_on_gpu(
          training ? "vn_batch_norm, training" : "vn_batch_norm, eval",
          [&](auto& in) {
            auto [mean, var] = statistics(in[1], in[1].size(0));
            const auto y = vn::vn_batch_norm(in[0], in[1], in[2], mean, var, training, 0.1, 1e-5, nullptr);
            fused_on_gpu(y, "VNBatchNormFunction");
            return torch::cat({y.flatten(), mean, var});
          },
          {gaussian({3, 6, 3, 40}, dtype, 15), gaussian({6}, dtype, 16), gaussian({6}, dtype, 17)}, 1e-9);
      const int64_t n = 40;
      auto gen = at::make_generator<at::CPUGeneratorImpl>(18);
      const auto idx = torch::randint(0, n, {3, n, 6}, gen, torch::kLong);  // repeats and self-loops on purpose
      expect_same_on_gpu(
          training ? "edge_conv_mean, training" : "edge_conv_mean, eval",
          [&](auto& in) {
            auto [mean, var] = statistics(in[5], in[5].size(0));
            const auto y = vn::edge_conv_mean(in[0], in[1], in[2], in[3], in[4], in[5], in[6], mean, var, training, 0.1,
                                              1e-5, nullptr, 0.2);
            fused_on_gpu(y, "EdgeConvMeanFunction");
            return torch::cat({y.flatten(), mean, var});
          },
          {gaussian({3, 5, 3, n}, dtype, 19), gaussian({3, 5, 3, n}, dtype, 20), gaussian({3, 5, 3, n}, dtype, 21),
           gaussian({3, 5, 3, n}, dtype, 22), idx, gaussian({5}, dtype, 23), gaussian({5}, dtype, 24)},
          1e-9);
    }
  }
}

// The CUDA kernels' gradients against central differences, on the GPU, in
// float64 (small sizes: every element is perturbed).
TEST(CudaKernels, FusedVectorNeuronOpsPassGradcheckOnTheGpu) {
  QKV_REQUIRE_CUDA_KERNELS();
  auto on_gpu = [](std::vector<int64_t> shape, int64_t seed) { return gaussian(shape, torch::kDouble, seed).to(kGpu); };
  EXPECT_LT(qkv::testing::max_gradient_error([](const auto& in) { return vn::vn_leaky_relu(in[0], in[1], 0.2); },
                                             {on_gpu({2, 3, 3, 5}, 1), on_gpu({2, 1, 3, 5}, 2)}),
            1e-6);
  EXPECT_LT(qkv::testing::max_gradient_error([](const auto& in) { return vn::vn_frame_coordinates(in[0], in[1]); },
                                             {on_gpu({2, 2, 3, 4}, 3), on_gpu({2, 3, 3, 4}, 4)}),
            1e-6);
  for (const bool training : {true, false}) {
    const auto mean = on_gpu({2}, 5).abs(), var = on_gpu({2}, 6).abs() + 0.5;
    EXPECT_LT(qkv::testing::max_gradient_error(
                  [&](const auto& in) {
                    return vn::vn_batch_norm(in[0], in[1], in[2], mean.clone(), var.clone(), training, 0.1, 1e-5,
                                             nullptr);
                  },
                  {on_gpu({2, 2, 3, 4}, 7), on_gpu({2}, 8), on_gpu({2}, 9)}),
              1e-6)
        << "vn_batch_norm, training " << training;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(10);
    const auto idx = torch::randint(0, 5, {2, 5, 3}, gen, torch::kLong).to(kGpu);
    EXPECT_LT(qkv::testing::max_gradient_error(
                  [&](const auto& in) {
                    return vn::edge_conv_mean(in[0], in[1], in[2], in[3], idx, in[4], in[5], mean.clone(), var.clone(),
                                              training, 0.1, 1e-5, nullptr, 0.2);
                  },
                  {on_gpu({2, 2, 3, 5}, 11), on_gpu({2, 2, 3, 5}, 12), on_gpu({2, 2, 3, 5}, 13),
                   on_gpu({2, 2, 3, 5}, 14), on_gpu({2}, 15), on_gpu({2}, 16)}),
              1e-6)
        << "edge_conv_mean, training " << training;
  }
}

TEST(CudaOps, AttentionMatchesTheCpuWithMasks) {
  QKV_REQUIRE_GPU();
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto q = gaussian({2, 3, 70, 16}, dtype, 1), k = gaussian({2, 3, 90, 16}, dtype, 2),
               v = gaussian({2, 3, 90, 8}, dtype, 3);
    auto pad = torch::zeros({2, 90}, torch::kBool);
    pad.narrow(1, 80, 10).fill_(true);
    for (const bool causal : {false, true})
      for (const bool padded : {false, true}) {
        expect_same_on_gpu(
            "attention",
            [&](auto& in) {
              attention::SdpaOptions options;
              options.causal = causal;
              if (padded) options.key_padding_mask = pad.to(in[0].device());
              return attention::scaled_dot_product_attention(in[0], in[1], in[2], options).output;
            },
            {q, k, v}, 1e-10);
      }
  }
}

// On a GPU attention runs PyTorch's fused kernels (where the build has them),
// held to qkv's masks: end-aligned causal over more keys than queries, a bool
// mask and a float mask with fully masked rows (0, no gradient); a
// second-order gradient; half and bfloat16 (the flash kernels) within their
// precision of the CPU's float32.
TEST(CudaOps, AttentionTakesPyTorchsFusedKernelsWithQkvsMasks) {
  QKV_REQUIRE_GPU();
  if (!attention::torch_attention_available()) GTEST_SKIP() << "this build's LibTorch has no fused attention";
  const auto probe = gaussian({1, 1, 4, 8}, torch::kFloat, 1).to(kGpu);
  EXPECT_EQ(attention::resolve_backend(probe, probe, probe, {}), attention::AttentionBackend::Torch);
  auto bool_mask = torch::rand({2, 1, 64, 96}) < 0.7;
  bool_mask[0][0][5].fill_(false);
  auto float_mask = gaussian({1, 4, 64, 96}, torch::kFloat, 2);
  float_mask[0][2][9].fill_(-std::numeric_limits<float>::infinity());
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const auto q = gaussian({2, 4, 64, 32}, dtype, 3), k = gaussian({2, 4, 96, 32}, dtype, 4),
               v = gaussian({2, 4, 96, 16}, dtype, 5);
    for (const int which : {0, 1, 2})
      expect_same_on_gpu(
          which == 0   ? "attention, causal over more keys"
          : which == 1 ? "attention, bool mask"
                       : "attention, float mask",
          [&](auto& in) {
            attention::SdpaOptions options;
            options.causal = which != 1;
            if (which == 1) options.bool_mask = bool_mask.to(in[0].device());
            if (which == 2) options.float_mask = float_mask.to(in[0].device(), in[0].scalar_type());
            return attention::scaled_dot_product_attention(in[0], in[1], in[2], options).output;
          },
          {q, k, v}, 1e-10);
  }
  const auto q = gaussian({2, 8, 256, 64}, torch::kFloat, 6), k = gaussian({2, 8, 256, 64}, torch::kFloat, 7),
             v = gaussian({2, 8, 256, 64}, torch::kFloat, 8);
  attention::SdpaOptions causal;
  causal.causal = true;
  // A gradient penalty (create_graph) in float32, which PyTorch's
  // memory-efficient kernel serves and cannot differentiate twice: qkv
  // differentiates the naive formula there, as on the CPU.
  auto penalty_gradients = [&](const torch::Device& device) {
    std::vector<at::Tensor> in;
    for (const auto& t : {q, k, v}) in.push_back(t.narrow(2, 0, 32).to(device).requires_grad_());
    const auto out = attention::scaled_dot_product_attention(in[0], in[1], in[2], causal).output;
    const auto first = torch::autograd::grad({out.pow(2).sum()}, in, {}, /*retain_graph=*/true, /*create_graph=*/true);
    auto second = torch::autograd::grad({first[0].pow(2).sum() + first[1].pow(2).sum() + first[2].pow(2).sum()}, in);
    for (auto& g : second) g = g.cpu();
    return second;
  };
  const auto on_cpu = penalty_gradients(torch::kCPU), on_gpu = penalty_gradients(kGpu);
  for (size_t i = 0; i < on_cpu.size(); ++i)
    EXPECT_LE(qkv::testing::scaled_difference(on_gpu[i], on_cpu[i]), 1e-4) << "second-order gradient of input " << i;
  const auto reference = attention::scaled_dot_product_attention(q, k, v, causal).output;
  for (const auto dtype : {torch::kHalf, torch::kBFloat16}) {
    const auto out =
        attention::scaled_dot_product_attention(q.to(kGpu, dtype), k.to(kGpu, dtype), v.to(kGpu, dtype), causal).output;
    EXPECT_LE(qkv::testing::scaled_difference(out.cpu().to(torch::kFloat), reference),
              dtype == torch::kHalf ? 5e-3 : 3e-2)
        << c10::toString(dtype);
  }
}

TEST(CudaModels, VntNetIsInvariantOnTheGpuAndMatchesTheCpu) {
  QKV_REQUIRE_GPU();
  torch::manual_seed(11);
  const nlohmann::json options = {{"classes", 5}, {"linear_dim", 8}, {"heads", 3}, {"head_dim", 4}, {"k", 8}};
  auto model = models::find_model("vnt").make(options);
  model->to(torch::kDouble);
  model->eval();
  torch::NoGradGuard no_grad;
  data::Batch batch;
  batch.inputs["points"] = gaussian({2, 3, 64}, torch::kDouble, 3);
  const auto cpu_logits = model->forward(batch);
  model->to(kGpu);
  data::Batch on_gpu;
  on_gpu.inputs["points"] = batch.inputs["points"].to(kGpu);
  const auto logits = model->forward(on_gpu);
  EXPECT_LE(qkv::testing::max_abs_difference(logits.cpu(), cpu_logits), 1e-9);
  for (int64_t s = 1; s <= 3; ++s) {
    data::Batch rotated;
    rotated.inputs["points"] = torch::matmul(qkv::testing::haar_rotation(s).to(kGpu), on_gpu.inputs["points"]);
    EXPECT_LE(qkv::testing::max_abs_difference(model->forward(rotated).cpu(), cpu_logits), 1e-9) << "rotation " << s;
  }
}

// A VN-DGCNN training step on the GPU, where every fused op runs qkv's CUDA
// kernels (batch statistics included), gives the CPU's logits and parameter
// gradients.
TEST(CudaModels, VnDgcnnTrainingStepMatchesTheCpu) {
  QKV_REQUIRE_CUDA_KERNELS();
  torch::manual_seed(12);
  auto model = models::find_model("vn-dgcnn").make({{"classes", 5}, {"k", 8}, {"dropout", 0.0}});
  model->to(torch::kDouble);
  model->train();
  data::Batch batch;
  batch.inputs["points"] = gaussian({3, 3, 48}, torch::kDouble, 4);
  const auto probe = gaussian({3, 5}, torch::kDouble, 5);
  auto step = [&](const data::Batch& b) {
    model->zero_grad();
    const auto logits = model->forward(b);
    (logits * probe.to(logits.device())).sum().backward();
    std::map<std::string, at::Tensor> grads;
    for (const auto& p : model->named_parameters()) grads[p.key()] = p.value().grad().cpu();
    return std::make_pair(logits.cpu(), grads);
  };
  const auto [cpu_logits, cpu_grads] = step(batch);
  model->to(kGpu);
  data::Batch on_gpu;
  on_gpu.inputs["points"] = batch.inputs["points"].to(kGpu);
  const auto [gpu_logits, gpu_grads] = step(on_gpu);
  EXPECT_LE(qkv::testing::max_abs_difference(gpu_logits, cpu_logits), 1e-9);
  for (const auto& [name, grad] : cpu_grads)
    EXPECT_LE(qkv::testing::max_abs_difference(gpu_grads.at(name), grad), 1e-8 * (1 + grad.abs().max().item<double>()))
        << name;
}

TEST(CudaModels, CheckpointsWrittenOnTheGpuLoadOnTheCpuBitForBit) {
  QKV_REQUIRE_GPU();
  const nlohmann::json options = {{"classes", 5}, {"linear_dim", 8}, {"heads", 2}, {"head_dim", 4}};
  torch::manual_seed(5);
  auto model = models::find_model("vnt").make(options);
  model->to(kGpu);
  const auto path = qkv::testing::temp_path("gpu.ckpt");
  train::save_checkpoint(path, *model, nullptr, train::TrainState{});
  torch::manual_seed(6);
  auto on_cpu = models::find_model("vnt").make(options);
  train::load_checkpoint(path, *on_cpu, nullptr);
  auto back_on_gpu = models::find_model("vnt").make(options);
  back_on_gpu->to(kGpu);
  train::load_checkpoint(path, *back_on_gpu, nullptr);
  std::filesystem::remove(path);
  const auto gpu_params = model->named_parameters(), cpu_params = on_cpu->named_parameters(),
             again = back_on_gpu->named_parameters();
  ASSERT_EQ(gpu_params.size(), cpu_params.size());
  for (const auto& p : gpu_params) {
    ASSERT_TRUE(cpu_params[p.key()].device().is_cpu()) << p.key();
    EXPECT_TRUE(torch::equal(p.value().cpu(), cpu_params[p.key()])) << p.key();
    ASSERT_TRUE(again[p.key()].is_cuda()) << p.key();
    EXPECT_TRUE(torch::equal(again[p.key()], p.value())) << p.key();
  }
}

// NCCL's group as the trainer uses it, at the one rank a one-GPU machine can
// hold (NCCL refuses two ranks on one GPU): the collectives on this GPU, the
// CPU tensors the trainer hands it (sums, flags, checkpoint bytes) carried
// there and back, the bucketed gradient sum, and a clean shutdown.
TEST(CudaDistributed, AnNcclGroupRunsEveryCollectiveOnThisGpu) {
  QKV_REQUIRE_GPU();
  if (!built_with(Part::Nccl)) GTEST_SKIP() << "this build has no NCCL";
  distributed::ParallelOptions one;
  one.master = "127.0.0.1:" + std::to_string(21000 + ::getpid() % 5000);
  one.timeout_seconds = 60;
  one.backend = "nccl";
  distributed::ProcessGroup group(one, kGpu);
  EXPECT_EQ(group.backend(), "nccl");
  auto on_gpu = torch::arange(6, torch::TensorOptions(torch::kDouble).device(kGpu));
  group.all_reduce_sum(on_gpu, "test");
  EXPECT_TRUE(torch::equal(on_gpu.cpu(), torch::arange(6, torch::kDouble)));
  auto on_cpu = torch::tensor({1.5f, -2.0f});
  group.all_reduce_max(on_cpu, "test");
  ASSERT_TRUE(on_cpu.device().is_cpu());
  EXPECT_TRUE(torch::equal(on_cpu, torch::tensor({1.5f, -2.0f})));
  const auto gathered = group.all_gather(torch::tensor({7}, torch::kLong), "test");
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(gathered[0].device().is_cpu());
  EXPECT_EQ(gathered[0].item<int64_t>(), 7);
  EXPECT_EQ(group.broadcast_bytes(std::string("ckpt\0bytes", 10)), std::string("ckpt\0bytes", 10));
  EXPECT_TRUE(group.any(true, "test"));
  EXPECT_FALSE(group.any(false, "test"));
  auto w = torch::randn({3, 4}, torch::TensorOptions().device(kGpu)).requires_grad_();
  auto b = torch::randn({4}, torch::TensorOptions().device(kGpu)).requires_grad_();
  w.mutable_grad() = torch::full_like(w, 2.0);
  group.all_reduce_gradients({w, b}, /*bucket_bytes=*/16);  // b has no gradient: it gets zeros
  EXPECT_TRUE(torch::equal(w.grad(), torch::full_like(w, 2.0)));
  ASSERT_TRUE(b.grad().defined());
  EXPECT_TRUE(torch::equal(b.grad(), torch::zeros_like(b)));
  group.barrier("end of test");
}

}  // namespace
