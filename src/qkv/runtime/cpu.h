#pragma once
// What the CPU qkv runs on can do, for kernels compiled for more than the
// build's baseline (plain x86-64) and chosen at run time.
//
// QKV_CPU_CAPABILITY (default, avx2 or avx512; the words of LibTorch's
// ATEN_CPU_CAPABILITY) caps what qkv's own kernels and its choice of OpenBLAS
// kernels use, so that the paths of an older CPU run and are tested on a newer
// one. It never raises the cap above what the CPU has.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

namespace qkv {

namespace cpu_detail {
// 0: no cap, 1: AVX2 at most ("avx2"), 2: plain x86-64 ("default");
// -1: a value qkv does not know (unknown_cpu_capability names it; qkv's
// main() refuses it).
inline int capability_cap() {
  static const int cap = [] {
    const char* env = std::getenv("QKV_CPU_CAPABILITY");
    if (!env || !*env || std::strcmp(env, "avx512") == 0) return 0;
    if (std::strcmp(env, "avx2") == 0) return 1;
    if (std::strcmp(env, "default") == 0) return 2;
    return -1;
  }();
  return cap;
}

inline bool cpu_supports(const char* feature) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  // libgcc's table also asks the OS (XGETBV) whether it saves the registers.
  if (std::strcmp(feature, "avx2") == 0) return __builtin_cpu_supports("avx2");
  if (std::strcmp(feature, "fma") == 0) return __builtin_cpu_supports("fma");
  if (std::strcmp(feature, "avx") == 0) return __builtin_cpu_supports("avx");
  if (std::strcmp(feature, "sse4.2") == 0) return __builtin_cpu_supports("sse4.2");
  if (std::strcmp(feature, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
  if (std::strcmp(feature, "avx512bw") == 0) return __builtin_cpu_supports("avx512bw");
  if (std::strcmp(feature, "avx512cd") == 0) return __builtin_cpu_supports("avx512cd");
  if (std::strcmp(feature, "avx512dq") == 0) return __builtin_cpu_supports("avx512dq");
  if (std::strcmp(feature, "avx512vl") == 0) return __builtin_cpu_supports("avx512vl");
  if (std::strcmp(feature, "avx512vnni") == 0) return __builtin_cpu_supports("avx512vnni");
  if (std::strcmp(feature, "avx512bf16") == 0) return __builtin_cpu_supports("avx512bf16");
#endif
  (void)feature;
  return false;
}
}  // namespace cpu_detail

// The value of QKV_CPU_CAPABILITY when qkv does not know it; "" otherwise.
inline std::string unknown_cpu_capability() {
  const char* env = std::getenv("QKV_CPU_CAPABILITY");
  return cpu_detail::capability_cap() < 0 && env ? env : "";
}

// AVX2 and FMA (x86 only; false elsewhere or under the "default" cap). Asked once.
inline bool cpu_has_avx2_fma() {
  static const bool yes =
      cpu_detail::capability_cap() < 2 && cpu_detail::cpu_supports("avx2") && cpu_detail::cpu_supports("fma");
  return yes;
}

// AVX-512 F (x86 only; false elsewhere or under a cap). Asked once.
inline bool cpu_has_avx512f() {
  static const bool yes = cpu_detail::capability_cap() == 0 && cpu_detail::cpu_supports("avx512f");
  return yes;
}

// The vector extensions the CPU reports, capped or not, in one line
// ("SSE4.2 AVX AVX2 FMA AVX-512F/BW/CD/DQ/VL/VNNI/BF16").
inline std::string cpu_vector_extensions() {
  using cpu_detail::cpu_supports;
  std::string out;
  const auto add = [&](const char* feature, const char* name) {
    if (cpu_supports(feature)) out += (out.empty() ? "" : " ") + std::string(name);
  };
  add("sse4.2", "SSE4.2");
  add("avx", "AVX");
  add("avx2", "AVX2");
  add("fma", "FMA");
  std::string avx512;
  for (const char* f : {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512vnni", "avx512bf16"})
    if (cpu_supports(f)) {
      std::string name = f + 6;  // past "avx512"
      for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      avx512 += (avx512.empty() ? "AVX-512" : "/") + name;
    }
  if (!avx512.empty()) out += (out.empty() ? "" : " ") + avx512;
  return out.empty() ? "none beyond x86-64 (or not x86)" : out;
}

}  // namespace qkv
