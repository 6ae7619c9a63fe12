// Time of one training step (forward, backward, Adam) and of inference (under
// NoGradGuard, as qkv runs it, and under InferenceMode) for the
// point-cloud classifiers, and where the time goes: VN-DGCNN's eval forward
// part by part (timed one by one), and one training step's backward by
// autograd node and one inference forward by op under LibTorch's legacy
// profiler (Debian's build has no Kineto profiler; the legacy one records the
// ops' and the engine's evaluate_function spans).
//   build/bench_vnt_step [model] [batch] [points] [threads] [json options]
//   build/bench_vnt_step knn [batch] [points] [threads] [{"dims": [...]}]   (kNN alone: see time_knn)
//   build/bench_vnt_step vn-linear [batch] [points] [threads]   (vn_linear alone: see time_vn_linear)
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qkv/models/cloud_head.h"
#include "qkv/models/model.h"
#include "qkv/models/vnt_net.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_ops.h"

using namespace qkv;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// VN-DGCNN's forward in eval mode, part by part (docs/performance.md's
// per-op table): the same calls as VNDGCNN::forward on the model's own
// modules, each part timed after the one before finished. Mean pooling only.
void time_vn_dgcnn_parts(torch::nn::Module& model, const data::Batch& batch, int64_t k, bool print) {
  auto modules = model.named_modules();
  auto conv = [&](const std::string& name) {
    return std::dynamic_pointer_cast<vn::VNLinearLeakyReLUImpl>(modules[name]);
  };
  torch::NoGradGuard no_grad;
  std::map<std::string, double> seconds;
  auto timed = [&](const std::string& part, auto&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    auto out = fn();
    seconds[part] += seconds_since(t0);
    return out;
  };
  auto x = models::vn_input(batch, false);
  const int64_t b = x.size(0);
  std::vector<at::Tensor> levels;
  for (int i = 0; i < 4; ++i) {
    const auto idx = timed("1 kNN (4 graphs)", [&] { return vn::knn_indices(x.reshape({b, -1, x.size(3)}), k); });
    x = timed("2 edge convs (linears, gather, BN, leaky ReLU, mean)",
              [&] { return vn::factorised_edge_conv_mean(*conv("convs." + std::to_string(i)), x, idx); });
    levels.push_back(x);
  }
  x = timed("3 conv5 on the cat of levels", [&] { return conv("conv5")->forward(torch::cat(levels, 1)); });
  auto invariant = std::dynamic_pointer_cast<vn::VNStdFeatureImpl>(modules["invariant"]);
  const auto inv =
      timed("4 invariant layer on [x; mean]", [&] { return invariant->forward_with_mean(x).first.flatten(1, 2); });
  auto head = std::dynamic_pointer_cast<models::ClassificationHeadImpl>(modules["head"]);
  timed("5 global pool and head", [&] { return head->forward(models::global_pool(inv, "max+mean")); });
  if (!print) return;
  double total = 0;
  for (const auto& [part, s] : seconds) total += s;
  for (const auto& [part, s] : seconds)
    std::printf("  forward part %-40s %7.0f ms  %4.1f %%\n", part.c_str(), 1e3 * s, 100 * s / total);
}

// kNN on VN features at the model's sizes: the whole op, its blocked GEMMs
// alone (what the selection adds is the difference), and LibTorch's one bmm +
// topk for reference. `build/bench_vnt_step knn [batch] [points] [threads] [{"dims": [...]}]`
// (dims 3, 63 and 126 unless given: VN-DGCNN's graphs).
void time_knn(int64_t batch, int64_t points, const std::vector<int64_t>& dim_list) {
  for (const int64_t dims : dim_list) {
    const auto features = torch::randn({batch, dims, points});
    vn::knn_indices(features, 20);
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 3; ++r) vn::knn_indices(features, 20);
    const double knn = seconds_since(t0) / 3;
    const auto cloud = features.transpose(1, 2).contiguous();
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 3; ++r)
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t q0 = 0; q0 < points; q0 += 256)
          torch::matmul(cloud[i].slice(0, q0, std::min(points, q0 + 256)), cloud[i].transpose(0, 1)).contiguous();
    const double gemm = seconds_since(t0) / 3;
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 3; ++r) torch::bmm(cloud, cloud.transpose(1, 2)).topk(20, -1, false, true);
    const double topk = seconds_since(t0) / 3;
    std::printf("kNN k 20, %lld dims: knn_indices %.1f ms; its blocked GEMMs alone %.1f ms; bmm + topk %.1f ms\n",
                static_cast<long long>(dims), 1e3 * knn, 1e3 * gemm, 1e3 * topk);
  }
}

