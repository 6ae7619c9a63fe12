#include "qkv/runtime/machine_report.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "qkv/core/text.h"
#include "qkv/core/version.h"
#include "qkv/cuda/point_kernels.h"
#include "qkv/runtime/blas.h"
#include "qkv/runtime/build_parts.h"
#include "qkv/runtime/cpu.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"

namespace qkv {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  return "unknown";
}

// The line of at::show_config() that starts with `prefix`, without it.
std::string config_line(const std::string& prefix) {
  std::istringstream lines(at::show_config());
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(prefix);
    if (at != std::string::npos) return line.substr(at + prefix.size());
  }
  return "unknown";
}

// float32 sgemm as LibTorch runs it (at::mm), 1024^3, best of 5 after a
// warm-up: about 2 GFLOP a run, well under a second in all.
double sgemm_gflops() {
  const int64_t n = 1024;
  const auto a = torch::randn({n, n}), b = torch::randn({n, n});
  auto c = torch::empty({n, n});
  at::mm_out(c, a, b);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * n * n * n / best / 1e9;
}

// (main() has refused a QKV_CPU_CAPABILITY it does not know.)
std::string kernels_line() {
  const char* env = std::getenv("QKV_CPU_CAPABILITY");
  std::string s = cpu_has_avx512f()    ? "AVX-512 (attention rows and tiles; edge features AVX2)"
                  : cpu_has_avx2_fma() ? "AVX2 (attention rows, edge features)"
                                       : "portable C++ only";
  if (env && *env) s += std::string(" [QKV_CPU_CAPABILITY=") + env + "]";
  return s;
}

}  // namespace

nlohmann::json machine_report(bool measure_sgemm) {
  nlohmann::json d;
  d["qkv"] = qkv_version();
  d["libtorch"] = {{"version", TORCH_VERSION},
                   {"cuda", torch::cuda::is_available()},
                   {"gpus", torch::cuda::is_available() ? torch::cuda::device_count() : 0},
                   {"qkv_cuda_kernels", cuda::kernels_built()},
                   {"qkv_cuda_architectures", cuda::built_architectures()},
                   {"cpu_capability", config_line("CPU capability usage: ")},
                   {"parallel", at::get_parallel_info()}};
  d["cpu"] = {{"model", cpu_model_name()},
              {"logical_cores", std::thread::hardware_concurrency()},
              {"vector_extensions", cpu_vector_extensions()},
              {"qkv_kernels", kernels_line()}};
  d["gpu_devices"] = nlohmann::json::array();
  for (int64_t i = 0; i < d["libtorch"]["gpus"].get<int64_t>(); ++i) {
    nlohmann::json gpu = {
        {"device", "cuda:" + std::to_string(i)},
        {"qkv_kernels_run", cuda::kernels_run_on(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)))}};
    if (const auto info = cuda::gpu_info(i)) {
      gpu["name"] = info->name;
      gpu["compute_capability"] = std::to_string(info->major) + "." + std::to_string(info->minor);
      gpu["memory_bytes"] = info->memory_bytes;
    }
    d["gpu_devices"].push_back(gpu);
  }
  d["blas"] = blas_info();
  const bool openblas = d["blas"].value("name", "") == "OpenBLAS";
  if (const auto best = blas::core_for_level(blas::cpu_blas_level()); openblas && !best.empty())
    d["blas"]["cpu_best_core"] = best;
  // OpenBLAS keeps a thread count of its own; MKL's follows LibTorch's.
  d["threads"] = {{"libtorch", at::get_num_threads()}};
  if (openblas) d["threads"]["openblas"] = blas::openblas_threads().value_or(0);
  for (const auto& part : optional_parts()) d["optional_libraries"][part.name] = part.built;
  if (measure_sgemm) d["sgemm_gflops"] = sgemm_gflops();
  return d;
}

