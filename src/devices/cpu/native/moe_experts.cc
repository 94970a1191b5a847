// moeExperts: the routed experts of a sparse mixture-of-experts block with silu-gated MLPs
// (transformers' Qwen3MoeExperts / MixtralExperts forward) in one call:
//   out[t] = sum_j weights[t, j] * down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]),  e = ids[t, j]
// Rows (token, slot) are counting-sorted by expert and the token's input gathered once; one grouped
// GEMM computes gate and up together (gate_up [E, 2I, H]); silu(gate) * up is written over the gate
// half in place; a second grouped GEMM applies down; each token's K slots are then weighted and
// summed straight into out. Nothing else is materialized (no [T*K, H] copy of x, no separate
// gate/up/product/weighted tensors, no scatter back).
#include <cstring>
#include <vector>

#include "cpu.h"
#include "dtype.h"
#include "gather_linear.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

inline float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// e^x for x in [-87, 0]: Cephes' expf (x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial in r,
// then 2^n built in the exponent bits).
inline float exp_nonpositive(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.f;
  return y * from_bits(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

// silu(a) = a / (1 + e^-a), within 3e-7 relative of nn's silu (NaN stays NaN; -inf gives -inf):
// a * e / (1 + e) for a < 0 and a / (1 + e) otherwise, e = e^-|a|. Only integer selects and no
// call, so that loops over it vectorize (float selects are branches under -ftrapping-math).
inline float silu(float a) {
  const uint32_t bits = to_bits(a), neg = bits >> 31;
  uint32_t mag = bits & 0x7fffffffu;
  mag = mag < 0x42ae0000u ? mag : 0x42ae0000u;  // |a| clamped to 87 (NaN too: a still carries it)
  const float e = exp_nonpositive(-from_bits(mag));
  return a * from_bits(neg * to_bits(e) + (1u - neg) * 0x3f800000u) / (1.f + e);
}

}  // namespace

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
  // silu(gate) * up over the gate half of each row.
  parallel_rows(M, 4.0 * static_cast<double>(I), [&](int64_t r) {
    float* a = h + r * 2 * I;
    const float* u = a + I;
    for (int64_t i = 0; i < I; ++i) a[i] = silu(a[i]) * u[i];
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
