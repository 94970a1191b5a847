// Kernels of the Hub pre-quantized linears (quant_hub.cc): the table each instruction-set variant
// (quant_hub_portable.cc, quant_hub_avx2.cc, quant_hub_avx512.cc) provides. Single-threaded;
// quant_hub.cc splits the output channels over the thread pool.
#pragma once

#include <cstdint>

namespace tsorch {

// A GPTQ / AWQ packed weight (layouts in ops.h): w[n, k] = (q - (z + zero_offset)) * s, group
// g_idx[k]; N a multiple of 32 / bits.
struct PackedIntWeight {
  const int32_t* qweight;
  const int32_t* qzeros;
  const float* scales;
  const int32_t* g_idx;
  int bits;
  bool awq;
  int zero_offset;
  int64_t N, K, G;
};

// An FP8 block-scaled weight: float8_e4m3fn bytes [N, K] times scale_inv of its [block_n, block_k] block.
struct Fp8Weight {
  const uint8_t* w;
  const float* scale_inv;
  int64_t block_n, block_k, N, K;
};

struct HubKernels {
  const char* name;  // "avx512", "avx2" or "portable"
  // Output channels per packed_int task (GPTQ, AWQ): a multiple of 8; the fast paths need full ones.
  int64_t gptq_panel, awq_panel;
  // out[m * N + n] = sum_k x[m * K + k] * w[n, k] (+ bias[n]) for m < M, n0 <= n < n1, with
  // n1 - n0 <= the layout's panel and n0 a multiple of it; weights decoded in registers. Any M, meant
  // for decode-sized M (<= 8).
  void (*packed_int_rows)(const PackedIntWeight& w, const float* x, int64_t M, const float* bias,
                          float* out, int64_t n0, int64_t n1);
  // dst[k * (n1 - n0) + j] = w[n0 + j, k] (k-major panel for the packed GEMM), same [n0, n1) rules.
  void (*packed_int_decode)(const PackedIntWeight& w, float* dst, int64_t n0, int64_t n1);
  // As packed_int_rows for an FP8 weight, any [n0, n1).
  void (*fp8_rows)(const Fp8Weight& w, const float* x, int64_t M, const float* bias, float* out,
                   int64_t n0, int64_t n1);
  // dst[(n - n0) * K + k] = w[n, k] for n0 <= n < n1.
  void (*fp8_decode)(const Fp8Weight& w, float* dst, int64_t n0, int64_t n1);
};

const HubKernels& hub_kernels_portable();
#if defined(TSORCH_X86_KERNELS)
const HubKernels& hub_kernels_avx2();
const HubKernels& hub_kernels_avx512();
#endif

}  // namespace tsorch
