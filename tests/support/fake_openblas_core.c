/* Loaded with LD_PRELOAD by tests/core/openblas_core_test.cpp: makes the real
   OpenBLAS look as Debian 12's 0.3.21 does on a CPU it does not know. With no
   OPENBLAS_CORETYPE set it reports "Prescott" (its generic fallback); with one
   set it reports what OpenBLAS runs. With FAKE_BROKEN_CORE=NAME, sgemm_ gives
   a wrong entry while OPENBLAS_CORETYPE=NAME, so the path that drops a core
   whose products are wrong can be run. Everything else is the real library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static int coretype_set(void) {
  const char* set = getenv("OPENBLAS_CORETYPE");
  return set && *set;
}

char* openblas_get_corename(void) {
  if (!coretype_set()) return (char*)"Prescott";
  char* (*real)(void) = (char* (*)(void))dlsym(RTLD_NEXT, "openblas_get_corename");
  return real ? real() : (char*)"unknown";
}

typedef void (*sgemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);

void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  sgemm_fn real = (sgemm_fn)dlsym(RTLD_NEXT, "sgemm_");
  real(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const char* broken = getenv("FAKE_BROKEN_CORE");
  const char* set = getenv("OPENBLAS_CORETYPE");
  if (broken && set && strcmp(broken, set) == 0 && *m > 0 && *n > 0) c[0] += 1.0f;
}
