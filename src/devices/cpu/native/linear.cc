// linear (nn.Linear / F.linear): out = x @ w^T + bias, w kept in its stored dtype.
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"

namespace tsorch {

// x float32 [M, K], w [N, K] of w_dtype, bias null or [N] of bias_dtype, out float32 [M, N].
void linear(const float* x, const void* w, int w_dtype, const void* bias, int bias_dtype,
            float* out, int64_t M, int64_t N, int64_t K) {
  std::vector<float> bias_f32;
  const float* b = static_cast<const float*>(bias);
  if (bias && bias_dtype != kF32) {
    bias_f32.resize(N);
    for (int64_t n = 0; n < N; ++n) bias_f32[n] = load_float(bias, bias_dtype, n);
    b = bias_f32.data();
  }
  gemm_parallel(x, K, M, K, BMatrix{w, w_dtype, 1, K, true}, b, out, N, N);
}

}  // namespace tsorch
