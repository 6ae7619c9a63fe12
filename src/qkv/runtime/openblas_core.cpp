#include "qkv/runtime/openblas_core.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "qkv/core/messages.h"
#include "qkv/runtime/blas.h"
#include "qkv/runtime/cpu.h"

namespace qkv::blas {
namespace {

// OPENBLAS_CORETYPE as qkv set it (so a value equal to it is qkv's, not the
// user's, in this process after the re-exec and in its children), OpenBLAS's
// own choice it replaced, and a core whose products were wrong.
constexpr const char* kCoreEnv = "OPENBLAS_CORETYPE";
constexpr const char* kQkvCoreEnv = "QKV_OPENBLAS_CORETYPE";
constexpr const char* kOwnCoreEnv = "QKV_OPENBLAS_OWN_CORE";
constexpr const char* kRejectedEnv = "QKV_OPENBLAS_REJECTED";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Row-major op(A)[M,K] op(B)[K,N] on small exact values: every product and
// partial sum is a multiple of 1/64 well inside float's 24 bits, so any
// correct kernel, whatever its order of summation, gives the exact result.
template <typename T>
bool products_ok() {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{37, 29, 67}, Shape{64, 48, 96}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const T beta : {T(0), T(1)}) {
          std::vector<T> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n), ref(s.m * s.n);
          for (size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<int>((i * 37 + 11) % 19) - 9) / T(8);
          for (size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<int>((i * 53 + 5) % 17) - 8) / T(8);
          for (size_t i = 0; i < c.size(); ++i) c[i] = T(static_cast<int>(i % 7) - 3);
          const int64_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              double acc = 0;
              for (int64_t p = 0; p < s.k; ++p)
                acc += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
              ref[i * s.n + j] = T(acc + double(beta) * double(c[i * s.n + j]));
            }
          gemm(ta, tb, s.m, s.n, s.k, T(1), a.data(), lda, b.data(), ldb, beta, c.data(), s.n);
          for (size_t i = 0; i < c.size(); ++i)
            if (!(std::abs(double(c[i]) - double(ref[i])) <= 1e-6 * (1 + std::abs(double(ref[i]))))) return false;
        }
  return true;
}

// The choice choose_openblas_core made in this process, if it ran.
std::optional<CoreChoice>& made_choice() {
  static std::optional<CoreChoice> choice;
  return choice;
}

// What OpenBLAS runs and who chose it, read from OpenBLAS and the variables
// (a value of OPENBLAS_CORETYPE equal to qkv's marker is qkv's); the
// reference products are left to the caller.
CoreChoice current_choice(const std::string& core) {
  CoreChoice c;
  c.core = core;
  const std::string user = env_or_empty(kCoreEnv), mine = env_or_empty(kQkvCoreEnv);
  c.chosen_by = user.empty() ? "OpenBLAS" : user == mine ? "qkv" : "OPENBLAS_CORETYPE";
  if (c.chosen_by == "qkv") c.openblas_core = env_or_empty(kOwnCoreEnv);
  c.rejected = env_or_empty(kRejectedEnv);
  return c;
}

[[noreturn]] void reexecute(char** argv) {
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv);
  // Only reached when exec failed; the caller's environment changes cannot be
  // taken back safely after a half-done exec, so stop with the reason.
  say_as_is(std::string("qkv: error: could not re-execute /proc/self/exe to choose OpenBLAS's kernels: ") +
            std::strerror(errno) + " (set OPENBLAS_CORETYPE yourself to skip this)");
  std::_Exit(1);
}

}  // namespace

std::optional<int> openblas_core_level(const std::string& core) {
  const std::string c = lower(core);
  if (c == "unknown") return 0;
  for (const char* name : {"katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2", "penryn",
                           "dunnington", "athlon", "opteron", "opteron_sse3", "barcelona", "nano", "bobcat"})
    if (c == name) return 1;
  if (c == "nehalem") return 2;
  for (const char* name : {"sandybridge", "bulldozer", "piledriver", "steamroller"})
    if (c == name) return 3;
  for (const char* name : {"haswell", "zen", "excavator"})
    if (c == name) return 4;
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"})
    if (c == name) return 5;
  return std::nullopt;
}

