// CPU feature detection and the load-time choice of kernels.
#pragma once

#include <string>

#include "gemm_kernels.h"

namespace tsorch {

// The GEMM kernels for this CPU: avx512 (AVX-512 F/BW/VL), else avx2 (AVX2 + FMA + F16C), else
// portable. TSORCH_CPU_ISA=avx2|portable picks a lower tier (to test those paths).
const GemmKernels& gemm_kernels();

// Space-separated features detected, then "kernels=<tier>", e.g. "avx2 fma f16c kernels=avx2".
const std::string& cpu_features();

}  // namespace tsorch
