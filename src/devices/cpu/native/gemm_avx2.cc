// GEMM/GEMV kernels instantiated for the avx2 vector traits.
// Compiled with -mavx2 -mfma -mf16c (binding.gyp target tsorch_gemm_avx2).
#include "simd_avx2.h"
#include "gemm_impl.h"

namespace tsorch {

// The avx2 kernel table (see gemm_kernels.h).
const GemmKernels& gemm_kernels_avx2() {
  static const GemmKernels kernels = make_kernels<VecAvx2>();
  return kernels;
}

}  // namespace tsorch
