// Paged attention (vLLM's PagedAttention) on cpu: keys and values in a pool of fixed-size blocks,
// each sequence's blocks named by its block table, and a ragged batch of query tokens.
//
// The pools hold float32, float16 or bfloat16 (a half-precision KV cache, as the model's dtype).
// paged_kv_write copies each new token's key/value rows to its slot. paged_attention runs one task
// per (query token, kv head): the query rows of that kv head's group (contiguous in q) take their
// scores against each key row read in place from its block, softmax, then accumulate the value rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

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

// A pool row of `dtype` into float32.
void load_row(const void* src, int dtype, float* dst, int64_t n) {
  if (dtype == kF32) {
    std::memcpy(dst, src, sizeof(float) * n);
  } else if (dtype == kBF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
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

// The inner loops below are compiled for AVX-512, AVX2+FMA and the baseline, chosen at load time
// (GCC's target_clones on x86-64; elsewhere the baseline only).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TSORCH_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSORCH_ISA_CLONES
#endif

// s[r] = q_r . k for the `rows` query rows q (row stride d), over d floats, in 16 independent
// partial sums per row (vectorizable without reassociation).
TSORCH_ISA_CLONES
void dots(const float* q, int64_t rows, const float* k, int64_t d, float* s, int64_t s_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = q + r * d;
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= d; i += 16)
      for (int u = 0; u < 16; ++u) acc[u] += a[i + u] * k[i + u];
    for (; i < d; ++i) acc[i % 16] += a[i] * k[i];
    for (int w = 8; w > 0; w /= 2)
      for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
    s[r * s_stride] = acc[0];
  }
}

// o_r += p[r * p_stride] * v for the `rows` output rows o (row stride d).
TSORCH_ISA_CLONES
void axpys(const float* p, int64_t p_stride, int64_t rows, const float* v, int64_t d, float* o) {
  for (int64_t r = 0; r < rows; ++r) {
    const float c = p[r * p_stride];
    float* y = o + r * d;
    for (int64_t i = 0; i < d; ++i) y[i] += c * v[i];
  }
}

// Scores s[0..n) of one query row -> probabilities (scale, soft-cap, softmax).
void to_probs(float* s, int64_t n, float scale, float softcap) {
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

void paged_attention(const PagedAttentionArgs& a) {
  const int64_t group = a.Hq / a.Hkv, kstride = a.Hkv * a.D, vstride = a.Hkv * a.Dv;
  const int64_t es = dtype_size(a.kv_dtype);
  const char* kc = static_cast<const char*>(a.k_cache);
  const char* vc = static_cast<const char*>(a.v_cache);
  const auto task = [&](int64_t i) {
    const int64_t t = i / a.Hkv, g = i % a.Hkv;
    const int64_t hi = int64_t(a.pos[t]) + 1;
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, hi - a.window) : 0, n = hi - lo;
    const int32_t* table = a.tables + int64_t(a.seq[t]) * a.max_blocks;
    const float* Q = a.q + (t * a.Hq + g * group) * a.D;
    float* O = a.out + (t * a.Hq + g * group) * a.Dv;
    // Each key and value row of this kv head is read once, straight from its block, and used by
    // the group's query rows: S [group, n] = Q K^T row by row, then O [group, Dv] += P[:, j] V_j.
    // (A GEMM per task, as before, spent its time packing: group is 1-8 rows.)
    float* S = thread_scratch(3, group * n);
    float* row = thread_scratch(1, std::max(a.D, a.Dv));
    const auto slot_of = [&](int64_t j) { return int64_t(table[j / a.bs]) * a.bs + j % a.bs; };
    for (int64_t j = lo; j < hi; ++j) {
      const char* src = kc + (slot_of(j) * kstride + g * a.D) * es;
      const float* K = a.kv_dtype == kF32 ? reinterpret_cast<const float*>(src) : (load_row(src, a.kv_dtype, row, a.D), row);
      dots(Q, group, K, a.D, S + (j - lo), n);
    }
    for (int64_t r = 0; r < group; ++r) to_probs(S + r * n, n, a.scale, a.softcap);
    std::fill(O, O + group * a.Dv, 0.f);
    for (int64_t j = lo; j < hi; ++j) {
      const char* src = vc + (slot_of(j) * vstride + g * a.Dv) * es;
      const float* V = a.kv_dtype == kF32 ? reinterpret_cast<const float*>(src) : (load_row(src, a.kv_dtype, row, a.Dv), row);
      axpys(S + (j - lo), n, group, V, a.Dv, O);
    }
  };
  const int64_t tasks = a.T * a.Hkv;
  ThreadPool& pool = ThreadPool::get();
  double work = 0;
  for (int64_t t = 0; t < a.T; ++t) work += 2.0 * a.Hq * (a.pos[t] + 1) * (a.D + a.Dv);
  if (split_count(work, pool.size()) == 1) {
    for (int64_t i = 0; i < tasks; ++i) task(i);
  } else {
    pool.parallel_for(tasks, task);
  }
}

}  // namespace tsorch
