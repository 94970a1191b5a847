// RMSNorm and LayerNorm over the last axis. Row statistics accumulate in double; the
// normalisation itself is float32.
#include <cmath>
#include <cstring>
#include <vector>

#include "dtype.h"
#include "isa_clones.h"
#include "ops.h"
#include "thread_pool.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tsorch {

namespace {

typedef float f32x8 __attribute__((vector_size(32)));
typedef double f64x8 __attribute__((vector_size(64)));

// One row of rms_norm: o = x / sqrt(mean(x^2) + eps) * w, the squares summed in double by eight
// accumulators (lane j: elements j, j + 8, ...) added pairwise at the end. Compiled per ISA
// (isa_clones.h); a Qwen3-0.6B-shaped decode step calls rms_norm 113 times (the norms before the
// qkv and gate/up projections and the LM head on rows of 1024, the q/k norms on 24 rows of 128),
// where the scalar loop this replaces took most of a rotaryKVWrite node. The products are exact in
// double, so the clones' FMAs leave the sums as they were.
TSORCH_ISA_CLONES
void rms_row(const float* x, const float* w, float* o, int64_t n, float eps) {
  f64x8 acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f32x8 v;
    std::memcpy(&v, x + i, sizeof v);
    const f64x8 d = __builtin_convertvector(v, f64x8);
    acc += d * d;
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i]) * x[i];
  const double ss = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t k = 0; k < n; ++k) o[k] = x[k] * inv * w[k];
}

// w [n] (float32/float16/bfloat16) plus `add` as float32 into out.
TSORCH_ISA_CLONES
void widen_plus(const void* w, int dtype, int64_t n, float add, float* out) {
  if (dtype == kF32) {
    const float* f = static_cast<const float*>(w);
    for (int64_t i = 0; i < n; ++i) out[i] = add + f[i];
  } else if (dtype == kBF16) {
    const uint16_t* h = static_cast<const uint16_t*>(w);
    for (int64_t i = 0; i < n; ++i) out[i] = add + bits_f32(static_cast<uint32_t>(h[i]) << 16);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = add + load_float(w, dtype, i);
  }
}

// A [n] float32/float16/bfloat16 vector as float32 plus `add`, or `fill` where p is null.
std::vector<float> to_f32(const void* p, int dtype, int64_t n, float add, float fill) {
  std::vector<float> v(n, fill);
  if (p) widen_plus(p, dtype, n, add, v.data());
  return v;
}

}  // namespace

// out = x / sqrt(mean(x^2) + eps) * (offset + w), row by row.
void rms_norm(const float* x, const void* w, int w_dtype, float* out, int64_t rows, int64_t n,
              float eps, float offset) {
  // The weight as float32: itself, or widened into a buffer of the calling thread (reused: the
  // norms of a decode step run on it one after another, never nested).
  thread_local std::vector<float> widened;
  const float* wf = static_cast<const float*>(w);
  if (w_dtype != kF32 || offset != 0.f) {
    if (widened.size() < static_cast<size_t>(n)) widened.resize(static_cast<size_t>(n));
    widen_plus(w, w_dtype, n, offset, widened.data());
    wf = widened.data();
  }
  parallel_rows(rows, 4.0 * n, [&](int64_t r) { rms_row(x + r * n, wf, out + r * n, n, eps); });
}

// out = (x - mean) / sqrt(var + eps) * w + b with the biased variance, row by row.
void layer_norm(const float* x, const void* w, int w_dtype, const void* b, int b_dtype, float* out,
                int64_t rows, int64_t n, float eps) {
  const std::vector<float> wf = to_f32(w, w_dtype, n, 0.f, 1.f);
  const std::vector<float> bf = to_f32(b, b_dtype, n, 0.f, 0.f);
  parallel_rows(rows, 6.0 * n, [&](int64_t r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const double mean = sum / static_cast<double>(n);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(n) + eps));
    const float mf = static_cast<float>(mean);
    for (int64_t i = 0; i < n; ++i) o[i] = (xr[i] - mf) * inv * wf[i] + bf[i];
  });
}

}  // namespace tsorch
