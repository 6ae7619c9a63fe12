#pragma once
// What every command that computes is given besides its settings: the seed,
// the threads, the device, and where it writes. Not settings of a run:
// config.json records the seed and the machine, not these choices.
#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "qkv/core/fields.h"
#include "qkv/runtime/runtime.h"

namespace qkv {

struct RunOptions {
  uint64_t seed = 0;
  int threads = 0;  // 0: OMP_NUM_THREADS if set, else one per core
  std::string device = "cpu";
  std::string out;  // a folder or a file, as the command says
  bool overwrite = false;
};

inline constexpr const char* kOverwriteHelp =
    "replace what qkv wrote at this command's output before, other commands' files inside it included (never a "
    "file qkv did not write, nor an output another command made); without it an existing output is refused";

// `out`'s help is the command's; a command that writes nothing leaves out
// and overwrite out of its options.
template <typename V>
void visit_fields(RunOptions& o, V&& visit) {
  visit(Field{"seed", "random seed (data, initialisation, order)"}.range(0, kMaxSeed), o.seed);
  visit(Field{"threads", "intra-op threads for LibTorch and OpenBLAS; 0 = OMP_NUM_THREADS if set, else one per core"}
            .range(0, max_useful_threads()),
        o.threads);
  visit(Field{"device", "cpu, or cuda[:N] where LibTorch was built with CUDA"}, o.device);
  visit(Field{"out", "where to write"}, o.out);
  visit(Field{"overwrite", kOverwriteHelp}, o.overwrite);
}

// Sets the threads and the seed; returns the device (UsageError if this
// build or machine has none such).
c10::Device apply_run_options(const RunOptions& o);

}  // namespace qkv
