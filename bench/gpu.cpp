// qkv on a GPU against the plain PyTorch formulation of each op on the same
// GPU and against qkv's own CPU kernel, in one run (scripts/gpu-check runs it;
// docs/gpu.md has its numbers):
//   knn      k = 20 on xyz: B 16 x N 1,024 and B 1 x N 8,192 (qkv's kernel;
//            PyTorch: the expanded distances by one batched matmul + topk)
//   fps      B 16 x 10,000 -> 1,024 points (qkv's kernel; PyTorch: the
//            incremental min-distance loop of m tensor ops)
//   attention  B 16, H 8, N 1,024, d 64, forward + backward: what a GPU
//            takes (Auto: PyTorch's fused kernels where the build has them)
//            against PyTorch's own at::scaled_dot_product_attention call
//            (LibTorch 2.x) and the naive formula (matmul, softmax, matmul),
//            causal and not
//   vn ops   forward + backward of the fused VN ops at VN-DGCNN's sizes
//            (B 16, N 1,024, k 20): the edge convolution (C 21), leaky
//            ReLU and batch norm (C 64), frame coordinates (C 682): qkv's
//            kernel against the composed PyTorch formulation on the same GPU
//            (and qkv's CPU kernel)
//   models   VNT-Net and VN-DGCNN training steps (forward, backward, Adam) at
//            batch 16, N = 1,024, paper settings; a ModelNet40 epoch
//            (9,843 shapes) extrapolated from the step time
// Prints one JSON object per case, then a line "gpu bench: done".
//   build-pip/bench_gpu [repeats]
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/attention/sdpa.h"
#include "qkv/cuda/point_kernels.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_layers.h"
#include "qkv/vn/vn_ops.h"

using namespace qkv;

