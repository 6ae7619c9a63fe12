#pragma once
// Arithmetic on counts read from files. A header is untrusted input: its
// counts are multiplied into byte sizes before anything is allocated, and a
// product that wraps around would pass every later size check.
#include <cstdint>

namespace qkv {

// a * b into out; false (out unspecified) if the result does not fit in T.
template <typename T>
[[nodiscard]] bool checked_mul(T a, T b, T& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

// a + b into out; false (out unspecified) if the result does not fit in T.
template <typename T>
[[nodiscard]] bool checked_add(T a, T b, T& out) {
  return !__builtin_add_overflow(a, b, &out);
}

}  // namespace qkv
