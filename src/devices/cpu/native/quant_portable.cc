// Block-quantized linear kernels (quant_impl.h) for the portable tier.
// Compiled for the baseline target.
#include "quant_impl.h"
#include "quant_int_traits.h"
#include "quant_int_impl.h"

namespace tsorch {

// The portable quantized-weight kernel table (see quant_kernels.h).
const QuantKernels& quant_kernels_portable() {
  static const QuantKernels kernels{kQuantName, dot_rows, dequant_rows};
  return kernels;
}

// The portable integer-path table (quant_int_impl.h).
const IntQuantKernels& int_quant_kernels_portable() {
  static const IntQuantKernels kernels = make_int_kernels<IntTraits>();
  return kernels;
}

}  // namespace tsorch