int cpu_blas_level() {
  using cpu_detail::cpu_supports;
  const int cap = cpu_detail::capability_cap();
  if (cap == 2) return 1;  // "default": plain x86-64
  bool avx512 = cap == 0;
  for (const char* f : {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}) avx512 = avx512 && cpu_supports(f);
  if (avx512) return 5;
  if (cpu_supports("avx2") && cpu_supports("fma")) return 4;
  if (cpu_supports("avx")) return 3;
  if (cpu_supports("sse4.2")) return 2;
  return 1;
}

std::string core_for_level(int level) {
  switch (level) {
    case 5: return "SkylakeX";  // ahead of Cooperlake: 308 against 235 GFLOP/s sgemm on family 6 model 207
    case 4: return "Haswell";
    case 3: return "Sandybridge";
    case 2: return "Nehalem";
    default: return "";
  }
}

std::optional<std::string> stronger_core(const std::string& loaded, int cpu_level) {
  const auto level = openblas_core_level(loaded);
  if (!level || *level >= cpu_level) return std::nullopt;
  const std::string better = core_for_level(cpu_level);
  if (better.empty()) return std::nullopt;
  return better;
}

bool reference_products_ok() { return products_ok<float>() && products_ok<double>(); }

std::string CoreChoice::summary() const {
  if (core.empty()) return "no OpenBLAS";
  std::string s = core + " kernels";
  if (chosen_by == "qkv") {
    const std::string asked = env_or_empty(kQkvCoreEnv);
    s += " (qkv's choice";
    if (!openblas_core.empty()) s += "; OpenBLAS chose " + openblas_core;
    if (!asked.empty() && lower(asked) != lower(core)) s += "; qkv asked for " + asked;
    s += ")";
  } else if (chosen_by == "OPENBLAS_CORETYPE") {
    s += " (OPENBLAS_CORETYPE=" + env_or_empty(kCoreEnv) + ")";
  } else {
    s += " (OpenBLAS's choice";
    if (!rejected.empty()) s += "; qkv's " + rejected + " failed its reference products";
    s += ")";
  }
  if (!reference_ok) s += ", REFERENCE PRODUCTS WRONG";
  return s;
}

void choose_openblas_core(char** argv) {
  const auto core = openblas_corename();
  if (!core) {  // another BLAS: nothing to choose
    made_choice() = CoreChoice{};
    return;
  }
  CoreChoice c = current_choice(*core);
  if (c.chosen_by == "OPENBLAS_CORETYPE") {
    unsetenv(kQkvCoreEnv);  // the user's core type, never overridden; a marker left by a parent is stale
  } else if (c.chosen_by == "OpenBLAS" && c.rejected.empty() && argv) {
    if (const auto better = stronger_core(*core, cpu_blas_level())) {
      setenv(kCoreEnv, better->c_str(), 1);
      setenv(kQkvCoreEnv, better->c_str(), 1);
      setenv(kOwnCoreEnv, core->c_str(), 1);
      reexecute(argv);
    }
  }
  c.reference_ok = reference_products_ok();
  if (!c.reference_ok && c.chosen_by == "qkv" && argv) {  // qkv's core is wrong here: back to OpenBLAS's own
    setenv(kRejectedEnv, env_or_empty(kQkvCoreEnv).c_str(), 1);
    unsetenv(kCoreEnv);
    unsetenv(kQkvCoreEnv);
    unsetenv(kOwnCoreEnv);
    reexecute(argv);
  }
  if (!c.reference_ok && c.chosen_by == "OpenBLAS")
    say_as_is("qkv: warning: OpenBLAS's " + *core +
              " kernels give wrong results on qkv's reference products; set OPENBLAS_CORETYPE to another core (qkv "
              "doctor shows the CPU)");
  made_choice() = c;
}

CoreChoice openblas_core_choice() {
  if (made_choice()) return *made_choice();
  const auto core = openblas_corename();
  if (!core) return {};
  CoreChoice c = current_choice(*core);
  static const bool ok = reference_products_ok();
  c.reference_ok = ok;
  return c;
}

}  // namespace qkv::blas
