#pragma once
// What the CPU qkv runs on can do, for kernels compiled for more than the
// build's baseline (plain x86-64) and chosen at run time.

namespace qkv {

// AVX2 and FMA (x86 only; false elsewhere). Asked once.
inline bool cpu_has_avx2_fma() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// AVX-512 F (x86 only; false elsewhere). Asked once.
inline bool cpu_has_avx512f() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}

}  // namespace qkv
