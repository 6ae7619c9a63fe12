// The optional libraries (runtime/build_parts.h): each is listed with what it
// serves, and in a build without one, what needs it is refused by name with
// one line, before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/distributed/process_group.h"
#include "qkv/learners/xgboost.h"
#include "qkv/medical/nifti.h"
#include "qkv/pointcloud/h5_file.h"
#include "qkv/runtime/build_parts.h"
#include "support/cli_run.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

bool all_built() {
  for (const auto& p : optional_parts())
    if (!p.built) return false;
  return true;
}

}  // namespace

TEST(BuildParts, EachOptionalLibraryIsListedOnceAndTheDoctorSaysWhichAreBuilt) {
  std::vector<std::string> names;
  for (const auto& p : optional_parts()) {
    names.push_back(p.name);
    EXPECT_EQ(built_with(p.part), p.built) << p.name;
    // Debian's development package, except NCCL's, which comes with a CUDA PyTorch.
    if (p.part != Part::Nccl) {
      EXPECT_NE(std::string(p.package).find("-dev"), std::string::npos) << p.name;
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"HDF5", "NIfTI", "XGBoost", "Gloo", "NCCL"}));
  const auto r = run_qkv("doctor --no-speed");
  ASSERT_EQ(r.status, 0) << r.output;
  std::string built;
  for (const auto& p : optional_parts()) {
    if (p.built) built += (built.empty() ? "" : ", ") + std::string(p.name);
    const auto without = "built without " + std::string(p.name) + " (" + p.package;
    EXPECT_EQ(r.output.find(without) != std::string::npos, !p.built) << r.output;
  }
  EXPECT_NE(r.output.find("optional libraries: " + (built.empty() ? std::string("none") : built) + "\n"),
            std::string::npos)
      << r.output;
}

TEST(BuildParts, WhatAMissingLibraryServesIsRefusedByNameBeforeAnythingIsWritten) {
  if (all_built()) GTEST_SKIP() << "every optional library is built: nothing to refuse";
  const auto dir = fresh_dir("build_parts");
  const auto existing = dir + "/existing.bin";
  write_text_file(existing, "some bytes");
  const auto says_without = [](const std::string& message, const char* name, const char* package) {
    EXPECT_NE(message.find(std::string("this qkv was built without ") + name), std::string::npos) << message;
    EXPECT_NE(message.find(package), std::string::npos) << message;
  };
  if (!built_with(Part::Hdf5)) {
    says_without(data_error_of([&] { pointcloud::H5File h5(existing); }), "HDF5", "libhdf5-dev");
    // A missing file is the error every reader gives, not the build's.
    EXPECT_EQ(data_error_of([&] { pointcloud::H5File h5(dir + "/absent.h5"); }).find("built without"),
              std::string::npos);
  }
  if (!built_with(Part::Nifti)) {
    says_without(data_error_of([&] { medical::read_nifti(existing); }), "NIfTI", "libnifti2-dev");
    says_without(data_error_of([&] { medical::read_nifti_grid(existing); }), "NIfTI", "libnifti2-dev");
    medical::Volume volume;
    volume.dims = {2, 2, 2};
    volume.voxels.assign(8, 1.f);
    const auto out = dir + "/out.nii.gz";
    says_without(data_error_of([&] { medical::write_nifti(out, volume); }), "NIfTI", "libnifti2-dev");
    EXPECT_FALSE(std::filesystem::exists(out));
    // A synthetic cohort is volumes: refused before its folder is made.
    const auto cohort = dir + "/cohort";
    expect_clean_failure(run_qkv("mhca synth --out " + cohort), 1, cohort + ": this qkv was built without NIfTI");
    EXPECT_FALSE(std::filesystem::exists(cohort));
  }
  if (!built_with(Part::XGBoost)) {
    const std::vector<float> x{0, 1, 2, 3};
    medical::XGBoostClassifier classifier;
    says_without(data_error_of([&] { classifier.fit(x.data(), 4, 1, {0, 1, 0, 1}); }), "XGBoost", "libxgboost-dev");
    says_without(data_error_of([&] { medical::XGBoostClassifier::load({'{', '}'}); }), "XGBoost", "libxgboost-dev");
    // mhca cv's default selects CpGs by RFE and runs the XGBoost baseline:
    // each refused before the cohort is read or the run folder made.
    const auto out = dir + "/cv";
    const auto cv = "mhca cv --manifest " + existing + " --methylation " + existing + " --out " + out;
    expect_clean_failure(run_qkv(cv), 1, "RFE feature selection: this qkv was built without XGBoost");
    expect_clean_failure(run_qkv(cv + " --select all --model xgboost"), 1,
                         "--model xgboost: this qkv was built without XGBoost");
    expect_clean_failure(
        run_qkv("mhca select --manifest " + existing + " --methylation " + existing + " --output " + dir + "/cpgs.txt"),
        1, "RFE feature selection: this qkv was built without XGBoost");
    EXPECT_FALSE(std::filesystem::exists(dir + "/cpgs.txt"));
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  if (!built_with(Part::Gloo)) {
    distributed::ParallelOptions two;
    two.world_size = 2;
    says_without(data_error_of([&] { distributed::resolve_parallel_options(two, {"world_size"}); }), "Gloo",
                 "libgloo-dev");
    distributed::ParallelOptions one;
    EXPECT_EQ(distributed::resolve_parallel_options(one, {"world_size"}).world_size, 1);
  }
  if (!built_with(Part::Nccl)) {
    // Asked for by name, NCCL is refused naming the option; auto takes gloo.
    distributed::ParallelOptions two;
    two.world_size = 2;
    two.backend = "nccl";
    try {
      distributed::collective_backend(two, c10::Device(c10::kCUDA, 0));
      FAIL() << "nccl accepted without NCCL";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key, "dist_backend");
      says_without(e.what(), "NCCL", "a PyTorch 2.11 or later with CUDA");
    }
    two.backend = "auto";
    EXPECT_EQ(distributed::collective_backend(two, c10::Device(c10::kCUDA, 0)), "gloo");
  }
}

}  // namespace qkv::testing
