// Paged attention (vLLM's PagedAttention) on cpu: keys and values in a pool of fixed-size blocks,
// each sequence's blocks named by its block table, and a ragged batch of query tokens.
//
// The pools hold float32, float16 or bfloat16 (a half-precision KV cache, as the model's dtype).
// paged_kv_write copies each new token's key/value rows to its slot. paged_attention splits the
// work into pieces of (query token, kv head, range of key positions): a piece reads each key and
// value row of its range once, in place from its block, for the kv head's group of query rows
// (contiguous in q), with an online softmax (running max and sum per query row, FlashAttention's
// recurrence) over chunks of keys. Many tokens x kv heads (a serving decode step) run one piece
// each over the thread pool; fewer (one sequence decoding) also split the keys (flash-decoding)
// and merge the pieces' partial results.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

// The 16-float vectors below are GCC/Clang vector extensions: one zmm register on AVX-512, two
// ymm on AVX2, four xmm on the baseline. They never cross a function boundary (all helpers
// inline), so the ABI note GCC prints for them does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tsorch {

namespace {

// One float32 row into a pool row of `dtype` (float32, float16 or bfloat16, rounded to nearest even).
void store_row(const float* src, void* dst, int dtype, int64_t n) {
  if (dtype == kF32) {
    std::memcpy(dst, src, sizeof(float) * n);
  } else if (dtype == kBF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
  } else {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
  }
}

}  // namespace

void paged_kv_write(const float* k, const float* v, void* k_cache, void* v_cache, int kv_dtype,
                    const int32_t* slots, int64_t T, int64_t k_row, int64_t v_row) {
  const int64_t es = dtype_size(kv_dtype);
  char* kc = static_cast<char*>(k_cache);
  char* vc = static_cast<char*>(v_cache);
  for (int64_t t = 0; t < T; ++t) {
    store_row(k + t * k_row, kc + slots[t] * k_row * es, kv_dtype, k_row);
    store_row(v + t * v_row, vc + slots[t] * v_row * es, kv_dtype, v_row);
  }
}

namespace {

// The piece kernel is compiled for AVX-512, AVX2+FMA and the baseline, chosen at load time
// (GCC's target_clones on x86-64; elsewhere the baseline only).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TSORCH_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSORCH_ISA_CLONES
#endif

typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
constexpr int64_t kW = 16;  // floats per vector

inline f32x16 load16(const float* p) { f32x16 v; std::memcpy(&v, p, sizeof v); return v; }
inline void store16(float* p, const f32x16& v) { std::memcpy(p, &v, sizeof v); }

inline float hsum(const f32x16& v) {
  f32x8 lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  const f32x8 s8 = lo + hi;
  f32x4 a, b;
  std::memcpy(&a, &s8, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&s8) + sizeof a, sizeof b);
  const f32x4 s4 = a + b;
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// 2^x for x <= 0 (x < -126 gives 2^-126; NaN stays NaN): 2^n 2^f with n = round(x), |f| <= 1/2,
// 2^f by Cephes' exp2f polynomial (relative error ~2e-7).
inline f32x16 exp2_16(const f32x16& v) {
  const i32x16 low = v < -126.f;
  const f32x16 x = (f32x16)((low & (i32x16)(f32x16{} - 126.f)) | (~low & (i32x16)v));
  const f32x16 n = (x + 12582912.f) - 12582912.f;  // round to nearest (1.5 * 2^23)
  const f32x16 f = x - n;
  f32x16 p = 1.535336188319500e-4f * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.f;
  const i32x16 e = (__builtin_convertvector(n, i32x16) + 127) << 23;
  return p * (f32x16)e;
}

// s[j] = q . k_j for four key rows k_j (n floats each): four independent vector accumulators.
inline void dot4(const float* q, const float* k0, const float* k1, const float* k2, const float* k3, int64_t n, float* s) {
  f32x16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const f32x16 x = load16(q + i);
    a0 += x * load16(k0 + i), a1 += x * load16(k1 + i), a2 += x * load16(k2 + i), a3 += x * load16(k3 + i);
  }
  float s0 = hsum(a0), s1 = hsum(a1), s2 = hsum(a2), s3 = hsum(a3);
  for (; i < n; ++i) s0 += q[i] * k0[i], s1 += q[i] * k1[i], s2 += q[i] * k2[i], s3 += q[i] * k3[i];
  s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
}

