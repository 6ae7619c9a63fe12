#include "qkv/runtime/runtime.h"
#include "qkv/runtime/run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include <torch/cuda.h>
#include <torch/utils.h>

#include "qkv/core/errors.h"
#include "qkv/runtime/blas.h"
#include "qkv/runtime/openblas_core.h"

namespace qkv {

void set_threads(int n) {
  // 0: OMP_NUM_THREADS when set (qkv launch sets it to share the cores
  // between ranks), else one per core. The variable is held to the range
  // --threads has: OMP_NUM_THREADS=100000 started threads for a minute.
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? static_cast<int>(std::min<long>(std::strtol(env, nullptr, 10), max_useful_threads())) : 0;
  }
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  at::set_num_threads(n);
  // Child processes (and an OpenBLAS loaded later) read the variable; the
  // already-loaded library needs the call.
  setenv("OPENBLAS_NUM_THREADS", std::to_string(n).c_str(), 1);
  blas::set_openblas_threads(n);
}

nlohmann::json blas_info() {
  nlohmann::json info;
  const std::string library = blas::library();
  info["library"] = library;
  if (const auto config = blas::openblas_config()) {
    info["name"] = "OpenBLAS";
    info["config"] = *config;
    if (const auto threads = blas::openblas_threads()) info["threads"] = *threads;
    const auto core = blas::openblas_core_choice();
    info["core"] = core.core;
    info["core_chosen_by"] = core.chosen_by;
    if (!core.openblas_core.empty()) info["openblas_own_core"] = core.openblas_core;
    if (!core.rejected.empty()) info["core_rejected"] = core.rejected;
    info["reference_products"] = core.reference_ok ? "passed" : "failed";
    info["summary"] = "OpenBLAS, " + core.summary();
  } else if (const auto mkl = blas::mkl_version()) {
    info["name"] = "MKL";
    info["version"] = *mkl;
    // "... Version 2024.2-Product Build ..." -> "MKL 2024.2"
    const auto at = mkl->find("Version ");
    info["summary"] =
        at == std::string::npos ? "MKL" : "MKL " + mkl->substr(at + 8, mkl->find_first_of("- ", at + 8) - at - 8);
  } else {
    info["name"] = library.find("openblas") != std::string::npos ? "OpenBLAS" : "reference or other";
  }
  info["torch_threads"] = at::get_num_threads();
  return info;
}

std::string blas_summary() {
  const auto info = blas_info();
  return info.value("summary", info.value("name", "unknown BLAS"));
}

c10::Device parse_device(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  if (text.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw ConfigError("device",
                        text + ": this LibTorch build has no CUDA support or no GPU is visible; use --device cpu");
    c10::Device device(c10::kCPU);
    try {
      device = c10::Device(text);
    } catch (const std::exception&) {
      throw ConfigError("device", text + ": expected cuda or cuda:N");
    }
    const int64_t visible = static_cast<int64_t>(torch::cuda::device_count());
    if (device.has_index() && device.index() >= visible)
      throw ConfigError("device", text + ": only " + std::to_string(visible) + " GPU" +
                                      (visible == 1 ? " is" : "s are") + " visible (cuda:0.." +
                                      std::to_string(visible - 1) + ")");
    return device;
  }
  throw ConfigError("device", text + ": expected cpu or cuda");
}

void seed_everything(uint64_t seed) { torch::manual_seed(seed); }

int max_useful_threads() { return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

c10::Device apply_run_options(const RunOptions& o) {
  set_threads(o.threads);
  seed_everything(o.seed);
  return parse_device(o.device);
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t bytes = 0;
  if (pages <= 0 || page <= 0 || __builtin_mul_overflow(int64_t{pages}, int64_t{page}, &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

}  // namespace qkv
