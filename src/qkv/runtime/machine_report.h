#pragma once
// What this machine gives qkv (CPU, vector extensions, BLAS and its kernels,
// threads, LibTorch's build) and how fast its sgemm runs: `qkv doctor`, so
// that a slow run can be explained before it is started.
#include <nlohmann/json.hpp>
#include <string>

namespace qkv {

// {qkv, libtorch, cpu, blas, threads, optional_libraries[, sgemm_gflops]}; the sgemm
// measurement (float32 1024^3 at::mm, best of 5, about a second) only when
// `measure_sgemm`.
nlohmann::json machine_report(bool measure_sgemm);

// The report as lines for people.
std::string machine_report_text(const nlohmann::json& report);

}  // namespace qkv
