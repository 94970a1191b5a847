// Hub pre-quantized linear kernels (quant_hub_impl.h) for the avx2 tier.
// Compiled with -mavx2 -mfma -mf16c (binding.gyp target tsorch_gemm_avx2).
#include "quant_hub_impl.h"

namespace tsorch {

// The avx2 Hub pre-quantized kernel table (see quant_hub_kernels.h).
const HubKernels& hub_kernels_avx2() {
  static const HubKernels kernels = make_hub_kernels();
  return kernels;
}

}  // namespace tsorch
