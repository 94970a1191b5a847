// Kernels for compiled graphs on cpu: fused kernels that compile's passes create
// (src/compile/passes) with their Node-API exports (addon_fused.cc; contracts in native.ts; each
// export checks every argument before its kernel runs), and the static KV cache's attention.
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstdint>

#include "ops.h"

namespace tsorch {

// paged_attention (ops.h) for pools of one block per sequence (block tables [S, 1]: the static KV
// cache of compiled generation), with the same results; static_attention.cc.
void static_attention(const PagedAttentionArgs& a);

// v[0..n) = softmax(scale * v) with sdpa's vectorized exp (attention.cc); false (v untouched)
// where the AVX-512 kernels are not in use.
bool softmax_scaled_avx512(float* v, int64_t n, float scale);

// out = x @ w^T + bias + residual: x float32 [M, K], w [N, K] of w_dtype, bias null or [N] of
// bias_dtype, residual and out float32 [M, N] (out may not alias x, w, bias or residual). A
// single row takes residual (+ bias) as the GEMM's bias, so the add costs nothing; more rows add
// the residual to each finished row.
void linear_add(const float* x, const void* w, int w_dtype, const void* bias, int bias_dtype,
                const float* residual, float* out, int64_t M, int64_t N, int64_t K);

napi_value LinearAddExport(napi_env env, napi_callback_info info);

}  // namespace tsorch
