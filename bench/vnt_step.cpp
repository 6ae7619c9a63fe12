// Time of one training step (forward, backward, Adam) and of inference (under
// NoGradGuard, as qkv runs it, and under InferenceMode) for the
// point-cloud classifiers, and where the forward time goes (LibTorch's
// profiler is not in Debian's build, so the parts are timed one by one).
//   build/bench_vnt_step [model] [batch] [points] [threads] [json options]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "qkv/core/runtime.h"
#include "qkv/models/model.h"

using namespace qkv;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "vnt";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 16;
  const int64_t points = argc > 3 ? std::stoll(argv[3]) : 1024;
  const int threads = argc > 4 ? std::stoi(argv[4]) : 1;
  const auto options = argc > 5 ? nlohmann::json::parse(argv[5]) : nlohmann::json::object();
  set_threads(threads);
  torch::manual_seed(0);
  auto model = models::find_model(name).make(options);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(5e-4));
  data::Batch b;
  b.inputs["points"] = torch::randn({batch, 3, points});
  b.inputs["normals"] = torch::nn::functional::normalize(torch::randn({batch, 3, points}),
                                                         torch::nn::functional::NormalizeFuncOptions().dim(1));
  b.target = torch::randint(0, 40, {batch});
  std::printf("%s: %lld parameters, batch %lld, %lld points, %d threads, %s\n", name.c_str(),
              static_cast<long long>(models::count_parameters(*model)), static_cast<long long>(batch),
              static_cast<long long>(points), at::get_num_threads(), blas_info().value("name", "?").c_str());
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
  model->eval();
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
