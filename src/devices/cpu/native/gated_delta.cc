// The gated delta rule (Gated DeltaNet linear attention, Qwen3.5 / Qwen3-Next) as one fused scan:
// each (batch, head) keeps its [Dk, Dv] state in cache and walks the tokens in order, so prefill
// and decode share one kernel and memory does not grow with the sequence. Per token t, as
// transformers' torch_recurrent_gated_delta_rule (models/qwen3_5/modeling_qwen3_5.py):
//   S = S * exp(g_t);  kv = k_t^T S;  delta = beta_t (v_t - kv);  S = S + k_t delta^T;  o_t = q_t^T S.
#include <cmath>
#include <cstring>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// One (batch, head) over L tokens; q, k, v, g, beta advance by their token strides. The inner
// loops run over Dv contiguous floats and vectorise; target_clones picks AVX-512 / AVX2 at load
// time on x86-64 Linux (the addon itself is compiled for the baseline target).
#if defined(__x86_64__) && defined(__linux__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void scan_head(const float* __restrict q, const float* __restrict k, const float* __restrict v,
               const float* __restrict g, const float* __restrict beta, float* __restrict S,
               float* __restrict o, int64_t L, int64_t Dk, int64_t Dv, int64_t qk_step,
               int64_t v_step, int64_t gb_step, int64_t o_step, double* __restrict kv,
               double* __restrict acc) {
  for (int64_t t = 0; t < L; ++t) {
    const float* qt = q + t * qk_step;
    const float* kt = k + t * qk_step;
    const float* vt = v + t * v_step;
    const float decay = std::exp(g[t * gb_step]), b = beta[t * gb_step];
    for (int64_t j = 0; j < Dv; ++j) kv[j] = 0.0;
    for (int64_t i = 0; i < Dk; ++i) {
      float* __restrict row = S + i * Dv;
      const float ki = kt[i];
      for (int64_t j = 0; j < Dv; ++j) {
        const float s = row[j] * decay;
        row[j] = s;
        kv[j] += static_cast<double>(s) * ki;
      }
    }
    for (int64_t j = 0; j < Dv; ++j) kv[j] = (vt[j] - kv[j]) * b;  // kv now holds delta
    for (int64_t j = 0; j < Dv; ++j) acc[j] = 0.0;
    for (int64_t i = 0; i < Dk; ++i) {
      float* __restrict row = S + i * Dv;
      const float ki = kt[i], qi = qt[i];
      for (int64_t j = 0; j < Dv; ++j) {
        const float s = static_cast<float>(row[j] + ki * kv[j]);
        row[j] = s;
        acc[j] += static_cast<double>(s) * qi;
      }
    }
    float* __restrict ot = o + t * o_step;
    for (int64_t j = 0; j < Dv; ++j) ot[j] = static_cast<float>(acc[j]);
  }
}

}  // namespace

void gated_delta_rule(const float* q, const float* k, const float* v, const float* g,
                      const float* beta, const float* state, float* out, float* state_out,
                      int64_t B, int64_t L, int64_t H, int64_t Dk, int64_t Dv) {
  const int64_t heads = B * H;
  parallel_rows(heads, 4.0 * static_cast<double>(L * Dk * Dv), [&](int64_t bh) {
    const int64_t b = bh / H, h = bh % H;
    float* S = state_out + bh * Dk * Dv;
    if (state) std::memcpy(S, state + bh * Dk * Dv, sizeof(float) * Dk * Dv);
    else std::memset(S, 0, sizeof(float) * Dk * Dv);
    std::vector<double> kv(Dv), acc(Dv);
    const int64_t qk0 = (b * L * H + h) * Dk, v0 = (b * L * H + h) * Dv, gb0 = b * L * H + h;
    scan_head(q + qk0, k + qk0, v + v0, g + gb0, beta + gb0, S, out + v0, L, Dk, Dv, H * Dk,
              H * Dv, H, H * Dv, kv.data(), acc.data());
  });
}

}  // namespace tsorch