namespace {

const torch::Device kGpu(torch::kCUDA, 0);

// Median milliseconds of `repeats` calls after one warm-up, each ended by a
// device synchronisation (a GPU call returns before its kernels finish).
double median_ms(const std::function<void()>& call, int repeats, bool gpu) {
  call();
  if (gpu) torch::cuda::synchronize();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    if (gpu) torch::cuda::synchronize();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void report(nlohmann::json row) {
  std::printf("%s\n", row.dump().c_str());
  std::fflush(stdout);
}

// PyTorch's usual kNN: |a|^2 + |b|^2 - 2ab by one batched matmul, then topk.
at::Tensor knn_pytorch(const at::Tensor& x, int64_t k) {  // x [B, D, N]
  const auto inner = -2 * torch::matmul(x.transpose(2, 1), x);
  const auto sq = (x * x).sum(1, true);
  return std::get<1>((-sq - inner - sq.transpose(2, 1)).topk(k, -1));
}

// PyTorch's usual FPS: m steps of tensor ops, each a distance update and an argmax.
at::Tensor fps_pytorch(const at::Tensor& p, int64_t m) {  // p [B, N, 3]
  const int64_t b = p.size(0), n = p.size(1);
  auto out = torch::zeros({b, m}, p.options().dtype(torch::kLong));
  auto dist = torch::full({b, n}, 1e10, p.options());
  auto farthest = torch::zeros({b}, p.options().dtype(torch::kLong));
  const auto batch = torch::arange(b, p.options().dtype(torch::kLong));
  for (int64_t i = 0; i < m; ++i) {
    out.select(1, i).copy_(farthest);
    const auto centre = p.index({batch, farthest}).view({b, 1, 3});
    dist = torch::minimum(dist, (p - centre).pow(2).sum(-1));
    farthest = dist.argmax(-1);
  }
  return out;
}

void bench_knn(int repeats) {
  for (const auto& [b, n] : std::vector<std::pair<int64_t, int64_t>>{{16, 1024}, {1, 8192}}) {
    const auto x_cpu = torch::randn({b, 3, n});
    const auto x = x_cpu.to(kGpu);
    report({{"case", "knn"},
            {"b", b},
            {"n", n},
            {"k", 20},
            {"qkv_gpu_ms", median_ms([&] { vn::knn_indices(x, 20); }, repeats, true)},
            {"pytorch_gpu_ms", median_ms([&] { knn_pytorch(x, 20); }, repeats, true)},
            {"qkv_cpu_ms", median_ms([&] { vn::knn_indices(x_cpu, 20); }, std::min(repeats, 3), false)},
            {"kernel", cuda::kernels_run_on(kGpu) ? "qkv" : "composed"}});
  }
}

void bench_fps(int repeats) {
  const auto p_cpu = torch::randn({16, 10000, 3});
  const auto p = p_cpu.to(kGpu);
  report(
      {{"case", "fps"},
       {"b", 16},
       {"n", 10000},
       {"m", 1024},
       {"qkv_gpu_ms", median_ms([&] { pointcloud::farthest_point_sample(p, 1024); }, repeats, true)},
       {"pytorch_gpu_ms", median_ms([&] { fps_pytorch(p, 1024); }, repeats, true)},
       {"qkv_cpu_ms", median_ms([&] { pointcloud::farthest_point_sample(p_cpu, 1024); }, std::min(repeats, 3), false)},
       {"kernel", cuda::kernels_run_on(kGpu) ? "qkv" : "cpu copy"}});
}

void bench_attention(int repeats) {
  auto q = torch::randn({16, 8, 1024, 64}, torch::TensorOptions(kGpu)).requires_grad_();
  auto k = torch::randn({16, 8, 1024, 64}, torch::TensorOptions(kGpu)).requires_grad_();
  auto v = torch::randn({16, 8, 1024, 64}, torch::TensorOptions(kGpu)).requires_grad_();
  for (const bool causal : {false, true}) {
    attention::SdpaOptions chosen, naive;
    chosen.causal = naive.causal = causal;
    naive.backend = attention::AttentionBackend::Naive;
    auto step = [&](const attention::SdpaOptions& o) {
      return [&] {
        const auto out = attention::scaled_dot_product_attention(q, k, v, o).output;
        out.sum().backward();
      };
    };
    nlohmann::json row = {{"case", causal ? "attention_fwd_bwd_causal" : "attention_fwd_bwd"},
                          {"b", 16},
                          {"h", 8},
                          {"n", 1024},
                          {"d", 64},
                          {"backend", attention::backend_name(attention::resolve_backend(q, k, v, chosen))},
                          {"qkv_gpu_ms", median_ms(step(chosen), repeats, true)},
                          {"naive_gpu_ms", median_ms(step(naive), repeats, true)}};
#if TORCH_VERSION_MAJOR >= 2
    // PyTorch's own call, without qkv's mask handling around it.
    row["pytorch_gpu_ms"] =
        median_ms([&] { at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal).sum().backward(); }, repeats, true);
#endif
    report(row);
  }
}

// One op's forward and backward, fused and composed, on the GPU, and fused
// on the CPU; `inputs` are made on the CPU and copied.
using VnOp = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

void bench_vn_op(const char* name, const VnOp& fused, const VnOp& composed, const std::vector<at::Tensor>& inputs,
                 int repeats) {
  std::vector<at::Tensor> cpu, gpu;
  for (const auto& t : inputs) {
    cpu.push_back(t.clone().requires_grad_(t.is_floating_point()));
    gpu.push_back(t.to(kGpu).requires_grad_(t.is_floating_point()));
  }
  auto step = [](const VnOp& op, const std::vector<at::Tensor>& in) { return [&op, &in] { op(in).sum().backward(); }; };
  report({{"case", std::string(name) + "_fwd_bwd"},
          {"shape", inputs[0].sizes().vec()},
          {"qkv_gpu_ms", median_ms(step(fused, gpu), repeats, true)},
          {"pytorch_gpu_ms", median_ms(step(composed, gpu), repeats, true)},
          {"qkv_cpu_ms", median_ms(step(fused, cpu), std::min(repeats, 3), false)},
          {"kernel", cuda::kernels_run_on(kGpu) ? "qkv" : "composed"}});
}

void bench_vn_ops(int repeats) {
  const int64_t b = 16, n = 1024, k = 20;
  const auto idx = torch::randint(0, n, {b, n, k}, torch::kLong);
  auto statistics = [](const std::vector<at::Tensor>& in, size_t weight) {
    const auto c = in[weight].size(0);
    return std::make_pair(torch::zeros({c}, in[weight].options()).detach(),
                          torch::ones({c}, in[weight].options()).detach());
  };
  auto edge = [&](bool fused) -> VnOp {
    return [fused, statistics](const std::vector<at::Tensor>& in) {
      auto [mean, var] = statistics(in, 5);
      return (fused ? vn::edge_conv_mean : vn::edge_conv_mean_composed)(in[0], in[1], in[2], in[3], in[4], in[5], in[6],
                                                                        mean, var, true, 0.1, 1e-5, nullptr, 0.2);
    };
  };
  const int64_t c_edge = 21;
  bench_vn_op("edge_conv_mean", edge(true), edge(false),
              {torch::randn({b, c_edge, 3, n}), torch::randn({b, c_edge, 3, n}), torch::randn({b, c_edge, 3, n}),
               torch::randn({b, c_edge, 3, n}), idx, torch::ones({c_edge}), torch::zeros({c_edge})},
              repeats);
  bench_vn_op(
      "vn_leaky_relu", [](const auto& in) { return vn::vn_leaky_relu(in[0], in[1], 0.2); },
      [](const auto& in) { return vn::vn_leaky_relu_composed(in[0], in[1], 0.2); },
      {torch::randn({b, 64, 3, n}), torch::randn({b, 64, 3, n})}, repeats);
  auto batch_norm = [&](bool fused) -> VnOp {
    return [fused, statistics](const std::vector<at::Tensor>& in) {
      auto [mean, var] = statistics(in, 1);
      return (fused ? vn::vn_batch_norm : vn::vn_batch_norm_composed)(in[0], in[1], in[2], mean, var, true, 0.1, 1e-5,
                                                                      nullptr);
    };
  };
  bench_vn_op("vn_batch_norm", batch_norm(true), batch_norm(false),
              {torch::randn({b, 64, 3, n}), torch::ones({64}), torch::zeros({64})}, repeats);
  bench_vn_op(
      "vn_frame_coordinates", [](const auto& in) { return vn::vn_frame_coordinates(in[0], in[1]); },
      [](const auto& in) { return vn::vn_frame_coordinates_composed(in[0], in[1]); },
      {torch::randn({b, 682, 3, n}), torch::randn({b, 3, 3, n})}, repeats);
}

void bench_model(const std::string& name, int repeats) {
  torch::manual_seed(0);
  auto model = models::find_model(name).make(nlohmann::json::object());
  model->to(kGpu);
  model->train();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(5e-4));
  data::Batch batch;
  batch.inputs["points"] = torch::randn({16, 3, 1024}, torch::TensorOptions(kGpu));
  const auto target = torch::randint(0, 40, {16}, torch::TensorOptions(kGpu).dtype(torch::kLong));
  auto step = [&] {
    adam.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(batch), target).backward();
    adam.step();
  };
  const double ms = median_ms(step, repeats, true);
  report({{"case", "train_step"},
          {"model", name},
          {"batch", 16},
          {"points", 1024},
          {"qkv_gpu_ms", ms},
          {"modelnet40_epoch_s", ms * std::ceil(9843.0 / 16) / 1000}});
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  if (!torch::cuda::is_available()) {
    std::printf("gpu bench: no GPU visible; nothing measured\n");
    return 0;
  }
  torch::manual_seed(0);
  bench_knn(repeats);
  bench_fps(repeats);
  bench_attention(repeats);
  bench_vn_ops(repeats);
  for (const char* name : {"vnt", "vn-dgcnn"}) bench_model(name, std::max(3, repeats / 2));
  std::printf("gpu bench: done\n");
  return 0;
}
