// Paged attention (vLLM's PagedAttention) on cpu: keys and values in a pool of fixed-size blocks,
// each sequence's blocks named by its block table, and a ragged batch of query tokens.
//
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

void paged_kv_write(const float* k, const float* v, float* k_cache, float* v_cache,
                    const int32_t* slots, int64_t T, int64_t k_row, int64_t v_row) {
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(k_cache + slots[t] * k_row, k + t * k_row, sizeof(float) * k_row);
    std::memcpy(v_cache + slots[t] * v_row, v + t * v_row, sizeof(float) * v_row);
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
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t slot = int64_t(table[j / a.bs]) * a.bs + j % a.bs;
      std::memcpy(K + (j - lo) * a.D, a.k_cache + slot * kstride + g * a.D, sizeof(float) * a.D);
      std::memcpy(V + (j - lo) * a.Dv, a.v_cache + slot * vstride + g * a.Dv, sizeof(float) * a.Dv);
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
