// Integer-path quantized kernels (quant_int_impl.h) with AVX512-VNNI's vpdpbusd on zmm registers,
// and the GEMM over repacked panels for several activation rows (quant_gemm_vnni.h).
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (binding.gyp target
// tsorch_quant_avx512vnni).
#include "quant_int_traits.h"
#include "quant_int_impl.h"
#include "quant_gemm_vnni.h"

namespace tsorch {

// The avx512-vnni integer-path table (quant_kernels.h).
const IntQuantKernels& int_quant_kernels_avx512vnni() {
  static const IntQuantKernels kernels = [] {
    IntQuantKernels k = make_int_kernels<IntTraits>();
    k.gemm_act_row_bytes = gemm_act_row_bytes;
    k.gemm_quantize_act = gemm_quantize_act;
    k.gemm_panel_bytes = gemm_panel_bytes;
    k.gemm_rows = gemm_rows;
    return k;
  }();
  return kernels;
}

}  // namespace tsorch
