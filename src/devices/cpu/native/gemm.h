// Matrix-product driver shared by linear, matmul and sdpa: picks the direct or packed kernel of
// the selected instruction set and, in gemm_parallel, splits the work over the thread pool.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tsorch {

// B(k, n) = p[k*sk + n*sn], of dtype float32, float16 or bfloat16.
// weights: B is a layer's bfloat16 weight (linear), which may take the bf16 dot-product GEMM
// (activations rounded to bfloat16, see gemm_kernels.h); attention's K/V never do.
struct BMatrix {
  const void* p;
  int dtype;
  int64_t sk, sn;
  bool weights = false;
};

// Single-threaded: for m < M and n0 <= n < n1,
//   C[m*ldc + n] = sum_k A[m*lda + k] * B(k, n) (+ bias[n] when bias is not null).
void gemm_range(const float* A, int64_t lda, int64_t M, int64_t K, const BMatrix& B,
                const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1);

// The same over all n < N, split over the thread pool by columns (and rows when N is narrow).
void gemm_parallel(const float* A, int64_t lda, int64_t M, int64_t K, const BMatrix& B,
                   const float* bias, float* C, int64_t ldc, int64_t N);

// A per-thread, 64-byte aligned scratch buffer of at least n floats; `slot` (0..3) names
// independent buffers. Valid until the same thread asks for the same slot again.
float* thread_scratch(int slot, size_t n);

}  // namespace tsorch

namespace tsorch {

// Whether gemm_range computes a product of M rows with B by a direct (unpacked, per-column) kernel
// and gemm_parallel would split it at multiples of gemm_direct_granule() columns (linear_group.cc
// and linear_argmax.cc split such products the same way, so each column rounds as in gemm_parallel).
bool gemm_direct(int64_t M, const BMatrix& B);
int64_t gemm_direct_granule();

}  // namespace tsorch
