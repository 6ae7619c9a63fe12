#pragma once
// What the process runs on: threads, the BLAS actually loaded, the device.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include <c10/core/Device.h>

namespace qkv {

// Sets LibTorch's intra-op threads and OpenBLAS's threads (OpenBLAS ignores
// at::set_num_threads). n <= 0 means one per core.
void set_threads(int n);

// The BLAS library that serves sgemm_ in this process, its configuration and
// thread count, as recorded in config.json.
nlohmann::json blas_info();

// "cpu", "cuda", "cuda:1". Throws UsageError when the build or machine has no CUDA.
c10::Device parse_device(const std::string& text);

// Seeds LibTorch's global generator (and CUDA's, where present).
void seed_everything(uint64_t seed);

std::string qkv_version();

}  // namespace qkv
