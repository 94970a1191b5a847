// Nearest-neighbour upsampling with PyTorch's cpu index rule (UpSample.h nearest_idx):
// src = min(floor(float(dst) * scale), in - 1), scale = in / out or 1 / scale_factor in float32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "spatial.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

std::vector<int64_t> source_index(int64_t in, int64_t out, float scale) {
  std::vector<int64_t> idx(out);
  for (int64_t d = 0; d < out; ++d)
    idx[d] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(d) * scale)), in - 1);
  return idx;
}

}  // namespace

void upsample_nearest2d(const float* x, float* out, int64_t B, int64_t H, int64_t W, int64_t Ho,
                        int64_t Wo, float scale_h, float scale_w) {
  const std::vector<int64_t> ih = source_index(H, Ho, scale_h), iw = source_index(W, Wo, scale_w);
  parallel_rows(B * Ho, static_cast<double>(Wo), [&](int64_t r) {
    const float* src = x + (r / Ho * H + ih[r % Ho]) * W;
    float* dst = out + r * Wo;
    for (int64_t t = 0; t < Wo; ++t) dst[t] = src[iw[t]];
  });
}

}  // namespace tsorch
