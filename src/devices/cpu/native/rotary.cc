// Rotary position embedding (transformers' rotate_half convention).
#include <cstring>

#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

// x, out [B, L, H, D]; cos, sin [B, L, R]: rotates the first R dims of every head, copies the rest.
void rotary(const float* x, const float* cos, const float* sin, float* out, int64_t B, int64_t L,
            int64_t H, int64_t D, int64_t R) {
  const int64_t half = R / 2;
  parallel_rows(B * L * H, 4.0 * D, [&](int64_t r) {
    const float* xr = x + r * D;
    float* o = out + r * D;
    const float* c = cos + (r / H) * R;
    const float* s = sin + (r / H) * R;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = xr[i], x2 = xr[i + half];
      o[i] = x1 * c[i] - x2 * s[i];
      o[i + half] = x2 * c[i + half] + x1 * s[i + half];
    }
    if (o != xr) std::memcpy(o + R, xr + R, (D - R) * sizeof(float));
  });
}

}  // namespace tsorch
