// moeExperts: the routed experts of a sparse mixture-of-experts block with silu-gated MLPs
// (transformers' Qwen3MoeExperts / MixtralExperts forward) in one call:
//   out[t] = sum_j weights[t, j] * down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]),  e = ids[t, j]
// Rows (token, slot) are counting-sorted by expert and the token's input gathered once; one grouped
// GEMM computes gate and up together (gate_up [E, 2I, H]); silu(gate) * up is written over the gate
// half in place; a second grouped GEMM applies down; each token's K slots are then weighted and
// summed straight into out. Nothing else is materialized (no [T*K, H] copy of x, no separate
// gate/up/product/weighted tensors, no scatter back).
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu.h"
#include "dtype.h"
#include "gather_linear.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

void moe_experts(const float* x, const void* gate_up, const void* down, int w_dtype, const float* weights,
                 const int64_t* ids, float* out, int64_t T, int64_t K, int64_t E, int64_t H, int64_t I) {
  const int64_t M = T * K;
  if (T <= 0 || H <= 0) return;
  if (M == 0 || I == 0) {
    std::memset(out, 0, static_cast<size_t>(T * H) * sizeof(float));
    return;
  }
  const ExpertGroups g = group_by_expert(ids, M, E);
  // where[t*K + j]: the sorted row of token t's slot j.
  std::vector<int64_t> where(M);
  for (int64_t r = 0; r < M; ++r) where[g.perm[r]] = r;
  const size_t es = static_cast<size_t>(dtype_size(w_dtype));
  std::vector<const void*> wg(E), wd(E);
  for (int64_t e = 0; e < E; ++e) {
    wg[e] = static_cast<const char*>(gate_up) + static_cast<size_t>(e * 2 * I * H) * es;
    wd[e] = static_cast<const char*>(down) + static_cast<size_t>(e * H * I) * es;
  }
  // The calling thread's scratch slots 1 and 2 (the GEMM kernels use 0 and 3): the gathered inputs,
  // later the down products ([M, H], slot 1), and gate|up then the activations ([M, 2I], slot 2).
  float* xs = thread_scratch(1, static_cast<size_t>(M * H));
  float* h = thread_scratch(2, static_cast<size_t>(M * 2 * I));
  parallel_rows(M, static_cast<double>(H), [&](int64_t r) {
    std::memcpy(xs + r * H, x + g.perm[r] / K * H, static_cast<size_t>(H) * sizeof(float));
  });
  grouped_gemm(g, xs, H, wg.data(), w_dtype, h, 2 * I, 2 * I, H);
  // silu(gate) * up (nn's silu: x / (1 + exp(-x))), over the gate half of each row.
  parallel_rows(M, 8.0 * static_cast<double>(I), [&](int64_t r) {
    float* a = h + r * 2 * I;
    const float* u = a + I;
    for (int64_t i = 0; i < I; ++i) a[i] = a[i] / (1.f + std::exp(-a[i])) * u[i];
  });
  float* ys = xs;  // the inputs are no longer needed
  grouped_gemm(g, h, 2 * I, wd.data(), w_dtype, ys, H, H, I);
  // Each token's slots: weighted (rounded to float32, as a separate product would be) and summed
  // in double, rounded once.
  parallel_rows(T, 2.0 * static_cast<double>(K * H), [&](int64_t t) {
    float* o = out + t * H;
    std::vector<double> acc(static_cast<size_t>(H), 0.0);
    for (int64_t j = 0; j < K; ++j) {
      const float w = weights[t * K + j];
      const float* y = ys + where[t * K + j] * H;
      for (int64_t n = 0; n < H; ++n) acc[n] += static_cast<double>(y[n] * w);
    }
    for (int64_t n = 0; n < H; ++n) o[n] = static_cast<float>(acc[n]);
  });
}

}  // namespace tsorch
