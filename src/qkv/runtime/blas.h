#pragma once
// The BLAS that LibTorch loaded into the process, found by symbol name
// (dlsym), so that qkv has no link-time BLAS dependency. Every BLAS symbol qkv
// uses is looked up here.
#include <cstdint>
#include <optional>
#include <string>

namespace qkv::blas {

// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, op(X) = X^T
// when ta / tb. Served by the process's sgemm_ / dgemm_, or by a plain loop
// when no BLAS is loaded. beta = 0 overwrites C (NaN in C does not propagate).
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// The file of the shared library that serves sgemm_, symbolic links resolved;
// "unknown" when no BLAS is loaded.
std::string library();

// OpenBLAS's build configuration (openblas_get_config); nullopt for another BLAS.
std::optional<std::string> openblas_config();

// Intel MKL's version text (MKL_Get_Version_String), where a loaded library
// serves it: PyTorch's wheels link MKL into libtorch_cpu; nullopt otherwise.
std::optional<std::string> mkl_version();

// The kernels OpenBLAS runs (openblas_get_corename: "SkylakeX", "Prescott");
// nullopt for another BLAS. Who chose them: runtime/openblas_core.h.
std::optional<std::string> openblas_corename();

// OpenBLAS's thread count; nullopt for another BLAS.
std::optional<int> openblas_threads();

// Sets OpenBLAS's thread count (OpenBLAS ignores at::set_num_threads); does
// nothing for another BLAS.
void set_openblas_threads(int n);

// Holds OpenBLAS at one thread for a kernel that runs its own workers, and
// gives the caller's count back when it goes out of scope. OpenBLAS (its
// pthreads build) runs any GEMM above 65,536 * 4 multiply-adds on its own
// threads, which from inside such a kernel's workers is a collapse (tiled
// attention, 2026-12-02, 2 cores: 128 x 256 tiles 4.7 GFLOP/s forward against
// 163 at one OpenBLAS thread, timed by a throwaway program before this guard).
// Inside a parallel region it does nothing: the caller's threads may run such
// kernels at once, and the count is global. Holders on several threads at
// once share one hold: the first sets one thread, the last gives the count
// back (a count set meanwhile by set_openblas_threads is the one given
// back), so that no holder's kernel runs with OpenBLAS's threads restored
// under it.
class OneBlasThread {
 public:
  OneBlasThread();
  ~OneBlasThread();
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  bool holding_ = false;
};

}  // namespace qkv::blas
