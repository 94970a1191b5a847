// decodeAttention on cpu: one decode step of a pre-norm rotary attention block over a KV cache's
// buffers in ONE call (the eager fused op of src/tensor/fused_attention.ts), where the unfused step
// is four: linearGroup (norm + q/k/v), rotaryKVWrite (q/k norms, rotary, KV write), pagedAttention
// and linearAdd (o_proj + residual). It runs those four kernels' own functions in that order
// (linear_group, rotary_kv_write, static_attention, linear_add), so its results equal theirs bit
// for bit; what it saves is three calls' JavaScript (their checks, views and output tensors) and
// three JS->native transitions per layer and token: a decode forward of the Qwen3-0.6B-shaped
// model with every kernel stubbed out took 0.40 ms of JavaScript with the four calls and 0.24-0.29
// with this one (~5 us a layer; AMD EPYC Zen 5).
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "napi_args.h"
#include "ops.h"

namespace tsorch {

// decodeAttention(x, B, K, normW, normDtype, eps, offset,            0-6: read_normed_input's
//   wq, wqDtype, wk, wkDtype, wv, wvDtype, sq, sk, sv, bits,         7-16: q/k/v (FusedWeight)
//   q, k, v,                                                         17-19: their outputs
//   qNorm, kNorm, qkNormDtype, qkEps, qkOffset,                      20-24: per-head norms or nulls
//   cos, sin, R,                                                     25-27: rotary rows [B, R]
//   kCache, vCache, kvDtype, capacity, at,                           28-32: buffers [B, capacity, Hkv, D|Dv]
//   Hq, Hkv, D, Dv, scale, softcap,                                  33-38
//   wo, woDtype, so, bitsO, bias, biasDtype, residual, out, N)       39-47: o_proj, residual, out [B, N]
napi_value DecodeAttentionExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "decodeAttention", 48);
  LinearGroupArgs g;
  if (!read_normed_input(args, &g)) return nullptr;
  const int64_t B = g.M;
  const int64_t Hq = args.integer(33, "Hq", 1), Hkv = args.integer(34, "Hkv", 1);
  const int64_t D = args.integer(35, "D", 1), Dv = args.integer(36, "Dv", 1);
  const double scale = args.number(37, "scale"), softcap = args.number(38, "softcap");
  const Buffer q = args.buffer(17, "q"), k = args.buffer(18, "k"), v = args.buffer(19, "v");
  const Buffer qn = args.buffer(20, "qNorm", true), kn = args.buffer(21, "kNorm", true);
  const int qk_dtype = args.dtype(22, "qkNormDtype");
  const double qk_eps = args.number(23, "qkEps"), qk_offset = args.number(24, "qkOffset");
  const Buffer cos = args.buffer(25, "cos"), sin = args.buffer(26, "sin");
  const int64_t R = args.integer(27, "R");
  const Buffer kc = args.buffer(28, "kCache"), vc = args.buffer(29, "vCache");
  const int kvdt = args.dtype(30, "kvDtype");
  const int64_t cap = args.integer(31, "capacity", 1), at = args.integer(32, "at");
  const Buffer bias = args.buffer(43, "bias", true);
  const int bdt = args.dtype(44, "biasDtype");
  const Buffer residual = args.buffer(45, "residual"), out = args.buffer(46, "out");
  const int64_t N = args.integer(47, "N", 1);
  if (args.failed()) return nullptr;
  g.G = 3;
  const int64_t Ns[3] = {Hq * D, Hkv * D, Hkv * Dv};
  for (int i = 0; i < 3; ++i)
    if (!read_fused_weight(args, 7 + 2 * i, 13 + i, 16, Ns[i], g.K, &g.w[i])) return nullptr;
  FusedWeight wo;
  if (!read_fused_weight(args, 39, 41, 42, N, Hq * Dv, &wo)) return nullptr;
  args.check(Hq % Hkv == 0, false, "Hq = %lld is not a multiple of Hkv = %lld", static_cast<long long>(Hq), static_cast<long long>(Hkv));
  args.check(R % 2 == 0 && R <= D, false, "R = %lld must be even and <= D = %lld", static_cast<long long>(R), static_cast<long long>(D));
  args.check(at < cap, false, "at = %lld is outside the buffers' %lld positions", static_cast<long long>(at), static_cast<long long>(cap));
  if (!args.check(dtype_is_float(kvdt), true, "kvDtype must be float32, float16 or bfloat16")) return nullptr;
  args.fits(q, kF32, {B, Hq * D});
  args.fits(k, kF32, {B, Hkv * D});
  args.fits(v, kF32, {B, Hkv * Dv});
  args.check((qn.data == nullptr) == (kn.data == nullptr), true, "qNorm and kNorm must both be given or both be null");
  if (qn.data) {
    float_dtype(args, qk_dtype, "qkNormDtype");
    args.fits(qn, qk_dtype, {D});
    args.fits(kn, qk_dtype, {D});
  }
  args.fits(cos, kF32, {B, R});
  args.fits(sin, kF32, {B, R});
  args.fits(kc, kvdt, {B, cap, Hkv, D});
  args.fits(vc, kvdt, {B, cap, Hkv, Dv});
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(residual, kF32, {B, N});
  args.fits(out, kF32, {B, N});
  if (args.failed()) return nullptr;

  // 1. n(x) @ wq/wk/wv^T into q, k, v (linearGroup's kernel).
  g.out[0] = static_cast<float*>(q.data);
  g.out[1] = static_cast<float*>(k.data);
  g.out[2] = static_cast<float*>(v.data);
  linear_group(g);
  // 2. q/k norms, rotary, k/v written at position `at` of each row's buffer (rotaryKVWrite's kernel;
  //    the buffers as pools of B blocks of `cap` slots, row b's slot b * cap + at).
  thread_local std::vector<int32_t> index;
  index.resize(static_cast<size_t>(3 * B));
  int32_t* const slots = index.data();
  int32_t* const rows = slots + B;
  int32_t* const pos = rows + B;
  for (int64_t b = 0; b < B; ++b) {
    slots[b] = static_cast<int32_t>(b * cap + at);
    rows[b] = static_cast<int32_t>(b);
    pos[b] = static_cast<int32_t>(at);
  }
  thread_local std::vector<float> q_rot, attn;
  q_rot.resize(static_cast<size_t>(B * Hq * D));
  attn.resize(static_cast<size_t>(B * Hq * Dv));
  RotaryKVWriteArgs r;
  r.q = static_cast<const float*>(q.data);
  r.q_out = q_rot.data();
  r.k = static_cast<const float*>(k.data);
  r.v = static_cast<const float*>(v.data);
  r.cos = static_cast<const float*>(cos.data);
  r.sin = static_cast<const float*>(sin.data);
  r.k_cache = kc.data;
  r.v_cache = vc.data;
  r.kv_dtype = kvdt;
  r.slots = slots;
  r.q_norm = qn.data;
  r.k_norm = kn.data;
  r.norm_dtype = qk_dtype;
  r.norm_eps = static_cast<float>(qk_eps);
  r.norm_offset = static_cast<float>(qk_offset);
  r.B = B;
  r.L = 1;
  r.Hq = Hq;
  r.Hkv = Hkv;
  r.D = D;
  r.Dv = Dv;
  r.R = R;
  rotary_kv_write(r);
  // 3. Attention of each row over its positions [0, at] (pagedAttention's kernel for one block per row).
  const PagedAttentionArgs p{q_rot.data(), kc.data, vc.data, rows, rows, pos, attn.data(), B, Hq, Hkv, D, Dv, cap, 1,
                             static_cast<float>(scale), static_cast<float>(softcap), 0, kvdt};
  static_attention(p);
  // 4. residual + attn @ wo^T + bias (linearAdd's kernel).
  linear_add(attn.data(), wo, bias.data, bdt, static_cast<const float*>(residual.data), static_cast<float*>(out.data),
             B, N, Hq * Dv);
  return undefined(env);
}

}  // namespace tsorch
