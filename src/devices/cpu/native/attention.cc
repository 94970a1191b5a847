// sdpa: scaled dot-product attention with grouped KV heads, causal / sliding-window / additive
// masks, logit soft-capping and optional per-head attention sinks (transformers' eager_attention_forward, computed blockwise).
//
// Work is split into tasks of (batch, kv head, a subset of that kv head's query heads, a block of
// queries). A task stacks its query rows into one matrix so that the keys and values of the kv
// head are streamed once for all of them: S = Q K^T and O = softmax(S) V are two GEMMs over the
// key range that any of its queries can see.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(TSORCH_X86_KERNELS)
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_*().
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

#include "cpu.h"
#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

constexpr int64_t kRowsPerTask = 64;      // query rows stacked per task
constexpr int64_t kMaxScores = 1 << 20;   // floats of S per task

// Keys [lo, hi) that query i may see through the causal / sliding-window masks.
struct KeyRange {
  int64_t lo, hi;
};
KeyRange visible(const SdpaArgs& a, int64_t i) {
  if (a.causal_offset < 0) return {0, a.Lk};
  const int64_t hi = std::min(a.Lk, i + a.causal_offset + 1);
  const int64_t lo = a.window > 0 ? std::max<int64_t>(0, i + a.causal_offset - a.window + 1) : 0;
  return {std::min(lo, a.Lk), hi};
}

#if defined(TSORCH_X86_KERNELS)
#define TSORCH_AVX512 __attribute__((target("avx512f,fma")))

// exp(x) for x <= 0 (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-7 polynomial in r,
// then 2^n by scalef; within 2 ulp). exp(x) = 0 below -87.33 (and for -inf); NaN stays NaN.
TSORCH_AVX512 inline __m512 exp_nonpositive(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);
  const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_mask_mov_ps(x, under, lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), _mm512_scalef_ps(p, n));
}

// The softmax of scores_to_probs over v[0..n) (already without masked keys) when there is no
// soft-capping: v = v * scale + m (m may be null), then probabilities with the optional sink.
// Returns false when every logit is -inf (then v is all zeros).
TSORCH_AVX512 bool softmax_row_avx512(float* v, int64_t n, float scale, const float* m, bool has_sink,
                                      float sink) {
  const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmx = ninf;
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, v + j), vs);
    if (m) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, m + j));
    _mm512_mask_storeu_ps(v + j, k, x);
    vmx = _mm512_mask_max_ps(vmx, k, vmx, x);
  }
  float mx = _mm512_reduce_max_ps(vmx);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(v, v + n, 0.f);
    return false;
  }
  if (has_sink) mx = sink > mx ? sink : mx;
  const __m512 vmax = _mm512_set1_ps(mx);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, v + j), vmax));
    _mm512_mask_storeu_ps(v + j, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  const float inv = 1.f / (_mm512_reduce_add_ps(acc) + (has_sink ? std::exp(sink - mx) : 0.f));
  const __m512 vinv = _mm512_set1_ps(inv);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(v + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, v + j), vinv));
  }
  return true;
}

bool use_avx512() {
  static const bool on = std::strcmp(gemm_kernels().name, "avx512") == 0;
  return on;
}
#endif

// Turns raw scores s[0..nk) for keys [k0, k0 + nk) of query (b, h, i) into probabilities (zero
// for masked keys). Returns false when every key is masked (then the row is all zeros).
bool scores_to_probs(const SdpaArgs& a, float* s, int64_t k0, int64_t nk, int64_t b, int64_t h,
                     int64_t i) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const KeyRange kr = visible(a, i);
  const int64_t lo = std::clamp<int64_t>(kr.lo - k0, 0, nk), hi = std::clamp<int64_t>(kr.hi - k0, lo, nk);
  std::fill(s, s + lo, 0.f);
  std::fill(s + hi, s + nk, 0.f);
  float* v = s + lo;
  const int64_t n = hi - lo;
  const float* m = a.mask ? a.mask + b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + k0 + lo : nullptr;
#if defined(TSORCH_X86_KERNELS)
  if (a.softcap <= 0 && use_avx512())
    return softmax_row_avx512(v, n, a.scale, m, a.sinks != nullptr, a.sinks ? a.sinks[h] : 0.f);
#endif
  for (int64_t j = 0; j < n; ++j) v[j] *= a.scale;
  if (a.softcap > 0)
    for (int64_t j = 0; j < n; ++j) v[j] = a.softcap * std::tanh(v[j] / a.softcap);
  if (m) {
    for (int64_t j = 0; j < n; ++j) v[j] += m[j];
  }
  float mx = kNegInf;
  for (int64_t j = 0; j < n; ++j) mx = v[j] > mx ? v[j] : mx;
  if (mx == kNegInf) {
    std::fill(v, v + n, 0.f);
    return false;
  }
  // An attention sink is one more logit in the softmax whose column is then dropped.
  const float sink = a.sinks ? a.sinks[h] : kNegInf;
  mx = sink > mx ? sink : mx;
  float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < n; ++j) sum[j % 8] += (v[j] = std::exp(v[j] - mx));
  const float sink_p = a.sinks ? std::exp(sink - mx) : 0.f;
  const float inv = 1.f / ((((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]))) + sink_p);
  for (int64_t j = 0; j < n; ++j) v[j] *= inv;
  return true;
}

}  // namespace

