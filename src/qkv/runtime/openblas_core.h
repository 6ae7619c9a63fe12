#pragma once
// Which kernels OpenBLAS runs, and the one correction qkv makes to its choice.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels once, when it loads,
// from a table of the CPU models its release knew. On a newer CPU it falls
// back to generic ones: Debian 12's 0.3.21 runs its Prescott (SSE3) kernels on
// an Intel Xeon of family 6 model 207, where its SkylakeX kernels do sgemm
// 5.2x faster. OPENBLAS_CORETYPE overrides the choice but is read only at load
// time, before main, so qkv re-executes itself once with it set.
#include <optional>
#include <string>

namespace qkv::blas {

// How wide an OpenBLAS core's kernels are: 1 SSE2/SSE3, 2 SSE4.2, 3 AVX,
// 4 AVX2 + FMA, 5 AVX-512; 0 for "Unknown"; nullopt for a name qkv does not
// know (then qkv leaves OpenBLAS's choice alone). Case-insensitive.
std::optional<int> openblas_core_level(const std::string& core);

// The widest level this CPU runs (its features, under QKV_CPU_CAPABILITY).
int cpu_blas_level();

// The OpenBLAS core qkv asks for at a level: SkylakeX, Haswell, Sandybridge,
// Nehalem; "" at 1 or below (nothing better than OpenBLAS's floor).
std::string core_for_level(int level);

// The core to ask for instead of `loaded` on a CPU of `cpu_level`, or nullopt
// when OpenBLAS's own choice is as wide as the CPU (or unknown to qkv).
std::optional<std::string> stronger_core(const std::string& loaded, int cpu_level);

// A few small sgemm_ / dgemm_ products (every transpose, edge-sized blocks)
// against a plain double loop; false if any entry is off by more than the
// type's rounding allows.
bool reference_products_ok();

// What runs and who chose it, recorded in config.json and printed by
// `qkv doctor` and at the start of a run.
struct CoreChoice {
  std::string core;             // openblas_get_corename() now; "" without OpenBLAS
  std::string chosen_by;        // "OpenBLAS", "OPENBLAS_CORETYPE" (the user), "qkv"
  std::string openblas_core;    // OpenBLAS's own choice, where qkv replaced it
  std::string rejected;         // a core qkv tried and dropped (its products were wrong)
  bool reference_ok = true;     // reference_products_ok() in this process
  std::string summary() const;  // "SkylakeX kernels (qkv's choice; OpenBLAS chose Prescott)"
};

// Called first in main() of qkv, its tests and benches. When OpenBLAS chose a
// core narrower than the CPU and the user set no OPENBLAS_CORETYPE, re-executes
// the program (same arguments) with OPENBLAS_CORETYPE set and does not return;
// the new process checks the products and, if they are wrong, re-executes once
// more without it. Otherwise records the choice and returns.
void choose_openblas_core(char** argv);

// The choice made by choose_openblas_core, or, where it was not called (a
// library user), what is loaded and who set it.
CoreChoice openblas_core_choice();

}  // namespace qkv::blas
