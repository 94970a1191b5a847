// CPU feature detection and the load-time choice of kernels.
#pragma once

#include <string>

#include "gemm_kernels.h"
#include "quant_kernels.h"

namespace tsorch {

// The GEMM kernels for this CPU: avx512 (AVX-512 F/BW/VL), else avx2 (AVX2 + FMA + F16C), else
// portable. TSORCH_CPU_ISA=avx2|portable picks a lower tier (to test those paths).
const GemmKernels& gemm_kernels();

// The integer path of quantized linears (null: float activations, TSORCH_CPU_INT8=off).
const IntQuantKernels* int_quant_kernels();
// The bfloat16 dot-product GEMM (AVX512-BF16 hosts; TSORCH_CPU_BF16=f32 turns it off), or null.
const Bf16GemmKernels* bf16_gemm_kernels();
// Space-separated features detected, then "kernels=<tier> int8=<path> bf16=<path> clones=<level>"
// (isa_clones.h), e.g. "avx2 fma f16c kernels=avx2 int8=avx2 bf16=f32 clones=x86-64-v3".
const std::string& cpu_features();

}  // namespace tsorch
