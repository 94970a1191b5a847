// GEMM/GEMV kernels instantiated for the portable vector traits.
#include "simd_portable.h"
#include "gemm_impl.h"

namespace tsorch {

// The portable kernel table (see gemm_kernels.h).
const GemmKernels& gemm_kernels_portable() {
  static const GemmKernels kernels = make_kernels<VecPortable>();
  return kernels;
}

}  // namespace tsorch
