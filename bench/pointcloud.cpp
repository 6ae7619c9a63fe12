// qkv's point-cloud kernels side by side with their PyTorch (Python) twin
// (bench/pointcloud_twin.py, Debian's python3-torch): farthest point sampling
// 10,000 -> 1,024 points and kNN (k = 20) at N = 1,024 and 8,192 on points and
// at N = 1,024 on 192-dim VN features (C = 64), the same
// sizes and threads, one run after the other. Prints medians and ratios.
//   build/bench_pointcloud [threads (0 = all cores)] [repeats]
// PYTHON (default /usr/bin/python3) and QKV_SOURCE_DIR locate the twin.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/runtime.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/vn/vn_ops.h"

using namespace qkv;

namespace {

struct Case {
  std::string name, kind;
  int64_t b, n, m_or_k, d = 3;  // d: feature dims of a kNN case (3: points; 3C: VN features)
};

template <typename Fn>
double median_ms(Fn&& fn, int repeats) {
  fn();  // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : 0;
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 5;
  set_threads(threads);
  const std::vector<Case> cases = {
      {"fps 10000->1024, B=16", "fps", 16, 10000, 1024},
      {"knn k=20, N=1024, B=16", "knn", 16, 1024, 20},
      {"knn k=20, N=8192, B=4", "knn", 4, 8192, 20},
      {"knn k=20, N=1024, D=192, B=16", "knn", 16, 1024, 20, 192},  // VN-DGCNN's dynamic graph, C = 64
  };
  nlohmann::json twin_cases = nlohmann::json::array();
  for (const auto& c : cases)
    twin_cases.push_back({{"name", c.name}, {"kind", c.kind}, {"b", c.b}, {"n", c.n}, {"d", c.d}, {c.kind == "fps" ? "m" : "k", c.m_or_k}});

  torch::manual_seed(0);
  std::vector<double> ours;
  for (const auto& c : cases) {
    if (c.kind == "fps") {
      const auto xyz = torch::randn({c.b, c.n, 3});
      ours.push_back(median_ms([&] { pointcloud::farthest_point_sample(xyz, c.m_or_k, 0); }, repeats));
    } else {
      const auto x = torch::randn({c.b, c.d, c.n});
      ours.push_back(median_ms([&] { vn::knn_indices(x, c.m_or_k); }, repeats));
    }
  }

  // The graph-feature gather (forward + backward), one pass against qkv's
  // composed LibTorch version: VN-DGCNN's first layer, batch 16, N 1024, k 20.
  double edge_fast = 0, edge_composed = 0;
  {
    const auto x = torch::randn({16, 21, 3, 1024}).requires_grad_();
    const auto idx = vn::knn_indices(x.detach().reshape({16, 63, 1024}), 20);
    auto run = [&](bool fast) {
      const auto e = fast ? vn::edge_features(x, idx, false) : vn::edge_features_composed(x, idx, false);
      e.sum().backward();
      x.mutable_grad().reset();
    };
    edge_fast = median_ms([&] { run(true); }, repeats);
    edge_composed = median_ms([&] { run(false); }, repeats);
  }

  const char* python = std::getenv("PYTHON");
  const char* source = std::getenv("QKV_SOURCE_DIR");
  const std::string script = std::string(source ? source : ".") + "/bench/pointcloud_twin.py";
  const std::string cmd = std::string(python ? python : "/usr/bin/python3") + " " + script + " --threads " +
                          std::to_string(at::get_num_threads()) + " --repeats " + std::to_string(repeats) +
                          " --cases '" + twin_cases.dump() + "'";
  nlohmann::json twin;
  try {
    twin = nlohmann::json::parse(run_capture(cmd));
  } catch (const std::exception&) {
    std::fprintf(stderr, "bench_pointcloud: the twin did not run: %s\n(python3-torch installed? run from the source "
                         "tree or set QKV_SOURCE_DIR)\n", cmd.c_str());
    return 1;
  }
  std::printf("threads %d, BLAS %s, torch (python) %s, median of %d runs\n", at::get_num_threads(),
              blas_info().value("name", "?").c_str(), twin.value("torch", "?").c_str(), repeats);
  std::printf("%-30s %12s %12s %8s\n", "kernel", "qkv ms", "pytorch ms", "ratio");
  for (size_t i = 0; i < cases.size(); ++i) {
    const double theirs = twin.at(cases[i].name).get<double>();
    std::printf("%-30s %12.2f %12.2f %7.1fx\n", cases[i].name.c_str(), ours[i], theirs, theirs / ours[i]);
  }
  std::printf("%-30s %12.2f %12.2f %7.1fx  (against qkv's composed version, not Python)\n",
              "edge features fwd+bwd C=21", edge_fast, edge_composed, edge_composed / edge_fast);
  return 0;
}