// vn_linear at the models' widths, against the same product as a batched
// W @ x (weight [C_out, C_in] times each cloud's [C_in, 3N]); both made
// contiguous, as the next fused kernel needs them.
// `build/bench_vnt_step vn-linear [batch] [points] [threads]`.
void time_vn_linear(int64_t batch, int64_t points) {
  const std::vector<std::pair<int64_t, int64_t>> widths = {{2, 16},    {16, 384},  {384, 16}, {42, 340},  {169, 341},
                                                           {682, 341}, {341, 170}, {170, 3},  {682, 682}, {341, 340}};
  for (const auto& [in, out] : widths) {
    const auto x = torch::randn({batch, in, 3, points}), w = torch::randn({out, in});
    auto timed = [&](auto&& fn) {
      fn();
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < 3; ++r) fn();
      return 1e3 * seconds_since(t0) / 3;
    };
    const double gemm_rows = timed([&] { return vn::vn_linear(x, w).contiguous(); });
    const double batched = timed([&] { return torch::matmul(w, x.flatten(2)).view({batch, out, 3, points}); });
    // Backward alone (dX and dW, twice the forward's FLOPs), through autograd as a step runs it.
    const auto xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_();
    const auto up = torch::randn({batch, out, 3, points});
    double backward = 0;
    for (int r = 0; r < 4; ++r) {
      const auto y = vn::vn_linear(xg, wg);
      const auto t0 = std::chrono::steady_clock::now();
      y.backward(up);
      if (r > 0) backward += 1e3 * seconds_since(t0) / 3;
      xg.mutable_grad().reset(), wg.mutable_grad().reset();
    }
    const double gflop = 2.0 * static_cast<double>(batch * 3 * points) * static_cast<double>(in * out) / 1e9;
    std::printf(
        "vn_linear %4lld -> %4lld: as rows %7.1f ms, as W @ x %7.1f ms (%.2f GFLOP: %.0f / %.0f GFLOP/s); "
        "backward %7.1f ms (%.0f GFLOP/s)\n",
        static_cast<long long>(in), static_cast<long long>(out), gemm_rows, batched, gflop, gflop / gemm_rows * 1e3,
        gflop / batched * 1e3, backward, 2 * gflop / backward * 1e3);
  }
}

// One training step under the legacy profiler; its backward's time by
// autograd node (the engine's "evaluate_function" spans, summed by node
// type), largest first. Custom Functions appear as CppNode<...>.
void profile_backward(torch::nn::Module& model, torch::optim::Optimizer& optimizer, const data::Batch& batch,
                      const std::function<at::Tensor()>& forward) {
  std::ostringstream trace;
  double total_ms = 0;
  {
    torch::autograd::profiler::RecordProfile guard(trace);
    optimizer.zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(forward(), batch.target);
    const auto t0 = std::chrono::steady_clock::now();
    loss.backward();
    total_ms = 1e3 * seconds_since(t0);
  }
  const std::string prefix = "autograd::engine::evaluate_function: ";
  std::map<std::string, std::pair<double, int>> by_node;  // name -> (ms, count)
  for (const auto& event : nlohmann::json::parse(trace.str())) {
    const auto name = event.value("name", "");
    if (event.value("ph", "") != "X" || name.rfind(prefix, 0) != 0) continue;
    std::string node = name.substr(prefix.size());
    for (const std::string wrapper : {"torch::autograd::CppNode<", "qkv::vn::(anonymous namespace)::"})
      for (size_t at; (at = node.find(wrapper)) != std::string::npos;) node.erase(at, wrapper.size());
    if (!node.empty() && node.back() == '>') node.pop_back();
    auto& entry = by_node[node];
    entry.first += event.value("dur", 0.0) / 1e3;
    entry.second += 1;
  }
  std::vector<std::pair<double, std::string>> order;
  double summed = 0;
  for (const auto& [node, entry] : by_node) order.emplace_back(entry.first, node), summed += entry.first;
  std::sort(order.rbegin(), order.rend());
  std::printf("backward of one training step by autograd node (legacy profiler, %.0f ms wall, %.0f ms in nodes):\n",
              total_ms, summed);
  for (size_t i = 0; i < order.size() && i < 16; ++i)
    std::printf("  %-44s %4dx %8.0f ms  %4.1f %%\n", order[i].second.c_str(), by_node[order[i].second].second,
                order[i].first, 100 * order[i].first / total_ms);
}

