// Paged attention (vLLM's PagedAttention) on cpu: keys and values in a pool of fixed-size blocks,
// each sequence's blocks named by its block table, and a ragged batch of query tokens.
//
// paged_kv_write copies each new token's key/value rows to its slot. paged_attention runs one task
// per (query token, kv head): the query rows of that kv head's group are one [group, D] matrix
// (contiguous in q), scored against the sequence's keys block by block (S = Q K^T, a GEMM per
// block run), softmaxed, then O = P V accumulated block by block.
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
    float* S = thread_scratch(1, group * n);
    float* tmp = thread_scratch(2, group * a.Dv);
    // Visits the runs of keys [lo, hi) that lie in one block: f(first key, count, slot of first).
    const auto runs = [&](auto&& f) {
      for (int64_t j = lo; j < hi;) {
        const int64_t off = j % a.bs, nb = std::min(a.bs - off, hi - j);
        f(j, nb, int64_t(table[j / a.bs]) * a.bs + off);
        j += nb;
      }
    };
    runs([&](int64_t j, int64_t nb, int64_t slot) {
      gemm_range(Q, a.D, group, a.D, BMatrix{a.k_cache + slot * kstride + g * a.D, kF32, 1, kstride},
                 nullptr, S + (j - lo), n, 0, nb);
    });
    for (int64_t r = 0; r < group; ++r) to_probs(S + r * n, n, a.scale, a.softcap);
    std::memset(O, 0, sizeof(float) * group * a.Dv);
    runs([&](int64_t j, int64_t nb, int64_t slot) {
      gemm_range(S + (j - lo), n, group, nb,
                 BMatrix{a.v_cache + slot * vstride + g * a.Dv, kF32, vstride, 1}, nullptr, tmp,
                 a.Dv, 0, a.Dv);
      for (int64_t e = 0; e < group * a.Dv; ++e) O[e] += tmp[e];
    });
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
