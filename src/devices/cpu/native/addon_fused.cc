// Fused kernels of compile's passes on cpu and their Node-API exports (see fused.h).
#include <vector>

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "napi_args.h"
#include "thread_pool.h"

namespace tsorch {

void linear_add(const float* x, const void* w, int w_dtype, const void* bias, int bias_dtype,
                const float* residual, float* out, int64_t M, int64_t N, int64_t K) {
  const BMatrix B{w, w_dtype, 1, K, true};
  if (M == 1) {
    // The residual row is a bias: gemm adds it as it stores each output.
    const float* b = residual;
    std::vector<float> sum;
    if (bias) {
      sum.resize(N);
      for (int64_t n = 0; n < N; ++n) sum[n] = load_float(bias, bias_dtype, n) + residual[n];
      b = sum.data();
    }
    gemm_parallel(x, K, 1, K, B, b, out, N, N);
    return;
  }
  std::vector<float> bias_f32;
  const float* b = static_cast<const float*>(bias);
  if (bias && bias_dtype != kF32) {
    bias_f32.resize(N);
    for (int64_t n = 0; n < N; ++n) bias_f32[n] = load_float(bias, bias_dtype, n);
    b = bias_f32.data();
  }
  gemm_parallel(x, K, M, K, B, b, out, N, N);
  parallel_rows(M, double(N), [&](int64_t m) {
    float* o = out + m * N;
    const float* r = residual + m * N;
    for (int64_t n = 0; n < N; ++n) o[n] += r[n];
  });
}

// linearAdd(x, w, wDtype, bias, biasDtype, residual, out, M, N, K)
napi_value LinearAddExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearAdd", 10);
  const Buffer x = args.buffer(0, "x");
  const Buffer w = args.buffer(1, "w");
  const int wdt = args.dtype(2, "wDtype");
  const Buffer bias = args.buffer(3, "bias", true);
  const int bdt = args.dtype(4, "biasDtype");
  const Buffer residual = args.buffer(5, "residual");
  const Buffer out = args.buffer(6, "out");
  const int64_t M = args.integer(7, "M"), N = args.integer(8, "N"), K = args.integer(9, "K");
  float_dtype(args, wdt, "wDtype");
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(x, kF32, {M, K});
  args.fits(w, wdt, {N, K});
  args.fits(residual, kF32, {M, N});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  linear_add(static_cast<const float*>(x.data), w.data, wdt, bias.data, bdt,
             static_cast<const float*>(residual.data), static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

}  // namespace tsorch
