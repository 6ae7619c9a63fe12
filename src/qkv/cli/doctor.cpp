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
namespace {

// The measurement's threads are a setting of their own, not the run option:
// any count up to 4096 may be measured, not only those a run would use.
struct DoctorSettings {
  int threads = 0;
  bool skip_speed = false;
};
template <typename V>
void visit_fields(DoctorSettings& s, V&& visit) {
  visit(Field{"threads", "threads for the sgemm measurement; 0 = OMP_NUM_THREADS if set, else one per core"}.range(
            0, 4096),
        s.threads);
  visit(Field{"skip_speed", "skip the sgemm measurement (about a second)", "no-speed"}, s.skip_speed);
}

}  // namespace

void register_doctor(CLI::App& app, Action& action) {
  add_settings_command<DoctorSettings>(
      &app, action,
      CommandText("doctor", "what this machine gives qkv: CPU, BLAS and its kernels, threads, LibTorch")
          .heading("Report")
          .json("print one JSON object instead of lines")
          .keeps_process_settings(),
      [](const auto& o, const c10::Device&) {
        set_threads(o.settings.threads);
        const auto report = machine_report(!o.settings.skip_speed);
        std::printf("%s", o.json ? (report.dump(2) + "\n").c_str() : machine_report_text(report).c_str());
        return 0;
      });
}

}  // namespace qkv::cli
