// Kernels for compiled graphs on cpu: fused kernels that compile's passes create
// (src/compile/passes) with their Node-API exports (addon_fused.cc; contracts in native.ts; each
// export checks every argument before its kernel runs), and the static KV cache's attention.
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstdint>
#include <vector>

#include "napi_args.h"
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

// The input of a fused product (linear_group.cc, linear_argmax.cc): x float32 [M, K] and the RMS
// norm n applied to its rows first, rms_norm(…, norm_w, eps, offset), or with norm_w null none.
struct NormedInput {
  const float* x = nullptr;
  int64_t M = 0, K = 0;
  const void* norm_w = nullptr;
  int norm_dtype = 0;
  float eps = 0, offset = 0;
};
// n(x): x itself, or its normalized rows in `scratch` (resized).
const float* normed_rows(const NormedInput& in, std::vector<float>& scratch);
// Reads and checks an export's arguments 0..6 (x, M, K, normW, normDtype, eps, offset) into `in`;
// false once any argument failed (the error is thrown).
bool read_normed_input(Args& args, NormedInput* in);

// Up to three linears sharing one input (linear_group.cc): out[g] = n(x) @ w[g]^T, n(x) as
// NormedInput's;
// w[g] [N[g], K] of w_dtype[g]; out[g] float32 [M, N[g]]. With `prog` (a fused_elementwise program
// of nsteps steps over inputs 0..G-1 = the products; every N equal), out[0] [M, N] receives the
// chain's value instead and out[1..] are unused. No out may alias x, norm_w or a weight.
struct LinearGroupArgs : NormedInput {
  int G = 0;
  const void* w[3] = {};
  int w_dtype[3] = {};
  int64_t N[3] = {};
  float* out[3] = {};
  const int32_t* prog = nullptr;
  int nsteps = 0;
};
void linear_group(const LinearGroupArgs& a);

napi_value LinearGroupExport(napi_env env, napi_callback_info info);

// A decode step's rotaries and KV write (rotary_kv_write.cc): q_out = rotary(q) (q null: none),
// rotary(k) and v stored at `slots` of the pools as paged_kv_write does (k, q [B, L, H, D], v
// [B * L, Hkv, Dv] float32). cos/sin are [B, L, R], or with `rows` (int32/int64 [B * L], already
// range-checked) tables [P, R] whose row rows[t] serves token t.
struct RotaryKVWriteArgs {
  const float* q = nullptr;
  float* q_out = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* cos = nullptr;
  const float* sin = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int kv_dtype = 0;
  const int32_t* slots = nullptr;
  const void* rows = nullptr;
  int rows_dtype = 0;
  int64_t B = 0, L = 0, Hq = 0, Hkv = 0, D = 0, Dv = 0, R = 0;
};
void rotary_kv_write(const RotaryKVWriteArgs& a);

napi_value RotaryKVWriteExport(napi_env env, napi_callback_info info);

// A greedy step's head (linear_argmax.cc): out[m] = argmax over n of (n(x) @ w^T)[m, n], the first
// NaN else the first maximum (reduce's argmax); n(x) as NormedInput's, w [N, K] of w_dtype, out
// int64 [M].
struct LinearArgmaxArgs : NormedInput {
  const void* w = nullptr;
  int w_dtype = 0;
  int64_t N = 0;
  int64_t* out = nullptr;
};
void linear_argmax(const LinearArgmaxArgs& a);

napi_value LinearArgmaxExport(napi_env env, napi_callback_info info);

}  // namespace tsorch
