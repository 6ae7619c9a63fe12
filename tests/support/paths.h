#pragma once
// Where this build put the qkv binary, where the sources are, and the fake
// OpenBLAS core library (openblas_core_test). Defined in test_main.cpp alone,
// the one test source that knows the checkout's absolute paths, so the test
// sources compile the same in any clone and a compiler cache serves them.
namespace qkv::testing {

const char* qkv_binary();
const char* source_dir();
const char* fake_openblas_core_library();

}  // namespace qkv::testing
