// Attention over the static KV cache of compiled generation on cpu: paged attention's contract
// (ops.h PagedAttentionArgs) where every sequence is one block holding its whole row (block
// tables [S, 1], as transformers/static_kv_cache.ts lays them out), so a task's keys and values
// are contiguous rows of one block. Per (query token, kv head) task, as paged_attention.cc: the
// group's query rows score every visible key row, softmax, then accumulate the value rows; here
// a bfloat16 row is widened inside the vectorized dot/axpy loop (no conversion pass through a
// buffer), and a small call runs on the calling thread, since waking the pool costs more than the
// work. Decode steps (one query token per sequence, float32 or bfloat16 pools, at most 4 query
// heads per kv head) go to paged_attention.cc's multi-head pieces instead, which split a step's
// kv heads over the pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"
#include "isa_clones.h"

namespace tsorch {

namespace {

// Work (about flops) under which a whole call runs on the calling thread: from about 32 cached
// positions of a Qwen3-0.6B-shaped layer (16 query heads of 128) on, tasks are split over the
// pool rather than leaving one thread idle while the other reads the cache.
constexpr double kSerialWork = 256.0 * 1024;

// A bfloat16 value (its bits), widened to float32 exactly by widen().
struct Bf16 {
  uint16_t bits;
};
inline float widen(Bf16 h) { return bits_f32(static_cast<uint32_t>(h.bits) << 16); }
inline float widen(float x) { return x; }

// S[r * n + j - lo] = q_r . k_j for the `rows` query rows q (row stride d) and the key rows
// k_j = k + j * stride (elements), lo <= j < hi, in 16 partial sums per row reduced as
// paged_attention.cc's dots (the same sums); keys float32 or bfloat16 (widened in the loop).
template <class K>
inline void scores(const float* q, int64_t rows, const K* k, int64_t stride, int64_t lo, int64_t hi,
                   int64_t d, float* S, int64_t n) {
  for (int64_t j = lo; j < hi; ++j) {
    const K* kj = k + j * stride;
    for (int64_t r = 0; r < rows; ++r) {
      const float* a = q + r * d;
      float acc[16] = {0};
      int64_t i = 0;
      for (; i + 16 <= d; i += 16)
        for (int u = 0; u < 16; ++u) acc[u] += a[i + u] * widen(kj[i + u]);
      for (; i < d; ++i) acc[i % 16] += a[i] * widen(kj[i]);
      for (int w = 8; w > 0; w /= 2)
        for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
      S[r * n + (j - lo)] = acc[0];
    }
  }
}

// O[r] = sum_j P[r * n + j - lo] * v_j for the `rows` output rows O (row stride d), v_j = v + j *
// stride, accumulated in order of j as paged_attention.cc's axpys.
template <class K>
inline void mix(const float* P, int64_t rows, const K* v, int64_t stride, int64_t lo, int64_t hi,
                int64_t d, float* O, int64_t n) {
  std::fill(O, O + rows * d, 0.f);
  for (int64_t j = lo; j < hi; ++j) {
    const K* vj = v + j * stride;
    for (int64_t r = 0; r < rows; ++r) {
      const float c = P[r * n + (j - lo)];
      float* y = O + r * d;
      for (int64_t i = 0; i < d; ++i) y[i] += c * widen(vj[i]);
    }
  }
}

TSORCH_ISA_CLONES
void scores_f32(const float* q, int64_t rows, const float* k, int64_t stride, int64_t lo, int64_t hi, int64_t d, float* S, int64_t n) {
  scores(q, rows, k, stride, lo, hi, d, S, n);
}
TSORCH_ISA_CLONES
void scores_bf16(const float* q, int64_t rows, const Bf16* k, int64_t stride, int64_t lo, int64_t hi, int64_t d, float* S, int64_t n) {
  scores(q, rows, k, stride, lo, hi, d, S, n);
}
TSORCH_ISA_CLONES
void mix_f32(const float* P, int64_t rows, const float* v, int64_t stride, int64_t lo, int64_t hi, int64_t d, float* O, int64_t n) {
  mix(P, rows, v, stride, lo, hi, d, O, n);
}
TSORCH_ISA_CLONES
void mix_bf16(const float* P, int64_t rows, const Bf16* v, int64_t stride, int64_t lo, int64_t hi, int64_t d, float* O, int64_t n) {
  mix(P, rows, v, stride, lo, hi, d, O, n);
}

// A float16 row widened into float32 `out`.
void f16_row(const void* src, int64_t n, float* out) {
  const uint16_t* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

// Scores s[0..n) of one query row -> probabilities (scale, soft-cap, softmax): sdpa's vectorized
// softmax where it applies (no soft-cap), else paged_attention.cc's.
void to_probs(float* s, int64_t n, float scale, float softcap) {
  if (softcap <= 0 && softmax_scaled_avx512(s, n, scale)) return;
  for (int64_t j = 0; j < n; ++j) s[j] *= scale;
  if (softcap > 0)
    for (int64_t j = 0; j < n; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t j = 0; j < n; ++j) sum[j % 8] += (s[j] = std::exp(s[j] - mx));
  const float inv = 1.f / (((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7])));
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

}  // namespace

void static_attention(const PagedAttentionArgs& a) {
  const int64_t group = a.Hq / a.Hkv, kstride = a.Hkv * a.D, vstride = a.Hkv * a.Dv;
  // Decode steps (one token per sequence, few query rows per kv head, float32 or bfloat16 rows)
  // run paged_attention's pieces of several kv heads, which stream the key and value rows (see
  // paged_attention.cc) and split long contexts over the threads.
  bool decode = group <= 4 && (a.kv_dtype == kF32 || a.kv_dtype == kBF16);
  for (int64_t t = 1; t < a.T && decode; ++t) decode = a.seq[t] != a.seq[t - 1];
  if (decode) return paged_attention(a);
  const int64_t es = dtype_size(a.kv_dtype);
  const char* kc = static_cast<const char*>(a.k_cache);
  const char* vc = static_cast<const char*>(a.v_cache);
  const auto task = [&](int64_t i) {
    const int64_t t = i / a.Hkv, g = i % a.Hkv;
    const int64_t hi = int64_t(a.pos[t]) + 1;
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, hi - a.window) : 0, n = hi - lo;
    // One block per sequence: position j of sequence seq[t] is row j of its block.
    const int64_t row0 = int64_t(a.tables[int64_t(a.seq[t]) * a.max_blocks]) * a.bs;
    const float* Q = a.q + (t * a.Hq + g * group) * a.D;
    float* O = a.out + (t * a.Hq + g * group) * a.Dv;
    float* S = thread_scratch(3, group * n);
    const char* K = kc + (row0 * kstride + g * a.D) * es;
    const char* V = vc + (row0 * vstride + g * a.Dv) * es;
    if (a.kv_dtype == kBF16) {
      scores_bf16(Q, group, reinterpret_cast<const Bf16*>(K), kstride, lo, hi, a.D, S, n);
    } else if (a.kv_dtype == kF32) {
      scores_f32(Q, group, reinterpret_cast<const float*>(K), kstride, lo, hi, a.D, S, n);
    } else {
      float* row = thread_scratch(1, a.D);
      for (int64_t j = lo; j < hi; ++j) f16_row(K + j * kstride * es, a.D, row), scores_f32(Q, group, row, 0, 0, 1, a.D, S + (j - lo), n);
    }
    for (int64_t r = 0; r < group; ++r) to_probs(S + r * n, n, a.scale, a.softcap);
    if (a.kv_dtype == kBF16) {
      mix_bf16(S, group, reinterpret_cast<const Bf16*>(V), vstride, lo, hi, a.Dv, O, n);
    } else if (a.kv_dtype == kF32) {
      mix_f32(S, group, reinterpret_cast<const float*>(V), vstride, lo, hi, a.Dv, O, n);
    } else {
      // float16: widen each value row, then add it with its weights (in order of j, as above).
      float* row = thread_scratch(1, a.Dv);
      std::fill(O, O + group * a.Dv, 0.f);
      for (int64_t j = lo; j < hi; ++j) {
        f16_row(V + j * vstride * es, a.Dv, row);
        for (int64_t r = 0; r < group; ++r)
          for (int64_t i = 0; i < a.Dv; ++i) O[r * a.Dv + i] += S[r * n + (j - lo)] * row[i];
      }
    }
  };
  const int64_t tasks = a.T * a.Hkv;
  double work = 0;
  for (int64_t t = 0; t < a.T; ++t) work += 2.0 * a.Hq * (a.pos[t] + 1) * (a.D + a.Dv);
  if (work < kSerialWork) {
    for (int64_t i = 0; i < tasks; ++i) task(i);
  } else {
    ThreadPool::get().parallel_for(tasks, task);
  }
}

}  // namespace tsorch
