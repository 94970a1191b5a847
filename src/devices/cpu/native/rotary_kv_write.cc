// rotaryKVWrite on cpu (compile's rotary + KV-write fusion, src/compile/passes/rotary_kv.ts and
// rotary_gather.ts): a decode step's query rotary, key rotary and paged KV write as one graph node.
//
// With `rows` (the rotary-gather fusion), the cos/sin rows of each token are first gathered from
// the per-position tables into a buffer of the calling thread (embedding's gather, with its range
// check); then q and k are rotated by the eager rotary kernel (the rotated k into a buffer of the
// thread that runs it, never stored elsewhere) and k, v written into the pools by the eager
// paged_kv_write, so the results equal the unfused ops' exactly. With q/k norm weights (eager
// Qwen3 attention, tensor/fused.ts rotaryCacheWrite), q and k are first normalized per head by the
// eager rms_norm (q into q_out, k into that buffer) and rotated there in place: two kernel calls
// fewer per layer and step, the same values as rmsNorm then rotary. For a decode step's few rows
// the q side and the k side (with the KV write) are two tasks of the pool, which may run them on
// two threads.
#include <cstring>
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "napi_args.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

void rotary_kv_write(const RotaryKVWriteArgs& a) {
  const int64_t T = a.B * a.L;
  const float* cos = a.cos;
  const float* sin = a.sin;
  thread_local std::vector<float> gathered;
  if (a.rows) {
    gathered.resize(static_cast<size_t>(2 * T * a.R));
    float* c = gathered.data();
    float* s = c + T * a.R;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t r = a.rows_dtype == kI32 ? static_cast<const int32_t*>(a.rows)[t] : static_cast<const int64_t*>(a.rows)[t];
      std::memcpy(c + t * a.R, a.cos + r * a.R, a.R * sizeof(float));
      std::memcpy(s + t * a.R, a.sin + r * a.R, a.R * sizeof(float));
    }
    cos = c;
    sin = s;
  }
  // q: normalized into q_out, rotated there; k: normalized into a buffer of the thread that runs
  // it, rotated there, and written to the pool with v.
  const auto q_side = [&] {
    if (!a.q) return;
    const float* q = a.q;
    if (a.q_norm) {
      rms_norm(a.q, a.q_norm, a.norm_dtype, a.q_out, T * a.Hq, a.D, a.norm_eps, a.norm_offset);
      q = a.q_out;
    }
    rotary(q, cos, sin, a.q_out, a.B, a.L, a.Hq, a.D, a.R);
  };
  const auto k_side = [&] {
    thread_local std::vector<float> rotated;
    rotated.resize(static_cast<size_t>(T * a.Hkv * a.D));
    const float* k = a.k;
    if (a.k_norm) {
      rms_norm(a.k, a.k_norm, a.norm_dtype, rotated.data(), T * a.Hkv, a.D, a.norm_eps, a.norm_offset);
      k = rotated.data();
    }
    rotary(k, cos, sin, rotated.data(), a.B, a.L, a.Hkv, a.D, a.R);
    paged_kv_write(rotated.data(), a.v, a.k_cache, a.v_cache, a.kv_dtype, a.slots, T, a.Hkv * a.D, a.Hkv * a.Dv);
  };
  // A decode step's few rows, which the kernels above run on the calling thread, run as two tasks:
  // q on one thread, k and the KV write on another (the Qwen3-0.6B-shaped int4 compiled decode
  // step's rotaryKVWrite nodes: a median 5.6 us against 7.0 on the calling thread alone; AMD EPYC
  // Zen 5, 2 threads, builds alternating in one process). Larger calls (prefill) leave the
  // threads to the kernels' own row splits (split_count: the q rows' rotary work, as rotary()
  // judges it).
  ThreadPool& pool = ThreadPool::get();
  if (a.q && pool.size() > 1 && split_count(4.0 * T * a.Hq * a.D, 2) == 1) {
    pool.parallel_for(2, [&](int64_t t) { t == 0 ? q_side() : k_side(); });
  } else {
    q_side();
    k_side();
  }
}

