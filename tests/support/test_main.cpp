// main() of every test executable: GoogleTest's, after qkv's choice of
// OpenBLAS kernels, so the suite runs the BLAS kernels the qkv binary runs.
// Also the checkout's paths (support/paths.h), and the removal of the
// scratch files (support/test_files.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "qkv/runtime/openblas_core.h"
#include "support/paths.h"
#include "support/test_files.h"

namespace qkv::testing {

const char* qkv_binary() { return QKV_BINARY; }
const char* source_dir() { return QKV_SOURCE_DIR; }
const char* fake_openblas_core_library() { return QKV_FAKE_OPENBLAS_CORE; }

}  // namespace qkv::testing

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  // The scratch files go when every test passed; a failure keeps them to look at.
  const auto scratch = qkv::testing::scratch_root();
  std::error_code error;
  if (!std::filesystem::exists(scratch, error)) return status;
  if (status != 0) {
    std::fprintf(stderr, "scratch files kept in %s\n", scratch.c_str());
    return status;
  }
  std::filesystem::remove_all(scratch, error);
  if (error)
    std::fprintf(stderr, "could not remove the scratch folder %s: %s\n", scratch.c_str(), error.message().c_str());
  return status;
}
