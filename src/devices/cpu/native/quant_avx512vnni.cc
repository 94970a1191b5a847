// Integer-path quantized kernels (quant_int_impl.h) with AVX512-VNNI's vpdpbusd on zmm registers,
// q4_0 weights four blocks per step for decode (quant_q4_vnni512.h), and the GEMM over repacked
// panels for several activation rows (quant_gemm_vnni.h).
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (binding.gyp target
// tsorch_quant_avx512vnni).
#include "quant_int_traits.h"
#include "quant_int_impl.h"
#include "quant_gemm_vnni.h"
#include "quant_q4_vnni512.h"

namespace tsorch {

namespace {

// The activation row holds either layout (q8_0: quant_int_impl.h's, q4_0: quant_q4_vnni512.h's).
int64_t act_row_bytes_512(int64_t K) {
  const int64_t a = act_row_bytes<IntTraits>(K), b = q4_row_bytes(K);
  return a > b ? a : b;
}

void quantize_act_512(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K, uint8_t* act) {
  const int64_t stride = act_row_bytes_512(K);
  if (bits == 4) {
    q4_quantize_chunks<IntTraits, 4>(A, lda, m0, m1, K, act, stride, [](const int8_t* lo, int32_t* corr) {
      const __m512i eight = _mm512_set1_epi8(8);
      const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, _mm512_loadu_si512(lo)),
                                            eight, _mm512_loadu_si512(lo + 64));
      _mm512_storeu_si512(corr, _mm512_sub_epi32(_mm512_setzero_si512(), s));
    });
    for (int64_t m = m0; m < m1; ++m) q4_row_terms(act + m * stride, K);  // once per row, not per piece of W
    return;
  }
  quantize_act_strided<IntTraits>(bits, A, lda, m0, m1, K, act, stride);  // q8_0
}

void dot_rows_512(int bits, const uint8_t* act, int64_t M, int64_t K, const uint8_t* q, const float* scales,
                  const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t stride = act_row_bytes_512(K);
  if (bits == 4) return q4_dot_rows(act, stride, M, K, q, scales, bias, C, ldc, n0, n1);
  idot_rows_at<IntTraits>(bits, act, stride, M, K, q, scales, bias, C, ldc, n0, n1);  // q8_0
}

}  // namespace

// The avx512-vnni integer-path table (quant_kernels.h).
const IntQuantKernels& int_quant_kernels_avx512vnni() {
  static const IntQuantKernels kernels = [] {
    IntQuantKernels k = make_int_kernels<IntTraits>();
    k.act_row_bytes = act_row_bytes_512;
    k.quantize_act = quantize_act_512;
    k.dot_rows = dot_rows_512;
    k.gemm_act_row_bytes = gemm_act_row_bytes;
    k.gemm_quantize_act = gemm_quantize_act;
    k.gemm_panel_bytes = gemm_panel_bytes;
    k.gemm_rows = gemm_rows;
    return k;
  }();
  return kernels;
}

}  // namespace tsorch
