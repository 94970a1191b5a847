// Causal depthwise conv1d over time with a carried state (Gated DeltaNet's short convolution;
// transformers' causal_conv1d_fn / causal_conv1d_update fallbacks in modeling_qwen3_5.py):
// out[b, t, c] = sum_i w[c, i] * xp[b, t + i, c], where xp = [state; x] along time (state: the
// K - 1 inputs before x, zeros when absent). The new state is the last K - 1 rows of xp.
#include <cstring>
#include <vector>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// acc[c] += w[c] * x[c] over C contiguous channels, in double so that the K taps round once
// (AVX-512 / AVX2 picked at load time on x86-64 Linux).
#if defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void axpy_rows(double* __restrict acc, const float* __restrict w, const float* __restrict x,
               int64_t C) {
  for (int64_t c = 0; c < C; ++c) acc[c] += static_cast<double>(w[c]) * x[c];
}

}  // namespace

void causal_conv1d(const float* x, const float* w, const float* state, float* out,
                   float* state_out, int64_t B, int64_t L, int64_t C, int64_t K) {
  const int64_t P = K - 1;
  // Row r of xp (r < P + L) for batch b, or null for a zero row.
  auto row = [&](int64_t b, int64_t r) -> const float* {
    if (r >= P) return x + (b * L + r - P) * C;
    return state ? state + (b * P + r) * C : nullptr;
  };
  std::vector<float> wt(K * C);  // taps-major [K, C], so each tap is a contiguous row
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < K; ++i) wt[i * C + c] = w[c * K + i];
  parallel_rows(B * L, 2.0 * static_cast<double>(C * K), [&](int64_t bt) {
    const int64_t b = bt / L, t = bt % L;
    thread_local std::vector<double> acc;
    acc.assign(C, 0.0);
    for (int64_t i = 0; i < K; ++i) {
      const float* xr = row(b, t + i);
      if (xr) axpy_rows(acc.data(), wt.data() + i * C, xr, C);
    }
    float* o = out + bt * C;
    for (int64_t c = 0; c < C; ++c) o[c] = static_cast<float>(acc[c]);
  });
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t r = 0; r < P; ++r) {
      const float* src = row(b, L + r);
      float* dst = state_out + (b * P + r) * C;
      if (src) std::memcpy(dst, src, sizeof(float) * C);
      else std::memset(dst, 0, sizeof(float) * C);
    }
  }
}

}  // namespace tsorch
