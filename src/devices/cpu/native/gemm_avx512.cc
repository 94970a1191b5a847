// GEMM/GEMV kernels instantiated for the avx512 vector traits.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c (binding.gyp target tsorch_gemm_avx512).
#include "simd_avx512.h"
#include "gemm_impl.h"

namespace tsorch {

// The avx512 kernel table (see gemm_kernels.h).
const GemmKernels& gemm_kernels_avx512() {
  static const GemmKernels kernels = make_kernels<VecAvx512>();
  return kernels;
}

}  // namespace tsorch
