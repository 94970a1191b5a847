// Integer-path quantized kernels (quant_int_impl.h) with AVX-VNNI's vpdpbusd on ymm registers.
// Compiled with -mavx2 -mfma -mf16c -mavxvnni (binding.gyp target tsorch_quant_avxvnni).
#include "quant_int_traits.h"
#include "quant_int_impl.h"
#include "quant_q4_ymm.h"

namespace tsorch {

// The avx-vnni integer-path table (quant_kernels.h).
const IntQuantKernels& int_quant_kernels_avxvnni() {
  static const IntQuantKernels kernels = make_ymm_int_kernels();
  return kernels;
}

}  // namespace tsorch
