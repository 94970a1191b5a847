// Block-quantized linear kernels (quant_impl.h) for the avx2 tier.
// Compiled with -mavx2 -mfma -mf16c (binding.gyp target tsorch_gemm_avx2).
#include "quant_impl.h"
#include "quant_int_traits.h"
#include "quant_int_impl.h"
#include "quant_q4_ymm.h"

namespace tsorch {

// The avx2 quantized-weight kernel table (see quant_kernels.h).
const QuantKernels& quant_kernels_avx2() {
  static const QuantKernels kernels{kQuantName, dot_rows, dequant_rows};
  return kernels;
}

// The avx2 integer-path table (quant_int_impl.h).
const IntQuantKernels& int_quant_kernels_avx2() {
  static const IntQuantKernels kernels = make_ymm_int_kernels();
  return kernels;
}

}  // namespace tsorch
