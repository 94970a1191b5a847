// Paged attention (vLLM's PagedAttention) on cpu: keys and values in a pool of fixed-size blocks,
// each sequence's blocks named by its block table, and a ragged batch of query tokens.
//
// The pools hold float32, float16 or bfloat16 (a half-precision KV cache, as the model's dtype).
// paged_kv_write copies each new token's key/value rows to its slot. paged_attention runs one task
// per (query token, kv head): the query rows of that kv head's group are one [group, D] matrix
// (contiguous in q); the keys and values it may see are gathered from their blocks into contiguous
// rows, then S = Q K^T, softmax, O = P V are two GEMMs.
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
  const auto task = [&](int64_t i) {
    const int64_t t = i / a.Hkv, g = i % a.Hkv;
    const int64_t hi = int64_t(a.pos[t]) + 1;
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, hi - a.window) : 0, n = hi - lo;
    const int32_t* table = a.tables + int64_t(a.seq[t]) * a.max_blocks;
    const float* Q = a.q + (t * a.Hq + g * group) * a.D;
    float* O = a.out + (t * a.Hq + g * group) * a.Dv;
    // Gather this kv head's keys and values of positions [lo, hi) into contiguous rows, so each
    // product is one GEMM: S [group, n] = Q K^T, then O [group, Dv] = P V.
    float* K = thread_scratch(1, n * a.D);
    float* V = thread_scratch(2, n * a.Dv);
    float* S = thread_scratch(3, group * n);
    const int64_t es = dtype_size(a.kv_dtype);
    const char* kc = static_cast<const char*>(a.k_cache);
    const char* vc = static_cast<const char*>(a.v_cache);
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t slot = int64_t(table[j / a.bs]) * a.bs + j % a.bs;
      load_row(kc + (slot * kstride + g * a.D) * es, a.kv_dtype, K + (j - lo) * a.D, a.D);
      load_row(vc + (slot * vstride + g * a.Dv) * es, a.kv_dtype, V + (j - lo) * a.Dv, a.Dv);
    }
    gemm_range(Q, a.D, group, a.D, BMatrix{K, kF32, 1, a.D}, nullptr, S, n, 0, n);
    for (int64_t r = 0; r < group; ++r) to_probs(S + r * n, n, a.scale, a.softcap);
    gemm_range(S, n, group, n, BMatrix{V, kF32, a.Dv, 1}, nullptr, O, a.Dv, 0, a.Dv);
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
