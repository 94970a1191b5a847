// Fused kernels on cpu: those compile's passes create (src/compile/passes), which the eager fused
// ops (src/tensor/fused.ts, fused_quantized.ts) call as well, with their Node-API exports
// (addon_fused.cc; contracts in native.ts; each export checks every argument before its kernel
// runs), and the static KV cache's attention.
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

// One weight [N, K] of a fused product: float of `dtype` (bits 0; w the values), or block-quantized
// as linear_quantized takes it (bits 8 / 4; w the codes, scales float32 [N, K / 32]).
struct FusedWeight {
  const void* w = nullptr;
  int dtype = 0;
  const float* scales = nullptr;
  int bits = 0;
  int64_t N = 0;
};

// Reads an export's weight arguments (w at iw, its dtype at iw + 1, scales at is, bits at ib) of
// [N, K] into `w`; a quantized weight needs K a multiple of 32. False once any check failed (thrown).
bool read_fused_weight(Args& args, size_t iw, size_t is, size_t ib, int64_t N, int64_t K, FusedWeight* w);

// The products x @ w_g^T of fused kernels (linear_group.cc), every column computed as eager's
// linear (gemm_range) or linear_quantized computes it. For few rows (direct(): the GEMV kernels,
// or linear_quantized's dot path with x quantized once here) column ranges starting at multiples
// of granule() run as pool tasks; otherwise `whole` runs a product on the pool. Weights of one
// kind and bits. Uses the calling thread's thread_scratch slot 2 for quantized activations.
class FusedProducts {
 public:
  FusedProducts(const float* x, int64_t M, int64_t K, const FusedWeight* ws, int G);
  bool direct() const { return direct_; }
  int64_t granule() const { return granule_; }
  // Columns [n0, n1) of product g (+ bias[n], float32 or null) into C (row stride ldc). Single-threaded.
  void range(int g, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) const;
  // All of product g (+ bias) into C [M, N_g], on the pool.
  void whole(int g, const float* bias, float* C) const;

 private:
  const float* x_;
  int64_t M_, K_;
  const FusedWeight* ws_;
  bool direct_ = true;
  int64_t granule_ = 1;
  QuantRows rows_;
};

// out = x @ w^T + bias + residual: x float32 [M, K], w as FusedWeight, bias null or [N] of
// bias_dtype, residual and out float32 [M, N] (out may not alias x, w, bias or residual). A
// single row takes residual (+ bias) as the product's bias, so the add costs nothing (a quantized
// weight: only without bias, where it rounds as the separate add); otherwise the residual is added
// to each finished row.
void linear_add(const float* x, const FusedWeight& w, const void* bias, int bias_dtype,
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
// NormedInput's; w[g] [w[g].N, K] as FusedWeight (all float, or all quantized of one bits);
// out[g] float32 [M, w[g].N]. With `prog` (a fused_elementwise program of nsteps steps over
// inputs 0..G-1 = the products; every N equal), out[0] [M, N] receives the chain's value instead
// and out[1..] are unused. No out may alias x, norm_w or a weight.
struct LinearGroupArgs : NormedInput {
  int G = 0;
  FusedWeight w[3];
  float* out[3] = {};
  const int32_t* prog = nullptr;
  int nsteps = 0;
};
void linear_group(const LinearGroupArgs& a);

napi_value LinearGroupExport(napi_env env, napi_callback_info info);

// A decode step's rotaries and KV write (rotary_kv_write.cc): q_out = rotary(q) (q null: none),
// rotary(k) and v stored at `slots` of the pools as paged_kv_write does (k, q [B, L, H, D], v
// [B * L, Hkv, Dv] float32). cos/sin are [B, L, R], or with `rows` (int32/int64 [B * L], already
// range-checked) tables [P, R] whose row rows[t] serves token t. With q_norm / k_norm, q and k are
// first normalized per head by rms_norm (the rotary then reads the normalized rows).
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
  // Per-head RMS norms of q and k before their rotary (Qwen3's q_norm / k_norm; null: none), weights
  // [D] of norm_dtype, as rms_norm's.
  const void* q_norm = nullptr;
  const void* k_norm = nullptr;
  int norm_dtype = 0;
  float norm_eps = 0.f, norm_offset = 0.f;
  int64_t B = 0, L = 0, Hq = 0, Hkv = 0, D = 0, Dv = 0, R = 0;
};
void rotary_kv_write(const RotaryKVWriteArgs& a);

napi_value RotaryKVWriteExport(napi_env env, napi_callback_info info);

// One decode step of a pre-norm rotary attention block over a KV cache's buffers
// (decode_attention.cc): linear_group (norm + q/k/v), rotary_kv_write, static_attention and
// linear_add (o_proj + residual) in one call; contract in ../native.ts.
napi_value DecodeAttentionExport(napi_env env, napi_callback_info info);

// A greedy step's head (linear_argmax.cc): out[m] = argmax over n of (n(x) @ w^T)[m, n], the first
// NaN else the first maximum (reduce's argmax); n(x) as NormedInput's, w [N, K] as FusedWeight,
// out int64 [M].
struct LinearArgmaxArgs : NormedInput {
  FusedWeight w;
  int64_t* out = nullptr;
};
void linear_argmax(const LinearArgmaxArgs& a);

napi_value LinearArgmaxExport(napi_env env, napi_callback_info info);

}  // namespace tsorch
