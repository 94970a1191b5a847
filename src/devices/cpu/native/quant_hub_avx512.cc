// Hub pre-quantized linear kernels (quant_hub_impl.h) for the avx512 tier.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c (binding.gyp target tsorch_gemm_avx512).
#include "quant_hub_impl.h"

namespace tsorch {

// The avx512 Hub pre-quantized kernel table (see quant_hub_kernels.h).
const HubKernels& hub_kernels_avx512() {
  static const HubKernels kernels = make_hub_kernels();
  return kernels;
}

}  // namespace tsorch
