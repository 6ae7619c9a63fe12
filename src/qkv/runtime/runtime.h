#pragma once
// What the process runs on: threads, the BLAS actually loaded, the device.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include <c10/core/Device.h>

namespace qkv {

// Sets LibTorch's intra-op threads and OpenBLAS's threads (OpenBLAS ignores
// at::set_num_threads). n <= 0 means one per core.
void set_threads(int n);

// The most threads worth asking for: more than 4 per core only add contention.
int max_useful_threads();

// The BLAS library that serves sgemm_ in this process, its configuration,
// thread count and, for OpenBLAS, its kernels and who chose them
// (runtime/openblas_core.h), as recorded in config.json. "summary" is one line
// for people ("OpenBLAS, SkylakeX kernels (qkv's choice; ...)").
nlohmann::json blas_info();

// blas_info()'s one line for people: its summary, or the library's name.
std::string blas_summary();

// "cpu", "cuda", "cuda:1". Throws UsageError when the build or machine has no CUDA.
c10::Device parse_device(const std::string& text);

// Seeds LibTorch's global generator (and CUDA's, where present).
void seed_everything(uint64_t seed);

// This machine's memory in bytes (INT64_MAX if the system does not say).
int64_t physical_memory_bytes();

}  // namespace qkv
