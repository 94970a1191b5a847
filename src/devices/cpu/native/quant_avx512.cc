// Block-quantized linear kernels (quant_impl.h) for the avx512 tier.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c (binding.gyp target tsorch_gemm_avx512).
#include "quant_impl.h"

namespace tsorch {

// The avx512 quantized-weight kernel table (see quant_kernels.h).
const QuantKernels& quant_kernels_avx512() {
  static const QuantKernels kernels{kQuantName, dot_rows, dequant_rows};
  return kernels;
}

}  // namespace tsorch
