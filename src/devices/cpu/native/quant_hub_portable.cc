// Hub pre-quantized linear kernels (quant_hub_impl.h) for the portable tier.
// Compiled with the baseline target flags.
#include "quant_hub_impl.h"

namespace tsorch {

// The portable Hub pre-quantized kernel table (see quant_hub_kernels.h).
const HubKernels& hub_kernels_portable() {
  static const HubKernels kernels = make_hub_kernels();
  return kernels;
}

}  // namespace tsorch
