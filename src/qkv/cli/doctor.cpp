// qkv doctor: what this machine gives qkv (CPU, vector extensions, BLAS and
// its kernels, threads, LibTorch's build) and how fast its sgemm runs, so a
// slow run can be explained before it is started (runtime/machine_report.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "qkv/cli/commands.h"
#include "qkv/cli/common.h"
#include "qkv/runtime/machine_report.h"
#include "qkv/runtime/runtime.h"

namespace qkv::cli {

void register_doctor(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("doctor", "what this machine gives qkv: CPU, BLAS and its kernels, threads, LibTorch");
  struct Options {
    int threads = 0;
    bool json = false;
    bool skip_speed = false;
  };
  auto o = std::make_shared<Options>();
  add_ranged_option(cmd, "--threads", o->threads,
                    "threads for the sgemm measurement; 0 = OMP_NUM_THREADS if set, else one per core", 0, 4096);
  cmd->add_flag("--json", o->json, "print one JSON object instead of lines");
  cmd->add_flag("--no-speed", o->skip_speed, "skip the sgemm measurement (about a second)");
  action = [o] {
    set_threads(o->threads);
    const auto report = machine_report(!o->skip_speed);
    std::printf("%s", o->json ? (report.dump(2) + "\n").c_str() : machine_report_text(report).c_str());
    return 0;
  };
}

}  // namespace qkv::cli
