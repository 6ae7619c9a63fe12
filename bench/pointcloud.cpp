// qkv's point-cloud kernels and models side by side with their PyTorch
// (Python) twins, Debian's python3-torch 1.13 (the same version as our
// LibTorch), with the same sizes and threads, one run after the other:
//   kernels  farthest point sampling 10,000 -> 1,024 points; kNN (k = 20) at
//            N = 1,024 and 8,192 on points and at N = 1,024 on 192-dim VN
//            features (bench/pointcloud_twin.py); the edge-feature gather
//            against qkv's own composed version.
//   models   VNT-Net (paper classification settings) and VN-DGCNN: training
//            step (forward, backward, Adam) and inference at batch 16,
//            N = 1,024 (bench/models_twin.py), each in a process of its own so
//            that its peak resident memory is its own; the twin twice, with
//            glibc's malloc (as users run it) and with jemalloc preloaded; and
//            qkv's time against the roofline limit of docs/performance.md, at
//            the issue's roofs and at the sgemm rate and memcpy bandwidth
//            measured at the start of the section.
//   scale    VNT-Net's training step and peak memory at batch 16 for
//            N = 1,024 ... 8,192.
//   spatial  kNN and FPS of one cloud of 10k, 100k and 1M points: the k-d
//            tree against the exhaustive kernels and the PyTorch twin, and
//            the crossover sizes where the tree takes over.
// Prints medians and ratios.
//   build/bench_pointcloud [threads (0 = all cores)] [repeats] [kernels|models|scale|spatial|all (kernels+models)]
// PYTHON (default /usr/bin/python3) and QKV_SOURCE_DIR locate the twins.
// Internal modes, run by the ones above (and useful alone):
//   build/bench_pointcloud --child MODEL train|infer BATCH POINTS THREADS REPEATS   one JSON line
//   build/bench_pointcloud --export DIR MODEL BATCH POINTS   weights.pt + io.pt for models_twin.py --mode check
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/models/model.h"
#include "qkv/pointcloud/transforms.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "qkv/spatial/kd_tree.h"
#include "qkv/train/weights.h"
#include "qkv/vn/vn_ops.h"
#include "roofs.h"

using namespace qkv;

namespace {

struct Case {
  std::string name, kind;
  int64_t b, n, m_or_k, d = 3;  // d: feature dims of a kNN case (3: points; 3C: VN features)
};

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs fn once to warm up, then `repeats` times; returns every time in ms.
// repeats <= 0: one timed run, no warm-up (for runs of many minutes).
template <typename Fn>
std::vector<double> times_ms(Fn&& fn, int repeats) {
  if (repeats <= 0)
    repeats = 1;
  else
    fn();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(elapsed_ms(t0));
  }
  return times;
}

template <typename Fn>
double median_ms(Fn&& fn, int repeats) {
  return median(times_ms(fn, repeats));
}

// A line of /proc/self/status in MiB. VmHWM, not getrusage's ru_maxrss:
// Linux carries ru_maxrss over fork and exec, so a child started by a large
// parent reported the parent's peak.
double status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kib = 0;
  while (in >> key)
    if (key == field) {
      in >> kib;
      break;
    }
  return kib / 1024.0;
}

double peak_rss_mib() { return status_mib("VmHWM:"); }

double current_rss_mib() { return status_mib("VmRSS:"); }

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

// The last line of a command's output as JSON, or null (with the command on
// stderr) when it failed.
nlohmann::json run_json(const std::string& cmd) {
  const std::string out = run_capture(cmd);
  const auto start = out.rfind('{');
  try {
    if (start != std::string::npos) return nlohmann::json::parse(out.substr(start));
  } catch (const std::exception&) {
  }
  std::fprintf(stderr, "bench_pointcloud: no result from: %s\n", cmd.c_str());
  return nullptr;
}

std::string python() {
  const char* p = std::getenv("PYTHON");
  return p ? p : "/usr/bin/python3";
}