// y += c0 x0 + c1 x1 + c2 x2 + c3 x3 over n floats.
inline void axpy4(const float* c, const float* x0, const float* x1, const float* x2, const float* x3, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW)
    store16(y + i, load16(y + i) + c[0] * load16(x0 + i) + c[1] * load16(x1 + i) + c[2] * load16(x2 + i) + c[3] * load16(x3 + i));
  for (; i < n; ++i) y[i] += c[0] * x0[i] + c[1] * x1[i] + c[2] * x2[i] + c[3] * x3[i];
}

// A pool row of `dtype` as float32: the row itself (float32), or converted into `buf`.
inline const float* row_f32(const char* src, int dtype, float* buf, int64_t n) {
  if (dtype == kF32) return reinterpret_cast<const float*>(src);
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (dtype == kBF16) {
    for (; i + kW <= n; i += kW) {  // bfloat16 is the high half of a float32
      u16x16 h;
      std::memcpy(&h, s + i, sizeof h);
      const u32x16 w = __builtin_convertvector(h, u32x16) << 16;
      std::memcpy(buf + i, &w, sizeof w);
    }
    for (; i < n; ++i) buf[i] = bf16_to_f32(s[i]);
  } else {
    for (; i < n; ++i) buf[i] = f16_to_f32(s[i]);
  }
  return buf;
}

// Keys per online-softmax step (a multiple of 4 and of kW): a chunk's scores stay in L1.
constexpr int64_t kChunk = 64;
constexpr float kLog2e = 1.4426950408889634f;

// One piece: query token t, kv head g, key positions [k0, k1). Leaves in O [group, Dv] the
// unnormalized sum of 2^(s - m) v over the piece's keys, in m [group] the running max of the
// scores s (in log2 units: scores times log2(e)) and in l [group] the sum of 2^(s - m) (an empty
// range: m = -inf, l = 0, O = 0).
TSORCH_ISA_CLONES
void attend_piece(const PagedAttentionArgs& a, int64_t t, int64_t g, int64_t k0, int64_t k1,
                  float* O, float* m, float* l) {
  const int64_t group = a.Hq / a.Hkv, D = a.D, Dv = a.Dv;
  const int64_t es = dtype_size(a.kv_dtype), kstride = a.Hkv * D, vstride = a.Hkv * Dv;
  const char* kc = static_cast<const char*>(a.k_cache);
  const char* vc = static_cast<const char*>(a.v_cache);
  const int32_t* table = a.tables + int64_t(a.seq[t]) * a.max_blocks;
  const float* Q = a.q + (t * a.Hq + g * group) * D;
  const int64_t dmax = std::max(D, Dv);
  float* S = thread_scratch(3, group * kChunk + 4 * dmax);
  float* rows = S + group * kChunk;  // four key or value rows as float32
  const auto slot_of = [&](int64_t j) { return int64_t(table[j / a.bs]) * a.bs + j % a.bs; };
  // Four rows from j on (rows past k1 repeat the last one; their scores are not used).
  const auto four = [&](const char* pool, int64_t stride, int64_t h, int64_t n, int64_t j, const float** r4) {
    for (int u = 0; u < 4; ++u)
      r4[u] = row_f32(pool + (slot_of(std::min(j + u, k1 - 1)) * stride + h) * es, a.kv_dtype, rows + u * dmax, n);
  };
  const float mul = a.softcap > 0 ? a.scale / a.softcap : a.scale * kLog2e;
  std::fill(O, O + group * Dv, 0.f);
  std::fill(m, m + group, -std::numeric_limits<float>::infinity());
  std::fill(l, l + group, 0.f);
  for (int64_t c0 = k0; c0 < k1; c0 += kChunk) {
    const int64_t n = std::min(kChunk, k1 - c0), nv = (n + kW - 1) / kW * kW;
    const float* r4[4];
    for (int64_t j = 0; j < n; j += 4) {
      four(kc, kstride, g * D, D, c0 + j, r4);
      for (int64_t r = 0; r < group; ++r) dot4(Q + r * D, r4[0], r4[1], r4[2], r4[3], D, S + r * kChunk + j);
    }
    for (int64_t r = 0; r < group; ++r) {
      float* s = S + r * kChunk;
      for (int64_t j = 0; j < n; ++j) s[j] *= mul;
      if (a.softcap > 0)
        for (int64_t j = 0; j < n; ++j) s[j] = a.softcap * kLog2e * std::tanh(s[j]);
      float mx = m[r];
      for (int64_t j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
      const float alpha = std::exp2(m[r] - mx);  // 0 on the first chunk (m = -inf)
      for (int64_t j = 0; j < nv; j += kW) store16(s + j, exp2_16(load16(s + j) - mx));
      std::fill(s + n, s + nv, 0.f);  // lanes past the chunk (stale scores)
      f32x16 sum = {};
      for (int64_t j = 0; j < nv; j += kW) sum += load16(s + j);
      l[r] = l[r] * alpha + hsum(sum);
      m[r] = mx;
      if (alpha != 1.f)
        for (int64_t i = 0; i < Dv; ++i) O[r * Dv + i] *= alpha;
    }
    for (int64_t j = 0; j < n; j += 4) {
      four(vc, vstride, g * Dv, Dv, c0 + j, r4);
      for (int64_t r = 0; r < group; ++r) axpy4(S + r * kChunk + j, r4[0], r4[1], r4[2], r4[3], O + r * Dv, Dv);
    }
  }
}

// Key positions [lo, hi) that token t sees.
inline void key_range(const PagedAttentionArgs& a, int64_t t, int64_t* lo, int64_t* hi) {
  *hi = int64_t(a.pos[t]) + 1;
  *lo = a.window > 0 ? std::max<int64_t>(0, *hi - a.window) : 0;
}

// Keys per piece at least, when a token's keys are split over the pool.
constexpr int64_t kMinSplit = 256;

}  // namespace

