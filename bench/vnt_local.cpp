// Inference time and peak memory of vnt-local (VNT-Net with kNN-local
// VNAttention, our design) against the number of points, and of the global
// vnt at the sizes where its N^2 attention still runs: one cloud (batch 1),
// eval mode under NoGradGuard, as `qkv vnt predict` runs it. Each case runs in
// a child process of its own, so that its peak resident set (the child's
// ru_maxrss from wait4) is its own; the child warms up on a 512-point cloud,
// then times the kNN graph alone ("of it kNN s": a separate call; the
// forward builds the same graph, so that time is part of "forward s") and one
// forward on the cloud.
//   build/bench_vnt_local [threads] [points,...] [global points,...] [json options]
//   build/bench_vnt_local kernel [threads] [points]   (the local attention alone: see time_kernel)
// defaults: 2 threads; vnt-local at 1000,4000,16000,64000,100000 points; vnt
// at 1000,4000; the models' default (paper) options.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "qkv/models/model.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "qkv/vn/local_attention.h"
#include "qkv/vn/vn_ops.h"

using namespace qkv;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(std::stoll(item));
  return out;
}

struct Result {
  double knn_s = 0, forward_s = 0;
  int ok = 0;
};

// In the child: the model, a warm-up, the kNN alone, one timed forward.
Result run_case(const std::string& name, int64_t points, int threads, const nlohmann::json& options) {
  set_threads(threads);
  torch::manual_seed(0);
  const auto& entry = models::find_model(name);
  auto model = entry.make(options);
  model->eval();
  const auto resolved = entry.resolve(options);
  const int64_t k = std::max(resolved.at("k").get<int64_t>(), resolved.value("neighbours", int64_t{0}));
  torch::NoGradGuard no_grad;
  data::Batch warm, batch;
  warm.inputs["points"] = torch::randn({1, 3, 512});
  model->forward(warm);
  batch.inputs["points"] = torch::randn({1, 3, points});
  Result r;
  auto t0 = std::chrono::steady_clock::now();
  vn::knn_indices(batch.inputs["points"], k);
  r.knn_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto logits = model->forward(batch);
  r.forward_s = seconds_since(t0);
  r.ok = torch::isfinite(logits).all().item<bool>() ? 1 : 0;
  return r;
}

// vn_local_attention_rows alone at the paper's widths (24 heads of 16, 16
// neighbours) on one cloud, with its default block size and others. (Its two
// products as batched matmuls instead of mul + sum were 1.6x slower at 8,000
// points, one thread.)
void time_kernel(int threads, int64_t points) {
  set_threads(threads);
  const int64_t heads = 24, d = 48, kn = 16;
  const auto q = torch::randn({1, heads, points, d}), k = torch::randn({1, heads, points, d}),
             v = torch::randn({1, heads, points, d});
  const auto idx = vn::knn_indices(torch::randn({1, 3, points}), kn);
  torch::NoGradGuard no_grad;
  for (const int64_t chunk : {int64_t{1} << 16, int64_t{1} << 18, int64_t{1} << 20, int64_t{1} << 22}) {
    vn::LocalAttentionOptions o;
    o.chunk_elements = chunk;
    vn::vn_local_attention_rows(q, k, v, idx, 16, o);  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    vn::vn_local_attention_rows(q, k, v, idx, 16, o);
    std::printf("kernel, %lld points, blocks of %lld elements: %.1f ms\n", static_cast<long long>(points),
                static_cast<long long>(chunk), 1e3 * seconds_since(t0));
  }
  // The same with the keys and values gathered from head-major rows
  // [B*H*N, 3d] (the attention core's layout) instead of point-major ones.
  auto head_major = [&] {
    const int64_t block = std::max<int64_t>(1, (int64_t{1} << 18) / (heads * kn * d));
    const auto offsets = (torch::arange(heads, torch::kLong) * points).view({1, heads, 1, 1});
    std::vector<at::Tensor> out;
    for (int64_t start = 0; start < points; start += block) {
      const int64_t n = std::min(block, points - start);
      const auto rows = (idx.narrow(1, start, n).unsqueeze(1) + offsets).reshape({-1});
      const auto kg = k.reshape({-1, d}).index_select(0, rows).view({1, heads, n, kn, d});
      const auto vg = v.reshape({-1, d}).index_select(0, rows).view({1, heads, n, kn, d});
      const auto w = torch::softmax((kg * (q.narrow(2, start, n).unsqueeze(3) * 0.25)).sum(-1), -1);
      out.push_back((w.unsqueeze(-1) * vg).sum(3));
    }
    return torch::cat(out, 2);
  };
  head_major();
  const auto t0 = std::chrono::steady_clock::now();
  head_major();
  std::printf("kernel, %lld points, head-major gathers, blocks of %lld elements: %.1f ms\n",
              static_cast<long long>(points), static_cast<long long>(int64_t{1} << 18), 1e3 * seconds_since(t0));
}

}  // namespace

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  if (argc > 1 && std::string(argv[1]) == "kernel") {
    time_kernel(argc > 2 ? std::stoi(argv[2]) : 2, argc > 3 ? std::stoll(argv[3]) : 16000);
    return 0;
  }
  const int threads = argc > 1 ? std::stoi(argv[1]) : 2;
  const auto local_points = parse_list(argc > 2 ? argv[2] : "1000,4000,16000,64000,100000");
  const auto global_points = parse_list(argc > 3 ? argv[3] : "1000,4000");
  const auto options = argc > 4 ? nlohmann::json::parse(argv[4]) : nlohmann::json::object();
  std::vector<std::pair<std::string, int64_t>> cases;
  for (const auto n : global_points) cases.emplace_back("vnt", n);
  for (const auto n : local_points) cases.emplace_back("vnt-local", n);
  const auto local_options = models::find_model("vnt-local").resolve(options);
  std::printf("batch 1, eval, NoGradGuard, %d threads; options %s (vnt: the same without neighbours)\n", threads,
              options.dump().c_str());
  std::printf("vnt-local: C %lld, %lld heads of %lld, edge-conv k %lld, attention neighbours %lld\n",
              static_cast<long long>(local_options.at("linear_dim")), static_cast<long long>(local_options.at("heads")),
              static_cast<long long>(local_options.at("head_dim")), static_cast<long long>(local_options.at("k")),
              static_cast<long long>(local_options.at("neighbours")));
  std::printf("%-10s %8s %12s %12s %14s\n", "model", "points", "forward s", "of it kNN s", "peak RSS MiB");
  std::fflush(stdout);
  for (const auto& [name, points] : cases) {
    auto model_options = options;
    if (name == "vnt") model_options.erase("neighbours");
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      Result r;
      try {
        r = run_case(name, points, threads, model_options);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s at %lld points: %s\n", name.c_str(), static_cast<long long>(points), e.what());
      }
      if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(2);
      _exit(0);
    }
    close(fds[1]);
    Result r;
    const bool got = read(fds[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r);
    close(fds[0]);
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    if (!got || !r.ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::printf("%-10s %8lld  failed (status %d)\n", name.c_str(), static_cast<long long>(points), status);
    } else {
      std::printf("%-10s %8lld %12.2f %12.2f %14.0f\n", name.c_str(), static_cast<long long>(points), r.forward_s,
                  r.knn_s, static_cast<double>(usage.ru_maxrss) / 1024.0);
    }
    std::fflush(stdout);
  }
  return 0;
}