std::string twin_script(const std::string& name) {
  const char* source = std::getenv("QKV_SOURCE_DIR");
  return std::string(source ? source : ".") + "/bench/" + name;
}

data::Batch random_batch(int64_t batch, int64_t points) {
  data::Batch b;
  b.inputs["points"] = torch::randn({batch, 3, points});
  b.target = torch::randint(0, 40, {batch});
  return b;
}

// One model, one mode, in this process: the JSON line bench_pointcloud's
// parent (and models_twin.py, its twin) prints.
int run_child(const std::string& name, const std::string& mode, int64_t batch, int64_t points, int threads,
              int repeats) {
  set_threads(threads);
  torch::manual_seed(0);
  auto model = models::find_model(name).make(nlohmann::json::object());
  const auto b = random_batch(batch, points);
  const double rss_before = current_rss_mib();
  std::vector<double> times;
  if (mode == "train") {
    model->train();
    torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(5e-4));
    times = times_ms(
        [&] {
          adam.zero_grad();
          torch::nn::functional::cross_entropy(model->forward(b), b.target).backward();
          adam.step();
        },
        repeats);
  } else {
    model->eval();
    torch::NoGradGuard no_grad;
    times = times_ms([&] { model->forward(b); }, repeats);
  }
  const nlohmann::json out = {{"model", name},
                              {"mode", mode},
                              {"params", models::count_parameters(*model)},
                              {"batch", batch},
                              {"points", points},
                              {"threads", at::get_num_threads()},
                              {"median_ms", median(times)},
                              {"times_ms", times},
                              {"rss_before_mib", rss_before},
                              {"peak_rss_mib", peak_rss_mib()}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

// Weights and (input, logits) of a model in float64 and eval mode, after two
// training-mode forwards so that batch norm's running statistics are not the
// identity: models_twin.py --mode check loads both and compares its logits.
int run_export(const std::string& dir, const std::string& name, int64_t batch, int64_t points) {
  torch::manual_seed(0);
  auto model = models::find_model(name).make(nlohmann::json::object());
  model->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  model->train();
  for (int i = 0; i < 2; ++i) {
    auto warm = random_batch(batch, points);
    warm.inputs["points"] = warm.inputs["points"].to(torch::kDouble);
    model->forward(warm);
  }
  model->eval();
  auto b = random_batch(batch, points);
  b.inputs["points"] = b.inputs["points"].to(torch::kDouble);
  const auto logits = model->forward(b);
  train::export_weights(*model, dir + "/weights.pt");
  c10::Dict<std::string, at::Tensor> io;
  io.insert("points", b.inputs["points"]);
  io.insert("logits", logits);
  write_file_atomic(dir + "/io.pt", torch::pickle_save(c10::IValue(io)));
  std::printf("wrote %s/weights.pt and %s/io.pt\n", dir.c_str(), dir.c_str());
  return 0;
}

std::string child_command(const char* self, const std::string& name, const std::string& mode, int64_t batch,
                          int64_t points, int threads, int repeats) {
  return std::string(self) + " --child " + name + " " + mode + " " + std::to_string(batch) + " " +
         std::to_string(points) + " " + std::to_string(threads) + " " + std::to_string(repeats);
}

// The Python twin as users run it (glibc's malloc), or with jemalloc preloaded
// and configured as qkv's executables are (src/qkv/runtime/malloc_conf.c): the
// allocator alone halves the reference's training step (docs/performance.md).
std::string twin_command(const std::string& name, const std::string& mode, int64_t batch, int64_t points, int threads,
                         int repeats, const std::string& preload_jemalloc) {
  const std::string env = preload_jemalloc.empty() ? ""
                                                   : "env LD_PRELOAD=" + preload_jemalloc +
                                                         " MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";
  return env + python() + " " + twin_script("models_twin.py") + " --model " + name + " --mode " + mode + " --batch " +
         std::to_string(batch) + " --points " + std::to_string(points) + " --threads " + std::to_string(threads) +
         " --repeats " + std::to_string(repeats);
}

// Debian's libjemalloc2, or "" when it is not installed (the jemalloc twin is then left out).
std::string jemalloc_library() {
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"})
    if (std::ifstream(path).good()) return path;
  return "";
}

// The shortest time the machine allows at batch 16, N 1,024 on 2 cores, in
// ms: docs/performance.md's roofline account (our arithmetic from FLOPs and
// bytes at the issue's roofs, 260 GFLOP/s sgemm and 8.9 GB/s), split into its
// compute-bound and memory-bound terms so that it can be rescaled to the roofs
// measured on the machine running the bench ("Limits on this machine" there
// gives the split). VN-DGCNN's limits are those of the fused edge convolution
// it now runs (the unfused ones were 3,900 and 1,300 ms).
struct RooflineLimit {
  double compute_ms = 0, memory_ms = 0;
  double at_issue_roofs() const { return compute_ms + memory_ms; }
  double at(double sgemm_gflops, double copy_gbs) const {
    return compute_ms * 260.0 / sgemm_gflops + memory_ms * 8.9 / copy_gbs;
  }
};

RooflineLimit roofline_limit(const std::string& name, const std::string& mode) {
  if (name == "vnt") return mode == "train" ? RooflineLimit{3317, 673} : RooflineLimit{985, 235};
  if (name == "vn-dgcnn") return mode == "train" ? RooflineLimit{758, 672} : RooflineLimit{275, 235};
  return {};
}

// This machine's roofs on `threads` threads (roofs.h): sgemm 2048^3 best of 5,
// memcpy of 256 MiB a thread best of 5.
struct Roofs {
  double sgemm_gflops = 0, copy_gbs = 0;
};

Roofs measure_roofs(int threads) { return {qkv::bench::sgemm_gflops(5, 0.0), qkv::bench::copy_gbs(threads)}; }

int bench_kernels(int repeats) {
  const std::vector<Case> cases = {
      {"fps 10000->1024, B=16", "fps", 16, 10000, 1024},
      {"knn k=20, N=1024, B=16", "knn", 16, 1024, 20},
      {"knn k=20, N=8192, B=4", "knn", 4, 8192, 20},
      {"knn k=20, N=1024, D=192, B=16", "knn", 16, 1024, 20, 192},  // VN-DGCNN's dynamic graph, C = 64
  };
  nlohmann::json twin_cases = nlohmann::json::array();
  for (const auto& c : cases)
    twin_cases.push_back({{"name", c.name},
                          {"kind", c.kind},
                          {"b", c.b},
                          {"n", c.n},
                          {"d", c.d},
                          {c.kind == "fps" ? "m" : "k", c.m_or_k}});

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

  const auto twin = run_json(python() + " " + twin_script("pointcloud_twin.py") + " --threads " +
                             std::to_string(at::get_num_threads()) + " --repeats " + std::to_string(repeats) +
                             " --cases '" + twin_cases.dump() + "'");
  if (twin.is_null()) {
    std::fprintf(stderr,
                 "bench_pointcloud: the twin did not run (python3-torch installed? run from the source "
                 "tree or set QKV_SOURCE_DIR)\n");
    return 1;
  }
  std::printf("kernels: torch (python) %s, median of %d runs\n", twin.value("torch", "?").c_str(), repeats);
  std::printf("%-30s %12s %12s %8s\n", "kernel", "qkv ms", "pytorch ms", "ratio");
  for (size_t i = 0; i < cases.size(); ++i) {
    const double theirs = twin.at(cases[i].name).get<double>();
    std::printf("%-30s %12.2f %12.2f %7.1fx\n", cases[i].name.c_str(), ours[i], theirs, theirs / ours[i]);
  }
  std::printf("%-30s %12.2f %12.2f %7.1fx  (against qkv's composed version, not Python)\n",
              "edge features fwd+bwd C=21", edge_fast, edge_composed, edge_composed / edge_fast);
  return 0;
}

// The k-d tree (spatial/kd_tree.h) at scan sizes: kNN (k = 20, and k = 8
// for DGL's figure) and FPS to 2,048 points of one cloud of N uniform points
// in a box, against qkv's exhaustive kernels and the PyTorch formulations
// (the twin's blocked kNN: DGCNN's product form a block of queries at a
// time, as the whole N x N would not fit), where they finish in minutes;
// then the crossover sizes that set kKnnTreeMinPoints and
// kFpsTreeMinPoints. The anchors' published figures are printed beside,
// not measured here.
int bench_spatial(int repeats) {
  struct Row {
    std::string name, kind;
    int64_t n, m_or_k;
    bool exhaustive, twin;  // whether to run those (they grow as N^2 and N m)
  };
  const std::vector<Row> rows = {
      {"knn k=20, N=10k", "knn", 10000, 20, true, true},   {"knn k=8, N=10k", "knn", 10000, 8, true, true},
      {"knn k=20, N=100k", "knn", 100000, 20, true, true}, {"knn k=20, N=1M", "knn", 1000000, 20, false, false},
      {"fps 10k->2048", "fps", 10000, 2048, true, true},   {"fps 100k->2048", "fps", 100000, 2048, true, true},
      {"fps 1M->2048", "fps", 1000000, 2048, true, false},
  };
  std::printf("crossover (batch 1): tree / exhaustive time, < 1 where the tree wins\n");
  std::printf("%-8s %16s %20s\n", "N", "knn k=20", "fps ->min(N/4,1024)");
  for (const int64_t n : {128, 256, 512, 1024, 2048, 4096, 8192}) {
    const auto xyz = torch::rand({1, n, 3});
    const auto x = xyz.transpose(1, 2).contiguous();
    // Both through the tree and the exhaustive kernel directly (the
    // switch in knn_indices / farthest_point_sample is what is being set).
    std::vector<int64_t> out(static_cast<size_t>(n * 20));
    const float* p = x.data_ptr<float>();
    const double knn_tree = median_ms(
        [&] { spatial::KdTree<float>(p, p + n, p + 2 * n, n, 1).nearest_of_members(20, out.data()); }, repeats);
    const double knn_all = median_ms([&] { vn::knn_indices_exhaustive(x, 20); }, repeats);
    const int64_t m = std::min<int64_t>(n / 4, 1024);
    const auto c = xyz[0].contiguous();
    const float* q = c.data_ptr<float>();
    const double fps_tree = median_ms(
        [&] { spatial::KdTree<float>(q, q + 1, q + 2, n, 3).farthest_point_sample(m, 0, out.data()); }, repeats);
    const double fps_all = median_ms([&] { pointcloud::farthest_point_sample_exhaustive(c, m, 0); }, repeats);
    std::printf("%-8lld %16.2f %20.2f\n", static_cast<long long>(n), knn_tree / knn_all, fps_tree / fps_all);
  }
  std::fflush(stdout);

  torch::manual_seed(0);
  nlohmann::json twin_cases = nlohmann::json::array();
  for (const auto& r : rows)
    if (r.twin)
      twin_cases.push_back({{"name", r.name},
                            {"kind", r.kind == "knn" ? "knn_blocked" : "fps"},
                            {"b", 1},
                            {"n", r.n},
                            {"d", 3},
                            {r.kind == "fps" ? "m" : "k", r.m_or_k}});
  const auto twin =
      run_json(python() + " " + twin_script("pointcloud_twin.py") + " --threads " +
               std::to_string(at::get_num_threads()) + " --repeats 1 --cases '" + twin_cases.dump() + "'");
  std::printf("\nspatial: one cloud, uniform in a box; median of %d runs (exhaustive and PyTorch: one run)\n", repeats);
  std::printf("%-20s %12s %15s %15s %10s\n", "kernel", "qkv tree ms", "exhaustive ms", "pytorch ms", "speed-up");
  for (const auto& r : rows) {
    const auto xyz = torch::rand({1, r.n, 3});
    double tree = 0, exhaustive = 0;
    if (r.kind == "knn") {
      const auto x = xyz.transpose(1, 2).contiguous();
      tree = median_ms([&] { vn::knn_indices(x, r.m_or_k); }, repeats);
      if (r.exhaustive) exhaustive = median_ms([&] { vn::knn_indices_exhaustive(x, r.m_or_k); }, 0);
    } else {
      tree = median_ms([&] { pointcloud::farthest_point_sample(xyz, r.m_or_k, 0); }, repeats);
      if (r.exhaustive)
        exhaustive = median_ms([&] { pointcloud::farthest_point_sample_exhaustive(xyz, r.m_or_k, 0); }, 0);
    }
    const double theirs = twin.is_null() || !twin.contains(r.name) ? 0 : twin.at(r.name).get<double>();
    auto cell = [](double ms) {  // "-": not run
      char text[32] = "-";
      if (ms > 0) std::snprintf(text, sizeof text, "%.1f", ms);
      return std::string(text);
    };
    std::printf("%-20s %12.1f %15s %15s %9s\n", r.name.c_str(), tree, cell(exhaustive).c_str(), cell(theirs).c_str(),
                exhaustive > 0 ? (cell(exhaustive / tree) + "x").c_str() : "-");
  }
  std::printf(
      "anchors (published, not measured here): torch-cluster's CPU KD-tree, kNN k=20 at 100k: 400 ms;"
      " DGL's CPU KD-tree, k=8 at 10k: 7 ms\n");

  return twin.is_null() ? 1 : 0;
}

int bench_models(const char* self, int threads, int repeats) {
  const int64_t batch = 16, points = 1024;
  const std::string jemalloc = jemalloc_library();
  const Roofs roofs = measure_roofs(threads);
  std::printf(
      "\nmodels: batch %lld, %lld points, median of %d runs after one warm-up; peak = peak resident set of "
      "the process (MiB); 'torch' is the Python twin with glibc's malloc (as users run it), "
      "'torch+je' the same with jemalloc preloaded%s; 'of limit' = the roofline limit of "
      "docs/performance.md over qkv's time, 'limit' at the issue's roofs (260 GFLOP/s, 8.9 GB/s), "
      "'here' at the roofs measured now on %d threads: sgemm %.1f GFLOP/s, memcpy %.1f GB/s\n",
      static_cast<long long>(batch), static_cast<long long>(points), repeats,
      jemalloc.empty() ? " (not installed: left out)" : "", threads, roofs.sgemm_gflops, roofs.copy_gbs);
  std::printf("%-9s %-6s %9s %9s %9s %7s %9s %7s %9s %8s %8s %8s %9s %9s %9s\n", "model", "mode", "params", "qkv ms",
              "torch ms", "speed", "torch+je", "speed", "limit ms", "of limit", "here ms", "of here", "qkv peak",
              "torch pk", "t+je pk");
  int status = 0;
  for (const std::string name : {"vnt", "vn-dgcnn"})
    for (const std::string mode : {"train", "infer"}) {
      const auto ours = run_json(child_command(self, name, mode, batch, points, threads, repeats));
      const auto theirs = run_json(twin_command(name, mode, batch, points, threads, repeats, ""));
      const auto with_jemalloc = jemalloc.empty()
                                     ? nlohmann::json()
                                     : run_json(twin_command(name, mode, batch, points, threads, repeats, jemalloc));
      if (ours.is_null()) {
        status = 1;
        continue;
      }
      if (theirs.is_null()) status = 1;  // qkv's row is still printed, the twin's columns as "-"
      const double q_ms = ours["median_ms"];
      const RooflineLimit roofline = roofline_limit(name, mode);
      const double limit = roofline.at_issue_roofs(), here = roofline.at(roofs.sgemm_gflops, roofs.copy_gbs);
      auto column = [](const nlohmann::json& run, const char* key) {
        return run.is_null() ? std::string("-") : std::to_string(std::lround(run[key].get<double>()));
      };
      auto speed = [&](const nlohmann::json& run) {
        if (run.is_null()) return std::string("-");
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2fx", run["median_ms"].get<double>() / q_ms);
        return std::string(buf);
      };
      std::printf("%-9s %-6s %9lld %9.0f %9s %7s %9s %7s %9.0f %7.0f%% %8.0f %7.0f%% %9.0f %9s %9s\n", name.c_str(),
                  mode.c_str(), static_cast<long long>(ours["params"].get<int64_t>()), q_ms,
                  column(theirs, "median_ms").c_str(), speed(theirs).c_str(),
                  column(with_jemalloc, "median_ms").c_str(), speed(with_jemalloc).c_str(), limit, 100 * limit / q_ms,
                  here, 100 * here / q_ms, ours["peak_rss_mib"].get<double>(), column(theirs, "peak_rss_mib").c_str(),
                  column(with_jemalloc, "peak_rss_mib").c_str());
      if (!theirs.is_null() && ours["params"] != theirs["params"]) {
        std::fprintf(stderr, "bench_pointcloud: %s has %s parameters in qkv but %s in the twin\n", name.c_str(),
                     ours["params"].dump().c_str(), theirs["params"].dump().c_str());
        status = 1;
      }
    }
  return status;
}

int bench_scale(const char* self, int threads, int repeats) {
  const int64_t batch = 16;
  std::printf(
      "\nscale: VNT-Net (paper classification settings) training step at batch %lld; median of %d after a "
      "warm-up up to 2,048 points, one step (no warm-up) beyond\n",
      static_cast<long long>(batch), repeats);
  std::printf("%7s %10s %12s %14s\n", "points", "step s", "peak MiB", "[B,H,N,N] MiB");
  for (const int64_t n : {1024, 2048, 4096, 8192}) {
    const auto ours = run_json(child_command(self, "vnt", "train", batch, n, threads, n <= 2048 ? repeats : 0));
    // What one block's attention weights would take if materialised (24 heads, float32).
    const double weights_mib = 16.0 * 24 * n * n * 4 / (1 << 20);
    if (ours.is_null()) {
      std::printf("%7lld %10s %12s %14.0f\n", static_cast<long long>(n), "failed", "-", weights_mib);
      continue;
    }
    std::printf("%7lld %10.1f %12.0f %14.0f\n", static_cast<long long>(n), ours["median_ms"].get<double>() / 1e3,
                ours["peak_rss_mib"].get<double>(), weights_mib);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "--child" && argc == 8)
    return run_child(argv[2], argv[3], std::stoll(argv[4]), std::stoll(argv[5]), std::stoi(argv[6]),
                     std::stoi(argv[7]));
  if (first == "--export" && argc == 6) return run_export(argv[2], argv[3], std::stoll(argv[4]), std::stoll(argv[5]));
  const int threads = argc > 1 ? std::stoi(argv[1]) : 0;
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 5;
  const std::string what = argc > 3 ? argv[3] : "all";
  if (what != "all" && what != "kernels" && what != "models" && what != "scale" && what != "spatial") {
    std::fprintf(stderr, "bench_pointcloud: unknown section '%s' (kernels, models, scale, spatial or all)\n",
                 what.c_str());
    return 2;
  }
  set_threads(threads);
  std::printf("threads %d, BLAS %s\n", at::get_num_threads(), blas_summary().c_str());
  int status = 0;
  if (what == "all" || what == "kernels") status |= bench_kernels(repeats);
  if (what == "all" || what == "models") status |= bench_models(argv[0], at::get_num_threads(), repeats);
  if (what == "scale") status |= bench_scale(argv[0], at::get_num_threads(), repeats);
  if (what == "spatial") status |= bench_spatial(repeats);
  return status;
}
