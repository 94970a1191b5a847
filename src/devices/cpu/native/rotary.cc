// Rotary position embedding (transformers' rotate_half convention, modeling_llama.py's
// apply_rotary_pos_emb): out = x * cos + rotate_half(x) * sin over the first R dims of each head.
#include <cstring>

#include "isa_clones.h"
#include "ops.h"
#include "thread_pool.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tsorch {

namespace {

typedef float f32x16 __attribute__((vector_size(64)));

// One head row: o[i] = x1 c[i] - x2 s[i], o[i + half] = x2 c[i + half] + x1 s[i + half] with
// x1 = x[i], x2 = x[i + half]. Each step reads both halves' values before it writes either, so
// o may be x itself (the fused q/k norm rotates in place). Compiled per ISA (isa_clones.h): a
// decode step rotates ~24 rows a layer, where the scalar loop (the compiler could not vectorize
// it, o possibly aliasing x) took a third of a rotaryKVWrite node. The AVX2 and AVX-512 clones
// contract the products and sums into FMAs, so the last bits depend on the clone the CPU runs;
// every rotary on the cpu device (eager, fused with the KV write) calls this function, so they
// agree with each other on a host.
TSORCH_ISA_CLONES
void rotate_row(const float* x, const float* c, const float* s, float* o, int64_t half) {
  int64_t i = 0;
  for (; i + 16 <= half; i += 16) {
    f32x16 x1, x2, c1, c2, s1, s2;
    std::memcpy(&x1, x + i, sizeof x1), std::memcpy(&x2, x + i + half, sizeof x2);
    std::memcpy(&c1, c + i, sizeof c1), std::memcpy(&c2, c + i + half, sizeof c2);
    std::memcpy(&s1, s + i, sizeof s1), std::memcpy(&s2, s + i + half, sizeof s2);
    const f32x16 lo = x1 * c1 - x2 * s1, hi = x2 * c2 + x1 * s2;
    std::memcpy(o + i, &lo, sizeof lo), std::memcpy(o + i + half, &hi, sizeof hi);
  }
  for (; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    o[i] = x1 * c[i] - x2 * s[i];
    o[i + half] = x2 * c[i + half] + x1 * s[i + half];
  }
}

}  // namespace

// x, out [B, L, H, D]; cos, sin [B, L, R]: rotates the first R dims of every head, copies the rest.
void rotary(const float* x, const float* cos, const float* sin, float* out, int64_t B, int64_t L,
            int64_t H, int64_t D, int64_t R) {
  parallel_rows(B * L * H, 4.0 * D, [&](int64_t r) {
    const float* xr = x + r * D;
    float* o = out + r * D;
    rotate_row(xr, cos + (r / H) * R, sin + (r / H) * R, o, R / 2);
    if (o != xr) std::memcpy(o + R, xr + R, (D - R) * sizeof(float));
  });
}

}  // namespace tsorch
