// GroupNorm (F.group_norm) in two passes over each group: shifted sums in double for the mean and
// variance, then the normalisation with the per-channel weight and bias.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dtype.h"
#include "spatial.h"
#include "thread_pool.h"

namespace tsorch {

void group_norm(const float* x, const void* w, int w_dtype, const void* b, int b_dtype, float* out,
                int64_t N, int64_t C, int64_t S, int64_t groups, float eps) {
  const int64_t Cg = C / groups, len = Cg * S;
  std::vector<float> wf(C), bf(C);
  for (int64_t c = 0; c < C; ++c) {
    wf[c] = w ? load_float(w, w_dtype, c) : 1.f;
    bf[c] = b ? load_float(b, b_dtype, c) : 0.f;
  }
  if (len == 0) return;
  parallel_rows(N * groups, 4.0 * static_cast<double>(len), [&](int64_t r) {
    const float* xr = x + r * len;
    float* o = out + r * len;
    // Sums of (x - x0) and its square: shifting by a sample keeps the variance exact when the
    // mean is large against the spread.
    const double x0 = xr[0];
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
      for (int j = 0; j < 8; ++j) {
        const double d = xr[i + j] - x0;
        s[j] += d;
        q[j] += d * d;
      }
    for (; i < len; ++i) {
      const double d = xr[i] - x0;
      s[0] += d;
      q[0] += d * d;
    }
    double sum = 0, sq = 0;
    for (int j = 0; j < 8; ++j) {
      sum += s[j];
      sq += q[j];
    }
    const double n = static_cast<double>(len), dm = sum / n;
    const double var = std::max(0.0, sq / n - dm * dm);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float mean = static_cast<float>(x0 + dm);
    const int64_t c0 = (r % groups) * Cg;
    for (int64_t c = 0; c < Cg; ++c) {
      const float scale = inv * wf[c0 + c], shift = bf[c0 + c];
      const float* xc = xr + c * S;
      float* oc = o + c * S;
      for (int64_t k = 0; k < S; ++k) oc[k] = (xc[k] - mean) * scale + shift;
    }
  });
}

}  // namespace tsorch
