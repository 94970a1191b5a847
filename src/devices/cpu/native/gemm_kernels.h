// The table of GEMM/GEMV kernels that each instruction-set variant (gemm_portable.cc,
// gemm_avx2.cc, gemm_avx512.cc) provides, and the load-time choice between them.
//
// All kernels compute, for m < M and n0 <= n < n1,
//   C[m*ldc + n] = sum_k A[m*lda + k] * B(k, n) (+ bias[n])
// with A float32 and bias float32 or null. They are single-threaded; callers split [n0, n1).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tsorch {

struct GemmKernels {
  const char* name;  // "avx512", "avx2" or "portable"
  // Largest M for which the direct (unpacked) kernels beat packing B.
  int64_t direct_max_m;
  // Column granularity of the packed kernel: split [n0, n1) at multiples of it.
  int64_t panel;
  // Column granularity of splits of the direct kernels (gemv_nt / gemv_nn): a multiple of panel and
  // of gemv_nt's column tile (DN, 3 on AVX2), so that a column is computed by the same tile, and so
  // rounds the same, however a product is split (parallel_ranges' pieces depend on timing).
  int64_t direct_granule;
  // Floats of scratch that gemm_packed needs (64-byte aligned).
  size_t packed_scratch_floats;

  // B(k, n) = W[n*ldw + k], W of dtype wdtype (float32, float16 or bfloat16): rows of W are
  // contiguous in k (nn.Linear weights, keys in q @ k^T). Streams W once; best for small M.
  void (*gemv_nt)(const float* A, int64_t lda, int64_t M, int64_t K, const void* W, int wdtype,
                  int64_t ldw, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1);
  // B(k, n) = B[k*ldb + n] of dtype bdtype (float32, float16 or bfloat16), contiguous in n
  // (values in p @ v). Best for small M.
  void (*gemv_nn)(const float* A, int64_t lda, int64_t M, int64_t K, const void* B, int bdtype,
                  int64_t ldb, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1);
  // B(k, n) = B[k*sk + n*sn] of dtype bdtype, any strides: packs B (converted to float32) and A
  // into cache-sized blocks and runs a register-tiled micro-kernel. Best for large M.
  void (*gemm_packed)(const float* A, int64_t lda, int64_t M, int64_t K, const void* B,
                      int bdtype, int64_t sk, int64_t sn, const float* bias, float* C,
                      int64_t ldc, int64_t n0, int64_t n1, float* scratch);
};

const GemmKernels& gemm_kernels_portable();
#if defined(TSORCH_X86_KERNELS)
const GemmKernels& gemm_kernels_avx2();
const GemmKernels& gemm_kernels_avx512();
#endif

// A bfloat16 dot-product GEMM (gemm_avx512bf16.cc): B(k, n) = W[n*ldw + k], W bfloat16, and A
// rounded to bfloat16 before the product (float32 sums). Single-threaded; gemm_parallel packs A
// once (pack_a) and splits the columns of gemm_packed over the pool.
struct Bf16GemmKernels {
  const char* name;  // "avx512-bf16"
  // pack_a then gemm_packed, with the packed A in thread_scratch(3).
  void (*gemm_nt)(const float* A, int64_t lda, int64_t M, int64_t K, const uint16_t* W,
                  int64_t ldw, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1);
  // uint32 words that pack_a writes for an [M, K] A.
  int64_t (*packed_words)(int64_t M, int64_t K);
  // A [M, K] float32 (row stride lda) -> bfloat16 pairs laid out for gemm_packed.
  void (*pack_a)(const float* A, int64_t lda, int64_t M, int64_t K, uint32_t* out);
  // Columns [n0, n1) of C = A W^T (+ bias) from the packed A.
  void (*gemm_packed)(const uint32_t* P, int64_t M, int64_t K, const uint16_t* W, int64_t ldw,
                      const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1);
};
#if defined(TSORCH_X86_KERNELS)
const Bf16GemmKernels& gemm_kernels_avx512bf16();
#endif

}  // namespace tsorch
