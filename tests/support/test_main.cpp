// main() of every test executable: GoogleTest's, after qkv's choice of
// OpenBLAS kernels, so the suite runs the BLAS kernels the qkv binary runs.
// Also the checkout's paths (support/paths.h).
#include <gtest/gtest.h>

#include "qkv/runtime/openblas_core.h"
#include "support/paths.h"

namespace qkv::testing {

const char* qkv_binary() { return QKV_BINARY; }
const char* source_dir() { return QKV_SOURCE_DIR; }
const char* fake_openblas_core_library() { return QKV_FAKE_OPENBLAS_CORE; }

}  // namespace qkv::testing

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