// rotaryKVWrite(q, qOut, k, v, cos, sin, kCache, vCache, slots, rows, rowsDtype, B, L, Hq, Hkv, D,
// Dv, R, P, N, bs, kvDtype, qNorm, kNorm, normDtype, normEps, normOffset): see native.ts.
napi_value RotaryKVWriteExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "rotaryKVWrite", 27);
  const Buffer q = args.buffer(0, "q", true), q_out = args.buffer(1, "qOut", true);
  const Buffer k = args.buffer(2, "k"), v = args.buffer(3, "v");
  const Buffer cos = args.buffer(4, "cos"), sin = args.buffer(5, "sin");
  const Buffer kc = args.buffer(6, "kCache"), vc = args.buffer(7, "vCache");
  const Buffer slots = args.buffer(8, "slots"), rows = args.buffer(9, "rows", true);
  RotaryKVWriteArgs a;
  a.rows_dtype = args.dtype(10, "rowsDtype");
  a.B = args.integer(11, "B");
  a.L = args.integer(12, "L");
  a.Hq = args.integer(13, "Hq");
  a.Hkv = args.integer(14, "Hkv", 1);
  a.D = args.integer(15, "D");
  a.Dv = args.integer(16, "Dv");
  a.R = args.integer(17, "R");
  const int64_t P = args.integer(18, "P");
  const int64_t N = args.integer(19, "N"), bs = args.integer(20, "bs", 1);
  a.kv_dtype = args.dtype(21, "kvDtype");
  const Buffer qn = args.buffer(22, "qNorm", true), kn = args.buffer(23, "kNorm", true);
  a.norm_dtype = args.dtype(24, "normDtype");
  a.norm_eps = static_cast<float>(args.number(25, "normEps"));
  a.norm_offset = static_cast<float>(args.number(26, "normOffset"));
  if (args.failed()) return nullptr;
  const int64_t T = a.B * a.L;
  if (!args.check(dtype_is_float(a.kv_dtype), true, "kvDtype must be float32, float16 or bfloat16")) return nullptr;
  args.check(a.R % 2 == 0 && a.R <= a.D, false, "R = %lld must be even and <= D = %lld", static_cast<long long>(a.R), static_cast<long long>(a.D));
  args.check((q.data == nullptr) == (q_out.data == nullptr), true, "q and qOut must both be given or both be null");
  if (q.data) {
    args.fits(q, kF32, {a.B, a.L, a.Hq, a.D});
    args.fits(q_out, kF32, {a.B, a.L, a.Hq, a.D});
  }
  args.fits(k, kF32, {a.B, a.L, a.Hkv, a.D});
  args.fits(v, kF32, {T, a.Hkv, a.Dv});
  if (rows.data) {
    args.check(a.rows_dtype == kI32 || a.rows_dtype == kI64, true, "rowsDtype must be int32 or int64, got %s", dtype_name(a.rows_dtype));
    args.fits(rows, a.rows_dtype, {T});
    args.fits(cos, kF32, {P, a.R});
    args.fits(sin, kF32, {P, a.R});
  } else {
    args.fits(cos, kF32, {a.B, a.L, a.R});
    args.fits(sin, kF32, {a.B, a.L, a.R});
  }
  args.fits(kc, a.kv_dtype, {N, bs, a.Hkv, a.D});
  args.fits(vc, a.kv_dtype, {N, bs, a.Hkv, a.Dv});
  args.fits(slots, kI32, {T});
  args.check((qn.data == nullptr) == (kn.data == nullptr), true, "qNorm and kNorm must both be given or both be null");
  if (kn.data) {
    args.check(dtype_is_float(a.norm_dtype), true, "normDtype must be float32, float16 or bfloat16");
    args.fits(qn, a.norm_dtype, {a.D});
    args.fits(kn, a.norm_dtype, {a.D});
  }
  if (args.failed()) return nullptr;
  if (!slots_in_pool(args, static_cast<const int32_t*>(slots.data), T, N * bs)) return nullptr;
  for (int64_t t = 0; t < T && rows.data; ++t) {
    const int64_t id = a.rows_dtype == kI32 ? static_cast<const int32_t*>(rows.data)[t] : static_cast<const int64_t*>(rows.data)[t];
    if (!args.check(id >= 0 && id < P, false, "id %lld at position %lld is out of range [0, %lld)",
                    static_cast<long long>(id), static_cast<long long>(t), static_cast<long long>(P)))
      return nullptr;
  }
  a.q = static_cast<const float*>(q.data);
  a.q_out = static_cast<float*>(q_out.data);
  a.k = static_cast<const float*>(k.data);
  a.v = static_cast<const float*>(v.data);
  a.cos = static_cast<const float*>(cos.data);
  a.sin = static_cast<const float*>(sin.data);
  a.k_cache = kc.data;
  a.v_cache = vc.data;
  a.slots = static_cast<const int32_t*>(slots.data);
  a.rows = rows.data;
  a.q_norm = qn.data;
  a.k_norm = kn.data;
  rotary_kv_write(a);
  return undefined(env);
}

}  // namespace tsorch