std::string machine_report_text(const nlohmann::json& d) {
  std::string out;
  auto append = [&out](const char* format, auto... args) {
    char line[1024];
    std::snprintf(line, sizeof line, format, args...);
    out += line;
  };
  const std::string gpus = d["libtorch"]["cuda"].get<bool>()
                               ? std::to_string(d["libtorch"]["gpus"].get<size_t>()) + " GPU(s) visible"
                               : "no GPU visible";
  append("qkv %s on LibTorch %s (%s; qkv's CUDA kernels %s; ATen kernels: %s)\n", qkv_version().c_str(), TORCH_VERSION,
         gpus.c_str(), d["libtorch"]["qkv_cuda_kernels"].get<bool>() ? "built" : "not built",
         d["libtorch"]["cpu_capability"].get<std::string>().c_str());
  for (const auto& gpu : d.value("gpu_devices", nlohmann::json::array())) {
    std::string line = gpu["device"].get<std::string>() + ": ";
    if (gpu.contains("name"))
      line += gpu["name"].get<std::string>() + " (compute capability " + gpu["compute_capability"].get<std::string>() +
              ", " + binary_size(gpu["memory_bytes"].get<int64_t>()) + "): ";
    if (gpu["qkv_kernels_run"].get<bool>())
      line += "qkv's CUDA kernels run here";
    else if (!d["libtorch"]["qkv_cuda_kernels"].get<bool>())
      line += "LibTorch's kernels (this qkv has no CUDA kernels of its own)";
    else
      line += "LibTorch's kernels: qkv's were built for " + d["libtorch"]["qkv_cuda_architectures"].get<std::string>() +
              "; TORCH_CUDA_ARCH_LIST=" + gpu.value("compute_capability", std::string("its compute capability")) +
              " at build time gives it them (docs/gpu.md)";
    append("%s\n", line.c_str());
  }
  append("CPU: %s, %u logical cores\n", d["cpu"]["model"].get<std::string>().c_str(),
         d["cpu"]["logical_cores"].get<unsigned>());
  append("vector extensions: %s\n", d["cpu"]["vector_extensions"].get<std::string>().c_str());
  append("qkv's kernels: %s\n", d["cpu"]["qkv_kernels"].get<std::string>().c_str());
  const auto& blas = d["blas"];
  append("BLAS: %s (%s)\n", blas.value("summary", blas.value("name", "unknown")).c_str(),
         blas.value("library", "unknown").c_str());
  if (blas.contains("config")) append("  %s\n", blas["config"].get<std::string>().c_str());
  if (blas.contains("reference_products"))
    append("  reference products: %s; the core qkv asks for where OpenBLAS falls back here: %s\n",
           blas["reference_products"].get<std::string>().c_str(),
           blas.value("cpu_best_core", std::string("none (nothing wider than the generic kernels)")).c_str());
  std::string built, without;
  const auto libraries = d.value("optional_libraries", nlohmann::json::object());
  for (const auto& part : optional_parts()) {
    if (libraries.value(part.name, false))
      built += std::string(built.empty() ? "" : ", ") + part.name;
    else
      without += std::string("  built without ") + part.name + " (" + part.package + "), which " + part.gives + "\n";
  }
  append("optional libraries: %s\n", built.empty() ? "none" : built.c_str());
  out += without;
  if (d["threads"].contains("openblas"))
    append("threads: LibTorch %d, OpenBLAS %d\n", d["threads"]["libtorch"].get<int>(),
           d["threads"]["openblas"].get<int>());
  else
    append("threads: LibTorch %d\n", d["threads"]["libtorch"].get<int>());
  if (d.contains("sgemm_gflops"))
    append("sgemm 1024^3 float32 (at::mm, best of 5): %.1f GFLOP/s on %s\n", d["sgemm_gflops"].get<double>(),
           counted(d["threads"]["libtorch"].get<int64_t>(), "thread").c_str());
  return out;
}

}  // namespace qkv