// One inference forward (NoGradGuard) under the legacy profiler: self time
// by op (an op's span less the spans of the ops it called), largest first.
void profile_inference(const std::function<at::Tensor()>& forward) {
  std::ostringstream trace;
  double total_ms = 0;
  {
    torch::NoGradGuard no_grad;
    torch::autograd::profiler::RecordProfile guard(trace);
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    total_ms = 1e3 * seconds_since(t0);
  }
  struct Span {
    double start, end;
    std::string name;
  };
  std::map<int64_t, std::vector<Span>> by_thread;
  for (const auto& event : nlohmann::json::parse(trace.str())) {
    if (event.value("ph", "") != "X") continue;
    const double ts = event.value("ts", 0.0), dur = event.value("dur", 0.0);
    by_thread[event.value("tid", int64_t{0})].push_back({ts, ts + dur, event.value("name", "")});
  }
  std::map<std::string, std::pair<double, int>> self;  // name -> (ms, count)
  for (auto& [tid, spans] : by_thread) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;  // parents before their children
    });
    std::vector<std::pair<const Span*, double>> open;  // span, its children's time
    auto close = [&] {
      auto [span, children] = open.back();
      open.pop_back();
      auto& entry = self[span->name];
      entry.first += (span->end - span->start - children) / 1e3;
      entry.second += 1;
      if (!open.empty()) open.back().second += span->end - span->start;
    };
    for (const auto& span : spans) {
      while (!open.empty() && open.back().first->end <= span.start) close();
      open.emplace_back(&span, 0.0);
    }
    while (!open.empty()) close();
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, entry] : self) order.emplace_back(entry.first, name);
  std::sort(order.rbegin(), order.rend());
  std::printf("inference forward by op, self time (legacy profiler, %.0f ms wall):\n", total_ms);
  for (size_t i = 0; i < order.size() && i < 16; ++i)
    std::printf("  %-44s %4dx %8.0f ms  %4.1f %%\n", order[i].second.c_str(), self[order[i].second].second,
                order[i].first, 100 * order[i].first / total_ms);
}

}  // namespace

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  const std::string name = argc > 1 ? argv[1] : "vnt";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 16;
  const int64_t points = argc > 3 ? std::stoll(argv[3]) : 1024;
  const int threads = argc > 4 ? std::stoi(argv[4]) : 1;
  const auto options = argc > 5 ? nlohmann::json::parse(argv[5]) : nlohmann::json::object();
  set_threads(threads);
  torch::manual_seed(0);
  if (name == "vn-linear") {
    time_vn_linear(batch, points);
    return 0;
  }
  if (name == "knn") {
    time_knn(batch, points, options.value("dims", std::vector<int64_t>{3, 63, 126}));
    return 0;
  }
  auto model = models::find_model(name).make(options);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(5e-4));
  data::Batch b;
  b.inputs["points"] = torch::randn({batch, 3, points});
  b.inputs["normals"] = torch::nn::functional::normalize(torch::randn({batch, 3, points}),
                                                         torch::nn::functional::NormalizeFuncOptions().dim(1));
  b.target = torch::randint(0, 40, {batch});
  std::printf("%s: %lld parameters, batch %lld, %lld points, %d threads, %s\n", name.c_str(),
              static_cast<long long>(models::count_parameters(*model)), static_cast<long long>(batch),
              static_cast<long long>(points), at::get_num_threads(), blas_summary().c_str());
  const int reps = 3;
  model->train();
  for (int r = 0; r <= reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    adam.zero_grad();
    auto logits = model->forward(b);
    const double fwd = seconds_since(t0);
    torch::nn::functional::cross_entropy(logits, b.target).backward();
    adam.step();
    if (r > 0) std::printf("train step %.3f s (forward %.3f s)\n", seconds_since(t0), fwd);
  }
  profile_backward(*model, adam, b, [&] { return model->forward(b); });
  model->eval();
  profile_inference([&] { return model->forward(b); });
  if (name == "vn-dgcnn") {
    time_vn_dgcnn_parts(*model, b, options.value("k", 20), false);  // warm-up
    std::printf("VN-DGCNN eval forward by part (NoGradGuard):\n");
    time_vn_dgcnn_parts(*model, b, options.value("k", 20), true);
  }
  // Inference as qkv's eval and predict run it today (NoGradGuard), and under
  // c10::InferenceMode, which also skips version counters and view tracking
  // (issue 20's "inference path without autograd bookkeeping").
  for (const bool inference_mode : {false, true}) {
    for (int r = 0; r <= reps; ++r) {
      torch::NoGradGuard no_grad;
      c10::optional<c10::InferenceMode> guard;
      if (inference_mode) guard.emplace();
      auto t0 = std::chrono::steady_clock::now();
      model->forward(b);
      const double s = seconds_since(t0);
      if (r > 0)
        std::printf("inference (%s) %.3f s (%.1f clouds/s)\n", inference_mode ? "InferenceMode" : "NoGradGuard", s,
                    static_cast<double>(batch) / s);
    }
  }
  return 0;
}
