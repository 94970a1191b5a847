// Fused kernels of compile's passes on cpu and their Node-API exports (see fused.h).

#include "dtype.h"
#include "fused.h"
#include "gemm.h"
#include "napi_args.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

void linear_add(const float* x, const FusedWeight& w, const void* bias, int bias_dtype,
                const float* residual, float* out, int64_t M, int64_t N, int64_t K) {
  if (w.bits) {
    // Without bias one row's residual is the bias (dot_rows adds it to the finished sum, as the add would).
    const uint8_t* q = static_cast<const uint8_t*>(w.w);
    if (M == 1 && !bias) return linear_quantized(x, q, w.scales, w.bits, residual, kF32, out, M, N, K);
    linear_quantized(x, q, w.scales, w.bits, bias, bias_dtype, out, M, N, K);
  } else if (M == 1 && !bias) {
    // Without bias one row's residual is the bias: gemm adds it to the finished sum, as the add
    // would. (With a bias, dot + (bias + residual) would round differently from the plain ops'
    // (dot + bias) + residual, so that case takes linear and the add below.)
    gemm_parallel(x, K, 1, K, BMatrix{w.w, w.dtype, 1, K, true}, residual, out, N, N);
    return;
  } else {
    linear(x, w.w, w.dtype, bias, bias_dtype, out, M, N, K);
  }
  parallel_rows(M, double(N), [&](int64_t m) {
    float* o = out + m * N;
    const float* r = residual + m * N;
    for (int64_t n = 0; n < N; ++n) o[n] += r[n];
  });
}

// linearAdd(x, w, wDtype, bias, biasDtype, residual, out, M, N, K, scales, bits): bits 0, w a float
// weight of wDtype (scales null); bits 8 / 4, w block-quantized codes with scales (see fused.h).
napi_value LinearAddExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "linearAdd", 12);
  const Buffer x = args.buffer(0, "x");
  const Buffer bias = args.buffer(3, "bias", true);
  const int bdt = args.dtype(4, "biasDtype");
  const Buffer residual = args.buffer(5, "residual");
  const Buffer out = args.buffer(6, "out");
  const int64_t M = args.integer(7, "M"), N = args.integer(8, "N"), K = args.integer(9, "K");
  FusedWeight w;
  if (args.failed() || !read_fused_weight(args, 1, 10, 11, N, K, &w)) return nullptr;
  if (bias.data) {
    float_dtype(args, bdt, "biasDtype");
    args.fits(bias, bdt, {N});
  }
  args.fits(x, kF32, {M, K});
  args.fits(residual, kF32, {M, N});
  args.fits(out, kF32, {M, N});
  if (args.failed()) return nullptr;
  linear_add(static_cast<const float*>(x.data), w, bias.data, bdt, static_cast<const float*>(residual.data),
             static_cast<float*>(out.data), M, N, K);
  return undefined(env);
}

}  // namespace tsorch
