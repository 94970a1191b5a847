// Integer-path quantized kernels (quant_int_impl.h) with AVX512-VNNI's vpdpbusd on zmm registers.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma (binding.gyp target
// tsorch_quant_avx512vnni).
#include "quant_int_traits.h"
#include "quant_int_impl.h"

namespace tsorch {

// The avx512-vnni integer-path table (quant_kernels.h).
const IntQuantKernels& int_quant_kernels_avx512vnni() {
  static const IntQuantKernels kernels = make_int_kernels<IntTraits>();
  return kernels;
}

}  // namespace tsorch
