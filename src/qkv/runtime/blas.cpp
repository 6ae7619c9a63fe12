#include "qkv/runtime/blas.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace qkv::blas {
namespace {

template <typename Fn>
Fn find_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// Fortran BLAS: column-major, every argument by pointer.
template <typename T>
using gemm_fn = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*, const int*,
                         const T*, const int*, const T*, T*, const int*);

template <typename T>
gemm_fn<T> find_gemm() {
  static const gemm_fn<T> fn = find_symbol<gemm_fn<T>>(std::is_same_v<T, float> ? "sgemm_" : "dgemm_");
  return fn;
}

template <typename T>
void gemm_loop(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < K; ++p)
        acc += (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
      C[i * ldc + j] = alpha * acc + (beta == T(0) ? T(0) : beta * C[i * ldc + j]);
    }
}

// A row-major matrix is its transpose in column-major order, so the row-major
// product is the column-major product C^T = op(B)^T op(A)^T: the operands swap
// places and keep their flags.
template <typename T>
void gemm_row_major(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                    int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  const char opa = tb ? 'T' : 'N', opb = ta ? 'T' : 'N';
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
  if (auto fn = find_gemm<T>()) return fn(&opa, &opb, &m, &n, &k, &alpha, B, &la, A, &lb, &beta, C, &lc);
  gemm_loop(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_row_major(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  gemm_row_major(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

std::string library() {
  std::string path = "unknown";
  if (void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_")) {
    Dl_info where{};
    if (dladdr(sgemm, &where) && where.dli_fname) path = where.dli_fname;
  }
  char resolved[PATH_MAX];
  if (path != "unknown" && realpath(path.c_str(), resolved)) path = resolved;
  return path;
}

std::optional<std::string> openblas_config() {
  if (auto config = find_symbol<char* (*)()>("openblas_get_config")) return std::string(config());
  return std::nullopt;
}

std::optional<std::string> mkl_version() {
  auto version = find_symbol<void (*)(char*, int)>("MKL_Get_Version_String");
  if (!version) return std::nullopt;
  char text[256] = {};
  version(text, sizeof text - 1);
  return std::string(text);
}

std::optional<std::string> openblas_corename() {
  if (auto name = find_symbol<char* (*)()>("openblas_get_corename")) return std::string(name());
  return std::nullopt;
}

std::optional<int> openblas_threads() {
  if (auto threads = find_symbol<int (*)()>("openblas_get_num_threads")) return threads();
  return std::nullopt;
}

namespace {
// The process's one hold (OneBlasThread): how many holders, and the count to
// give back when the last goes (0: OpenBLAS ran on one thread already).
struct BlasHold {
  std::mutex mutex;
  int64_t holders = 0;
  int saved = 0;
};
BlasHold& blas_hold() {
  static BlasHold hold;
  return hold;
}

void apply_openblas_threads(int n) {
  if (auto set = find_symbol<void (*)(int)>("openblas_set_num_threads")) set(n);
}
}  // namespace

void set_openblas_threads(int n) {
  auto& hold = blas_hold();
  std::lock_guard<std::mutex> lock(hold.mutex);
  if (hold.holders > 0)
    hold.saved = n;  // the count the last holder gives back
  else
    apply_openblas_threads(n);
}

OneBlasThread::OneBlasThread() {
  if (at::in_parallel_region()) return;
  auto& hold = blas_hold();
  std::lock_guard<std::mutex> lock(hold.mutex);
  holding_ = true;
  if (hold.holders++ > 0) return;
  const int threads = openblas_threads().value_or(1);
  hold.saved = threads > 1 ? threads : 0;
  if (threads > 1) apply_openblas_threads(1);
}

OneBlasThread::~OneBlasThread() {
  if (!holding_) return;
  auto& hold = blas_hold();
  std::lock_guard<std::mutex> lock(hold.mutex);
  if (--hold.holders == 0 && hold.saved > 1) apply_openblas_threads(hold.saved);
}

}  // namespace qkv::blas
