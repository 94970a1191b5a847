// gatherLinear (mixture-of-experts projection, MLX's gather_mm): out[m] = x[m] @ w[idx[m]]^T, in
// one call: rows are counting-sorted by expert and gathered, every expert's small GEMM runs inside
// ONE parallel region (tasks = (expert, column block)), then rows are scattered back. The sort and
// the grouped GEMM are shared with moe_experts.cc.
#include "gather_linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu.h"
#include "dtype.h"
#include "gemm.h"
#include "gemm_kernels.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

ExpertGroups group_by_expert(const int64_t* idx, int64_t M, int64_t E) {
  ExpertGroups g;
  g.start.assign(E + 1, 0);
  g.perm.resize(M);
  for (int64_t m = 0; m < M; ++m) ++g.start[idx[m] + 1];
  for (int64_t e = 0; e < E; ++e) g.start[e + 1] += g.start[e];
  std::vector<int64_t> next(g.start.begin(), g.start.end() - 1);
  for (int64_t m = 0; m < M; ++m) g.perm[next[idx[m]]++] = m;
  for (int64_t e = 0; e < E; ++e)
    if (g.start[e + 1] > g.start[e]) g.active.push_back(e);
  return g;
}

void grouped_gemm(const ExpertGroups& g, const float* xs, int64_t lda, const void* const* w, int w_dtype,
                  float* ys, int64_t ldy, int64_t N, int64_t K) {
  const int64_t M = g.start.back();
  if (M <= 0 || N <= 0 || g.active.empty()) return;
  ThreadPool& pool = ThreadPool::get();
  // Tasks: every expert with rows, its columns cut into blocks (multiples of the kernel's column
  // granularity) so that about 4 tasks per thread exist even when few experts are active.
  const int64_t n_active = static_cast<int64_t>(g.active.size());
  const int64_t gran = std::max<int64_t>(8, gemm_kernels().panel);
  const int64_t groups = (N + gran - 1) / gran;
  const int64_t want = split_count(2.0 * M * N * K, 4 * pool.size());
  const int64_t blocks = std::max<int64_t>(1, std::min(groups, (want + n_active - 1) / n_active));
  const int64_t tasks = n_active * blocks;
  // bfloat16 weights take the bf16 dot-product GEMM (where the host has one), whose cost per block
  // of rows steps at 2, 4, 8, 16 and 32 rows (k-pairs spread over the 16 lanes below 16 rows): 9
  // rows cost as much as 16. An expert's rows therefore go in chunks of at most 8 (none of a single
  // row), each packed once (thread_scratch slot 3), then every chunk over each column panel of
  // kPanel weight rows, so the panel is read from memory once and stays in L2 for the others.
  const Bf16GemmKernels* bf = w_dtype == kBF16 ? bf16_gemm_kernels() : nullptr;
  constexpr int64_t kChunk = 8, kPanel = 96;
  auto task = [&](int64_t t) {
    const int64_t e = g.active[t / blocks], b = t % blocks;
    const int64_t n0 = std::min(N, groups * b / blocks * gran), n1 = std::min(N, groups * (b + 1) / blocks * gran);
    const int64_t r0 = g.start[e], rows = g.start[e + 1] - r0;
    if (!bf || rows <= kChunk || K == 0) {
      return gemm_range(xs + r0 * lda, lda, rows, K, BMatrix{w[e], w_dtype, 1, K, true}, nullptr, ys + r0 * ldy, ldy, n0, n1);
    }
    std::vector<int64_t> first{0};  // chunk i: rows first[i] .. first[i+1]
    while (first.back() < rows) {
      int64_t c = std::min(kChunk, rows - first.back());
      if (rows - first.back() - c == 1) c -= 1;  // leave 2 rows, not 1, for the last chunk
      first.push_back(first.back() + c);
    }
    const size_t chunks = first.size() - 1;
    std::vector<int64_t> at(chunks + 1, 0);  // packed words before chunk i
    for (size_t i = 0; i < chunks; ++i) at[i + 1] = at[i] + bf->packed_words(first[i + 1] - first[i], K);
    uint32_t* P = reinterpret_cast<uint32_t*>(thread_scratch(3, static_cast<size_t>(at[chunks])));
    for (size_t i = 0; i < chunks; ++i) bf->pack_a(xs + (r0 + first[i]) * lda, lda, first[i + 1] - first[i], K, P + at[i]);
    const uint16_t* W = static_cast<const uint16_t*>(w[e]);
    for (int64_t p0 = n0; p0 < n1; p0 += kPanel) {
      const int64_t p1 = std::min(n1, p0 + kPanel);
      for (size_t i = 0; i < chunks; ++i)
        bf->gemm_packed(P + at[i], first[i + 1] - first[i], K, W, K, nullptr, ys + (r0 + first[i]) * ldy, ldy, p0, p1);
    }
  };
  if (want <= 1) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
  } else {
    pool.parallel_for(tasks, task);
  }
}

// x float32 [M, K], w: E pointers to [N, K] of w_dtype, idx int64 [M] with 0 <= idx[m] < E
// (checked by the caller), out float32 [M, N].
void gather_linear(const float* x, const void* const* w, int w_dtype, int64_t E, const int64_t* idx,
                   float* out, int64_t M, int64_t N, int64_t K) {
  if (M <= 0 || N <= 0) return;
  const ExpertGroups g = group_by_expert(idx, M, E);
  // The sorted rows and their products, in this (the calling) thread's scratch slots 1 and 2:
  // the GEMM kernels use slots 0 and 3 only.
  float* xs = thread_scratch(1, static_cast<size_t>(M * K));
  float* ys = thread_scratch(2, static_cast<size_t>(M * N));
  parallel_rows(M, static_cast<double>(K), [&](int64_t r) {
    std::memcpy(xs + r * K, x + g.perm[r] * K, static_cast<size_t>(K) * sizeof(float));
  });
  grouped_gemm(g, xs, K, w, w_dtype, ys, N, N, K);
  parallel_rows(M, static_cast<double>(N), [&](int64_t r) {
    std::memcpy(out + g.perm[r] * N, ys + r * N, static_cast<size_t>(N) * sizeof(float));
  });
}

}  // namespace tsorch