void paged_attention(const PagedAttentionArgs& a) {
  const int64_t group = a.Hq / a.Hkv, Dv = a.Dv, units = a.T * a.Hkv;
  ThreadPool& pool = ThreadPool::get();
  double work = 0;
  int64_t longest = 0;
  for (int64_t t = 0; t < a.T; ++t) {
    int64_t lo, hi;
    key_range(a, t, &lo, &hi);
    work += 2.0 * a.Hq * (hi - lo) * (a.D + a.Dv);
    longest = std::max(longest, hi - lo);
  }
  const int64_t threads = split_count(work, pool.size());
  // Splits of each unit's keys: enough pieces for ~4 per thread, each of >= kMinSplit keys.
  const int64_t splits =
      threads == 1 ? 1 : std::max<int64_t>(1, std::min((4 * threads + units - 1) / units, longest / kMinSplit));
  if (splits == 1) {
    // One piece per unit, accumulated straight into its output rows, then normalized.
    const auto task = [&](int64_t i) {
      const int64_t t = i / a.Hkv, g = i % a.Hkv;
      int64_t lo, hi;
      key_range(a, t, &lo, &hi);
      float* O = a.out + (t * a.Hq + g * group) * Dv;
      float* ml = thread_scratch(2, 2 * group);
      attend_piece(a, t, g, lo, hi, O, ml, ml + group);
      for (int64_t r = 0; r < group; ++r) {
        const float inv = 1.f / ml[group + r];
        for (int64_t i2 = 0; i2 < Dv; ++i2) O[r * Dv + i2] *= inv;
      }
    };
    if (threads == 1) {
      for (int64_t i = 0; i < units; ++i) task(i);
    } else {
      pool.parallel_for(units, task);
    }
    return;
  }
  // Flash-decoding: piece p of a unit takes its keys [lo + n p / P, lo + n (p + 1) / P); each
  // piece leaves (O, m, l) in `parts`, and the merge rescales them to the largest m.
  const int64_t per = group * (Dv + 2);
  std::vector<float> parts(static_cast<size_t>(units * splits * per));
  pool.parallel_for(units * splits, [&](int64_t i) {
    const int64_t u = i / splits, p = i % splits, t = u / a.Hkv, g = u % a.Hkv;
    int64_t lo, hi;
    key_range(a, t, &lo, &hi);
    const int64_t n = hi - lo;
    float* P = parts.data() + i * per;
    attend_piece(a, t, g, lo + n * p / splits, lo + n * (p + 1) / splits, P, P + group * Dv, P + group * Dv + group);
  });
  pool.parallel_for(units, [&](int64_t u) {
    const int64_t t = u / a.Hkv, g = u % a.Hkv;
    for (int64_t r = 0; r < group; ++r) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t p = 0; p < splits; ++p) mx = std::max(mx, parts[(u * splits + p) * per + group * Dv + r]);
      float* O = a.out + (t * a.Hq + g * group + r) * Dv;
      std::fill(O, O + Dv, 0.f);
      float l = 0;
      for (int64_t p = 0; p < splits; ++p) {
        const float* P = parts.data() + (u * splits + p) * per;
        const float pl = P[group * Dv + group + r];
        if (pl == 0) continue;  // an empty piece
        const float c = std::exp2(P[group * Dv + r] - mx);
        l += c * pl;
        for (int64_t i = 0; i < Dv; ++i) O[i] += c * P[r * Dv + i];
      }
      const float inv = 1.f / l;
      for (int64_t i = 0; i < Dv; ++i) O[i] *= inv;
    }
  });
}

}  // namespace tsorch
