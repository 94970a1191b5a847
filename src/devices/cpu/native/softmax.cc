// softmax / log_softmax over the last axis. The normaliser accumulates in double.
#include <cmath>
#include <limits>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

// Row-wise softmax (log = false) or log_softmax (log = true) of contiguous float32 [rows, n].
void softmax(const float* x, float* out, int64_t rows, int64_t n, bool log) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  parallel_rows(rows, 16.0 * n, [&](int64_t r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    float mx = kNegInf;
    for (int64_t i = 0; i < n; ++i) mx = xr[i] > mx ? xr[i] : mx;
    if (mx == kNegInf) {  // every entry is -inf (or the row is empty)
      for (int64_t i = 0; i < n; ++i) o[i] = log ? kNegInf : 0.f;
      return;
    }
    double sum = 0;
    if (log) {
      for (int64_t i = 0; i < n; ++i) sum += std::exp(xr[i] - mx);
      const float lse = static_cast<float>(std::log(sum));
      for (int64_t i = 0; i < n; ++i) o[i] = (xr[i] - mx) - lse;
    } else {
      for (int64_t i = 0; i < n; ++i) sum += (o[i] = std::exp(xr[i] - mx));
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t i = 0; i < n; ++i) o[i] *= inv;
    }
  });
}

}  // namespace tsorch
