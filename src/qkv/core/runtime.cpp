#include "qkv/core/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include <torch/cuda.h>
#include <torch/utils.h>

#include "qkv/core/errors.h"

namespace qkv {
namespace {

template <typename Fn>
Fn find_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void set_threads(int n) {
  // 0: OMP_NUM_THREADS when set (qkv launch sets it to share the cores
  // between ranks), else one per core.
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? std::atoi(env) : 0;
  }
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  // Child processes (and an OpenBLAS loaded later) read the variable; the
  // already-loaded library needs the call.
  setenv("OPENBLAS_NUM_THREADS", std::to_string(n).c_str(), 1);
  if (auto set_blas = find_symbol<void (*)(int)>("openblas_set_num_threads")) set_blas(n);
}

nlohmann::json blas_info() {
  nlohmann::json info;
  std::string library = "unknown";
  if (void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_")) {
    Dl_info where{};
    if (dladdr(sgemm, &where) && where.dli_fname) library = where.dli_fname;
  }
  char resolved[4096];
  if (library != "unknown" && realpath(library.c_str(), resolved)) library = resolved;
  info["library"] = library;
  if (auto config = find_symbol<char* (*)()>("openblas_get_config")) {
    info["name"] = "OpenBLAS";
    info["config"] = std::string(config());
    if (auto threads = find_symbol<int (*)()>("openblas_get_num_threads")) info["threads"] = threads();
  } else {
    info["name"] = library.find("openblas") != std::string::npos ? "OpenBLAS" : "reference or other";
  }
  info["torch_threads"] = at::get_num_threads();
  return info;
}

c10::Device parse_device(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  if (text.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available())
      throw UsageError("--device " + text +
                       ": this LibTorch build has no CUDA support or no GPU is visible; use --device cpu");
    try {
      return c10::Device(text);
    } catch (const std::exception&) {
      throw UsageError("--device " + text + ": expected cuda or cuda:N");
    }
  }
  throw UsageError("--device " + text + ": expected cpu or cuda");
}

void seed_everything(uint64_t seed) { torch::manual_seed(seed); }

std::string qkv_version() { return QKV_VERSION; }

}  // namespace qkv
