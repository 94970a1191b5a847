// RMSNorm and LayerNorm over the last axis. Row statistics accumulate in double; the
// normalisation itself is float32.
#include <cmath>
#include <vector>

#include "dtype.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// A [n] float32/float16/bfloat16 vector as float32 plus `add`, or `fill` where p is null.
std::vector<float> to_f32(const void* p, int dtype, int64_t n, float add, float fill) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = p ? add + load_float(p, dtype, i) : fill;
  return v;
}

}  // namespace

// out = x / sqrt(mean(x^2) + eps) * (offset + w), row by row.
void rms_norm(const float* x, const void* w, int w_dtype, float* out, int64_t rows, int64_t n,
              float eps, float offset) {
  const std::vector<float> wf = to_f32(w, w_dtype, n, offset, 0.f);
  parallel_rows(rows, 4.0 * n, [&](int64_t r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(xr[i + j]) * xr[i + j];
    for (; i < n; ++i) acc[0] += static_cast<double>(xr[i]) * xr[i];
    const double ss = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t k = 0; k < n; ++k) o[k] = xr[k] * inv * wf[k];
  });
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
