// Block-quantized weights (llama.cpp's q8_0 and q4_0 layouts, float32 scales): the kernel table
// each instruction-set variant (quant_portable.cc, quant_avx2.cc, quant_avx512.cc) provides.
//
// A weight W [N, K] (K a multiple of 32) is stored row by row in blocks of 32 values along K,
// each with one float32 scale d (scales [N, K / 32]):
//   bits 8 (q8_0): 32 int8 codes q, value = q * d;
//   bits 4 (q4_0): 16 bytes, byte j holding element j in its low nibble and element j + 16 in its
//                  high nibble, value = (nibble - 8) * d.
#pragma once

#include <cstdint>

namespace tsorch {

struct QuantKernels {
  const char* name;  // "avx512", "avx2" or "portable"
  // For m < M and n0 <= n < n1: C[m*ldc + n] = sum_k A[m*lda + k] * W(n, k) (+ bias[n]),
  // W decoded in registers. Single-threaded; meant for small M (decode).
  void (*dot_rows)(int bits, const float* A, int64_t lda, int64_t M, int64_t K, const uint8_t* q,
                   const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                   int64_t n1);
  // Rows n0 <= n < n1 of W decoded to float32 into dst[(n - n0) * K + k].
  void (*dequant_rows)(int bits, int64_t K, const uint8_t* q, const float* scales, float* dst,
                       int64_t n0, int64_t n1);
};

const QuantKernels& quant_kernels_portable();
#if defined(TSORCH_X86_KERNELS)
const QuantKernels& quant_kernels_avx2();
const QuantKernels& quant_kernels_avx512();
#endif

// The integer path (quant_int_impl.h): rows of A quantized to int8 blocks of 32, dotted with the
// weight codes in int32 (llama.cpp's q8_0 x q8_0 / q4_0 x q8_0).
struct IntQuantKernels {
  const char* name;  // "avx512-vnni", "avx-vnni", "avx2" or "portable"
  // Bytes of one quantized activation row of K values.
  int64_t (*act_row_bytes)(int64_t K);
  // Rows m0 <= m < m1 of A [M, K] (row stride lda) -> act (row m at m * act_row_bytes(K)), laid
  // out for weights of `bits` bits.
  void (*quantize_act)(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K,
                       uint8_t* act);
  // For m < M and n0 <= n < n1: C[m*ldc + n] = sum_k a(m, k) * W(n, k) (+ bias[n]), a the
  // quantized activations. Single-threaded.
  void (*dot_rows)(int bits, const uint8_t* act, int64_t M, int64_t K, const uint8_t* q,
                   const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                   int64_t n1);
  // Optional (null where the tier has none; avx512-vnni: quant_gemm_vnni.h): the GEMM for several
  // activation rows, with its own activation layout (gemm_act_row_bytes, gemm_quantize_act as
  // above) and W repacked 16 rows at a time into `panel` (gemm_panel_bytes(K), 64-byte aligned,
  // one per thread). gemm_rows computes what dot_rows does; n0 a multiple of 16.
  int64_t (*gemm_act_row_bytes)(int64_t K);
  void (*gemm_quantize_act)(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K,
                            uint8_t* act);
  int64_t (*gemm_panel_bytes)(int64_t K);
  void (*gemm_rows)(int bits, const uint8_t* act, int64_t M, int64_t K, const uint8_t* q,
                    const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                    int64_t n1, uint8_t* panel);
};

const IntQuantKernels& int_quant_kernels_portable();
#if defined(TSORCH_X86_KERNELS)
const IntQuantKernels& int_quant_kernels_avx2();
const IntQuantKernels& int_quant_kernels_avxvnni();
const IntQuantKernels& int_quant_kernels_avx512vnni();
#endif

// Payload bytes of one row of K values.
inline int64_t quant_row_bytes(int bits, int64_t K) { return bits == 8 ? K : K / 2; }

}  // namespace tsorch
