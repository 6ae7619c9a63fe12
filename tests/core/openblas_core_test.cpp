// qkv's choice of OpenBLAS kernels (runtime/openblas_core.h): the decision on
// its own, and end to end through the qkv binary with a preloaded library
// that makes OpenBLAS look as it does on a CPU its release did not know.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"
#include "support/cli_run.h"
#include "support/paths.h"
#include "support/test_files.h"

namespace {

namespace fs = std::filesystem;
using qkv::testing::run_shell;

// qkv with the fake core library preloaded; the caller's own OpenBLAS
// variables are cleared so that only those of `env` count. QKV_CPU_CAPABILITY
// is kept: this process's expectations (cpu_blas_level) follow it too. In an
// AddressSanitizer build (make check-asan) the preloaded library comes before
// the ASan runtime, which ASan refuses unless told that this is meant (the
// fake library allocates nothing); other builds ignore ASAN_OPTIONS.
qkv::testing::CliResult run_faked(const std::string& env, const std::string& args) {
  return run_shell(std::string("env -u OPENBLAS_CORETYPE -u QKV_OPENBLAS_CORETYPE -u QKV_OPENBLAS_OWN_CORE "
                               "-u QKV_OPENBLAS_REJECTED \"ASAN_OPTIONS=${ASAN_OPTIONS}:verify_asan_link_order=0\" "
                               "LD_PRELOAD=") +
                   qkv::testing::fake_openblas_core_library() + " " + env + " " + qkv::testing::qkv_binary() + " " +
                   args + " 2>&1");
}

nlohmann::json doctor_blas(const qkv::testing::CliResult& r) {
  EXPECT_EQ(r.status, 0) << r.output;
  return qkv::testing::trailing_json(r.output).at("blas");
}

bool has_openblas() { return qkv::blas_info().value("name", "") == "OpenBLAS"; }

TEST(OpenBlasCore, LevelsOfCoreNames) {
  using qkv::blas::openblas_core_level;
  EXPECT_EQ(openblas_core_level("Prescott"), 1);
  EXPECT_EQ(openblas_core_level("Nehalem"), 2);
  EXPECT_EQ(openblas_core_level("Sandybridge"), 3);
  EXPECT_EQ(openblas_core_level("Haswell"), 4);
  EXPECT_EQ(openblas_core_level("ZEN"), 4);
  EXPECT_EQ(openblas_core_level("SkylakeX"), 5);
  EXPECT_EQ(openblas_core_level("cooperlake"), 5);
  EXPECT_EQ(openblas_core_level("Unknown"), 0);
  EXPECT_FALSE(openblas_core_level("NeoverseN1").has_value());
  EXPECT_FALSE(openblas_core_level("").has_value());
}

TEST(OpenBlasCore, AStrongerCoreOnlyWhereOpenBlasChoseANarrowerOne) {
  using qkv::blas::stronger_core;
  EXPECT_EQ(stronger_core("Prescott", 5), "SkylakeX");
  EXPECT_EQ(stronger_core("Unknown", 4), "Haswell");
  EXPECT_EQ(stronger_core("Haswell", 5), "SkylakeX");
  EXPECT_EQ(stronger_core("Nehalem", 3), "Sandybridge");
  EXPECT_FALSE(stronger_core("Cooperlake", 5).has_value());  // its own AVX-512 choice stands
  EXPECT_FALSE(stronger_core("Zen", 4).has_value());
  EXPECT_FALSE(stronger_core("SkylakeX", 4).has_value());      // never narrower than OpenBLAS's
  EXPECT_FALSE(stronger_core("Prescott", 1).has_value());      // nothing better on plain x86-64
  EXPECT_FALSE(stronger_core("ThunderX2T99", 5).has_value());  // a name qkv does not know
  for (int level = 2; level <= 5; ++level)
    EXPECT_EQ(qkv::blas::openblas_core_level(qkv::blas::core_for_level(level)), level) << level;
}

TEST(OpenBlasCore, ReferenceProductsPassOnTheLoadedBlas) { EXPECT_TRUE(qkv::blas::reference_products_ok()); }

TEST(OpenBlasCore, QkvReplacesAFallbackCoreAndSaysSo) {
  if (!has_openblas()) GTEST_SKIP() << "no OpenBLAS loaded";
  const std::string best = qkv::blas::core_for_level(qkv::blas::cpu_blas_level());
  if (best.empty()) GTEST_SKIP() << "this CPU has nothing wider than OpenBLAS's generic kernels";
  const auto blas = doctor_blas(run_faked("", "doctor --json --no-speed"));
  EXPECT_EQ(blas.at("core"), best) << blas.dump();
  EXPECT_EQ(blas.at("core_chosen_by"), "qkv") << blas.dump();
  EXPECT_EQ(blas.at("openblas_own_core"), "Prescott") << blas.dump();
  EXPECT_EQ(blas.at("reference_products"), "passed") << blas.dump();
  EXPECT_NE(blas.at("summary").get<std::string>().find("OpenBLAS chose Prescott"), std::string::npos) << blas.dump();

  // A run says it in its first lines and in config.json.
  const auto dir = qkv::testing::fresh_dir("openblas_core_run");
  const auto r = run_faked("", "spirals train --epochs 1 --threads 1 --points-per-arm 30 --batch-size 16 --out " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(best + " kernels (qkv's choice; OpenBLAS chose Prescott)"), std::string::npos) << r.output;
  const auto config = qkv::testing::read_json(dir + "/config.json");
  EXPECT_EQ(config.at("blas").at("core"), best);
  EXPECT_EQ(config.at("blas").at("core_chosen_by"), "qkv");
}

TEST(OpenBlasCore, ACoreWithWrongProductsIsDropped) {
  if (!has_openblas()) GTEST_SKIP() << "no OpenBLAS loaded";
  const std::string best = qkv::blas::core_for_level(qkv::blas::cpu_blas_level());
  if (best.empty()) GTEST_SKIP() << "this CPU has nothing wider than OpenBLAS's generic kernels";
  const auto blas = doctor_blas(run_faked("FAKE_BROKEN_CORE=" + best, "doctor --json --no-speed"));
  EXPECT_EQ(blas.at("core"), "Prescott") << blas.dump();
  EXPECT_EQ(blas.at("core_chosen_by"), "OpenBLAS") << blas.dump();
  EXPECT_EQ(blas.at("core_rejected"), best) << blas.dump();
  EXPECT_EQ(blas.at("reference_products"), "passed") << blas.dump();
}

TEST(OpenBlasCore, TheUsersCoreTypeIsNeverOverridden) {
  if (!has_openblas()) GTEST_SKIP() << "no OpenBLAS loaded";
  // Nehalem runs on every x86-64 CPU qkv's levels know of above SSE3.
  if (qkv::blas::cpu_blas_level() < 2) GTEST_SKIP() << "this CPU lacks SSE4.2";
  const auto blas = doctor_blas(run_faked("OPENBLAS_CORETYPE=Nehalem", "doctor --json --no-speed"));
  EXPECT_EQ(blas.at("core"), "Nehalem") << blas.dump();
  EXPECT_EQ(blas.at("core_chosen_by"), "OPENBLAS_CORETYPE") << blas.dump();
  EXPECT_FALSE(blas.contains("openblas_own_core")) << blas.dump();
}

TEST(OpenBlasCore, CapabilityCapChoosesANarrowerCoreAndBadValuesAreRefused) {
  if (!has_openblas()) GTEST_SKIP() << "no OpenBLAS loaded";
  if (qkv::blas::cpu_blas_level() < 4) GTEST_SKIP() << "this CPU lacks AVX2";
  const auto blas = doctor_blas(run_faked("QKV_CPU_CAPABILITY=avx2", "doctor --json --no-speed"));
  EXPECT_EQ(blas.at("core"), "Haswell") << blas.dump();
  const auto bad = run_faked("QKV_CPU_CAPABILITY=avx9", "doctor --no-speed");
  qkv::testing::expect_clean_failure(bad, 2, "QKV_CPU_CAPABILITY=avx9");
}

TEST(OpenBlasCore, DoctorPrintsTheMachine) {
  const auto r = qkv::testing::run_qkv("doctor --threads 1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"qkv ", "CPU: ", "vector extensions: ", "qkv's kernels: ", "BLAS: ", "threads: LibTorch 1",
                           "sgemm 1024^3 float32"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " in\n" << r.output;
}

// Each visible GPU gets a line saying whether qkv's CUDA kernels have code
// for it (else LibTorch's serve it); the architectures they were built for
// are named where they were built.
TEST(Doctor, ListsEachGpuAndWhetherQkvsKernelsRunThere) {
  const auto r = qkv::testing::run_qkv("doctor --json --no-speed");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto d = qkv::testing::trailing_json(r.output);
  const auto& libtorch = d.at("libtorch");
  const bool built = libtorch.at("qkv_cuda_kernels").get<bool>();
  EXPECT_EQ(built, !libtorch.at("qkv_cuda_architectures").get<std::string>().empty()) << libtorch.dump();
  ASSERT_EQ(d.at("gpu_devices").size(), libtorch.at("gpus").get<size_t>()) << d.dump();
  const auto text = qkv::testing::run_qkv("doctor --no-speed");
  for (const auto& gpu : d.at("gpu_devices")) {
    if (!built) {
      EXPECT_FALSE(gpu.at("qkv_kernels_run").get<bool>()) << gpu.dump();
    }
    EXPECT_NE(text.output.find(gpu.at("device").get<std::string>() + ": "), std::string::npos) << text.output;
  }
}

}  // namespace
