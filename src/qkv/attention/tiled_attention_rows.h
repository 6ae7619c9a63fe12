#pragma once
// Row kernels of the tiled attention kernel (tiled_attention.cpp), on one row
// of a score tile: max, exp-and-sum, the softmax backward product and scaling.
// float has AVX-512 and AVX2+FMA versions, the widest the CPU runs chosen at
// run time (the library is compiled for the baseline ISA, and std::exp per
// element would cost more than the tile GEMMs); double and other CPUs use the
// portable loops.
#include <cstdint>
#include <vector>

namespace qkv::attention::rows {

// max of x[0..n); -inf when n = 0.
float max(const float* x, int64_t n);
double max(const double* x, int64_t n);

// x[i] = exp(x[i] - shift), returns the sum. shift is finite; exp(-inf) = 0.
float exp_sum(float* x, int64_t n, float shift);
double exp_sum(double* x, int64_t n, double shift);

// dp[i] = p[i] * (dp[i] - D): the score gradient dS from dP and P.
void dsoftmax(float* dp, const float* p, int64_t n, float D);
void dsoftmax(double* dp, const double* p, int64_t n, double D);

// x[i] *= a.
void scale(float* x, int64_t n, float a);
void scale(double* x, int64_t n, double a);

// The float versions this CPU can run, each named by its instruction set
// ("portable", "avx2", "avx512"): the functions above use the last one; tests
// check every one.
struct FloatRowKernels {
  const char* name;
  float (*max)(const float*, int64_t);
  float (*exp_sum)(float*, int64_t, float);
  void (*dsoftmax)(float*, const float*, int64_t, float);
  void (*scale)(float*, int64_t, float);
};
std::vector<FloatRowKernels> float_row_kernels_here();

}  // namespace qkv::attention::rows
