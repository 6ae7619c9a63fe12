#pragma once
// Where this build put the qkv binary, where the sources are, and the fake
// OpenBLAS core library (openblas_core_test); and the program a test's shell
// command names to run qkv. Defined in test_main.cpp alone,
// the one test source that knows the checkout's absolute paths, so the test
// sources compile the same in any clone and a compiler cache serves them.
namespace qkv::testing {

// The qkv binary itself: for a test that starts it with exec or spawn, to
// signal it or read its resources.
const char* qkv_binary();
// What a test's shell command runs as qkv: the client of the tests' zygote
// (support/qkv_zygote.cpp), which runs the command in a fork of a loaded qkv
// (started with the first call), or qkv_binary() where the zygote cannot
// start or QKV_TEST_FRESH_PROCESSES=1 asks for fresh processes.
const char* qkv_command();
const char* source_dir();
const char* fake_openblas_core_library();

}  // namespace qkv::testing
