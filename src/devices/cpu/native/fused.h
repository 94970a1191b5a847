// Fused kernels that compile's passes create on cpu (src/compile/passes), and their Node-API
// exports (addon_fused.cc; contracts in native.ts). Each export checks every argument before its
// kernel runs.
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstdint>

namespace tsorch {

// out = x @ w^T + bias + residual: x float32 [M, K], w [N, K] of w_dtype, bias null or [N] of
// bias_dtype, residual and out float32 [M, N] (out may not alias x, w, bias or residual). A
// single row takes residual (+ bias) as the GEMM's bias, so the add costs nothing; more rows add
// the residual to each finished row.
void linear_add(const float* x, const void* w, int w_dtype, const void* bias, int bias_dtype,
                const float* residual, float* out, int64_t M, int64_t N, int64_t K);

napi_value LinearAddExport(napi_env env, napi_callback_info info);

}  // namespace tsorch