bool softmax_scaled_avx512(float* v, int64_t n, float scale) {
#if defined(TSORCH_X86_KERNELS)
  if (use_avx512()) return softmax_row_avx512(v, n, scale, nullptr, false, 0.f), true;
#endif
  return false;
}

// See native.ts: q [B, Hq, Lq, D] float32, k [B, Hkv, Lk, D] and v [B, Hkv, Lk, Dv] of kv_dtype
// (float32, float16 or bfloat16: a half-precision KV cache is read as stored, converted in the GEMM
// kernels' registers), all strided; out contiguous [B, Lq, Hq, Dv].
void sdpa(const SdpaArgs& a) {
  // Element `i` of a key/value buffer of a.kv_dtype.
  const auto at = [&](const void* p, int64_t i) -> const void* {
    return static_cast<const char*>(p) + i * dtype_size(a.kv_dtype);
  };
  if (a.B == 0 || a.Hq == 0 || a.Lq == 0 || a.Dv == 0) return;
  const int64_t group = a.Hq / a.Hkv;
  // Queries per task, then query heads per task (fewer when there would be too few tasks).
  int64_t qblock = std::clamp<int64_t>(kRowsPerTask / group, 1, std::max<int64_t>(a.Lq, 1));
  while (qblock > 1 && group * qblock * a.Lk > kMaxScores) qblock /= 2;
  const int64_t nqb = (a.Lq + qblock - 1) / qblock;
  ThreadPool& pool = ThreadPool::get();
  int64_t heads = group;
  while (heads > 1 && a.B * a.Hkv * nqb * ((group + heads - 1) / heads) < 2 * pool.size())
    heads = (heads + 1) / 2;
  const int64_t hsplit = (group + heads - 1) / heads;
  const int64_t tasks = a.B * a.Hkv * hsplit * nqb;

  const auto task = [&](int64_t t) {
    const int64_t qb = t % nqb, hs = (t / nqb) % hsplit, g = (t / nqb / hsplit) % a.Hkv;
    const int64_t b = t / nqb / hsplit / a.Hkv;
    const int64_t h0 = g * group + hs * heads, nh = std::min(heads, group - hs * heads);
    const int64_t i0 = qb * qblock, ni = std::min(qblock, a.Lq - i0), rows = nh * ni;
    const int64_t k0 = visible(a, i0).lo, k1 = visible(a, i0 + ni - 1).hi;
    const int64_t nk = std::max<int64_t>(0, k1 - k0);
    float* O = thread_scratch(3, rows * a.Dv);
    std::memset(O, 0, sizeof(float) * rows * a.Dv);
    if (nk > 0) {
      // Q rows stacked as [rows, D]: row r is head h0 + r / ni, query i0 + r % ni.
      float* Q = thread_scratch(1, rows * a.D);
      for (int64_t r = 0; r < rows; ++r) {
        const float* src = a.q + b * a.qs[0] + (h0 + r / ni) * a.qs[1] + (i0 + r % ni) * a.qs[2];
        for (int64_t d = 0; d < a.D; ++d) Q[r * a.D + d] = src[d * a.qs[3]];
      }
      float* S = thread_scratch(2, rows * nk);
      const void* kbase = at(a.k, b * a.ks[0] + g * a.ks[1] + k0 * a.ks[2]);
      gemm_range(Q, a.D, rows, a.D, BMatrix{kbase, a.kv_dtype, a.ks[3], a.ks[2]}, nullptr, S, nk, 0, nk);
      thread_local std::vector<uint8_t> live;
      live.assign(rows, 0);
      bool any = false;
      for (int64_t r = 0; r < rows; ++r) {
        live[r] = scores_to_probs(a, S + r * nk, k0, nk, b, h0 + r / ni, i0 + r % ni);
        any = any || live[r];
      }
      if (any) {
        const void* vbase = at(a.v, b * a.vs[0] + g * a.vs[1] + k0 * a.vs[2]);
        // Decode-sized products (few rows) take gemm_range's direct kernel, which streams V once
        // and converts a half-precision cache in registers (no packing of the cache per step).
        gemm_range(S, nk, rows, nk, BMatrix{vbase, a.kv_dtype, a.vs[2], a.vs[3]}, nullptr, O, a.Dv, 0, a.Dv);
        // A fully masked row must be exactly zero even if some v is inf or NaN.
        for (int64_t r = 0; r < rows; ++r)
          if (!live[r]) std::memset(O + r * a.Dv, 0, sizeof(float) * a.Dv);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = a.out + ((b * a.Lq + i0 + r % ni) * a.Hq + h0 + r / ni) * a.Dv;
      std::memcpy(dst, O + r * a.Dv, sizeof(float) * a.Dv);
    }
  };
  const double flops = 2.0 * a.B * a.Hq * a.Lq * a.Lk * (a.D + a.Dv);
  if (split_count(flops, pool.size()) == 1) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
  } else {
    pool.parallel_for(tasks, task);
  }
}

}  // namespace tsorch
