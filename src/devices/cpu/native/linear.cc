// linear (nn.Linear / F.linear): out = x @ w^T + bias, w kept in its stored dtype.
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"

namespace tsorch {

const float* float32_values(const void* p, int dtype, int64_t n, std::vector<float>& scratch) {
  if (!p || dtype == kF32) return static_cast<const float*>(p);
  scratch.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) scratch[i] = load_float(p, dtype, i);
  return scratch.data();
}

// x float32 [M, K], w [N, K] of w_dtype, bias null or [N] of bias_dtype, out float32 [M, N].
void linear(const float* x, const void* w, int w_dtype, const void* bias, int bias_dtype,
            float* out, int64_t M, int64_t N, int64_t K) {
  std::vector<float> bias_f32;
  const float* b = float32_values(bias, bias_dtype, N, bias_f32);
  gemm_parallel(x, K, M, K, BMatrix{w, w_dtype, 1, K, true}, b, out, N, N);
}

}  // namespace tsorch
