// Node-API exports of the image ops (see native.ts for their contracts): each parses and checks
// its arguments (napi_args.h) and then runs its kernel (spatial.h) synchronously.
#include "dtype.h"
#include "napi_args.h"
#include "spatial.h"

namespace tsorch {

// conv2d(x, w, wDtype, bias, biasDtype, out, N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, groups)
napi_value Conv2dExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "conv2d", 20);
  const Buffer x = args.buffer(0, "x");
  const Buffer w = args.buffer(1, "w");
  const int wdt = args.dtype(2, "wDtype");
  const Buffer bias = args.buffer(3, "bias", true);
  const int bdt = args.dtype(4, "biasDtype");
  const Buffer out = args.buffer(5, "out");
  Conv2dArgs a{};
  a.N = args.integer(6, "N");
  a.C = args.integer(7, "C");
  a.H = args.integer(8, "H");
  a.W = args.integer(9, "W");
  a.O = args.integer(10, "O");
  a.kh = args.integer(11, "kh", 1);
  a.kw = args.integer(12, "kw", 1);
  a.sh = args.integer(13, "sh", 1);
  a.sw = args.integer(14, "sw", 1);
  a.ph = args.integer(15, "ph");
  a.pw = args.integer(16, "pw");
  a.dh = args.integer(17, "dh", 1);
  a.dw = args.integer(18, "dw", 1);
  a.groups = args.integer(19, "groups", 1);
  if (args.failed()) return nullptr;
  float_dtype(args, wdt, "wDtype");
  if (bias.data) float_dtype(args, bdt, "biasDtype");
  args.check(a.C % a.groups == 0 && a.O % a.groups == 0, false,
             "groups = %lld must divide C = %lld and O = %lld", static_cast<long long>(a.groups),
             static_cast<long long>(a.C), static_cast<long long>(a.O));
  a.Ho = (a.H + 2 * a.ph - a.dh * (a.kh - 1) - 1) / a.sh + 1;
  a.Wo = (a.W + 2 * a.pw - a.dw * (a.kw - 1) - 1) / a.sw + 1;
  args.check(a.H + 2 * a.ph >= a.dh * (a.kh - 1) + 1 && a.W + 2 * a.pw >= a.dw * (a.kw - 1) + 1, false,
             "the padded input %lld x %lld is smaller than the dilated kernel",
             static_cast<long long>(a.H + 2 * a.ph), static_cast<long long>(a.W + 2 * a.pw));
  if (args.failed()) return nullptr;
  args.fits(x, kF32, {a.N, a.C, a.H, a.W});
  args.fits(w, wdt, {a.O, a.C / a.groups, a.kh, a.kw});
  if (bias.data) args.fits(bias, bdt, {a.O});
  args.fits(out, kF32, {a.N, a.O, a.Ho, a.Wo});
  if (args.failed()) return nullptr;
  a.x = static_cast<const float*>(x.data);
  a.w = w.data;
  a.w_dtype = wdt;
  a.bias = bias.data;
  a.bias_dtype = bdt;
  a.out = static_cast<float*>(out.data);
  conv2d(a);
  return undefined(env);
}

// groupNorm(x, w, wDtype, b, bDtype, out, N, C, S, groups, eps)
napi_value GroupNormExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "groupNorm", 11);
  const Buffer x = args.buffer(0, "x");
  const Buffer w = args.buffer(1, "w", true);
  const int wdt = args.dtype(2, "wDtype");
  const Buffer b = args.buffer(3, "b", true);
  const int bdt = args.dtype(4, "bDtype");
  const Buffer out = args.buffer(5, "out");
  const int64_t N = args.integer(6, "N"), C = args.integer(7, "C"), S = args.integer(8, "S");
  const int64_t groups = args.integer(9, "groups", 1);
  const double eps = args.number(10, "eps");
  if (args.failed()) return nullptr;
  if (w.data) float_dtype(args, wdt, "wDtype");
  if (b.data) float_dtype(args, bdt, "bDtype");
  args.check(C % groups == 0, false, "groups = %lld must divide C = %lld",
             static_cast<long long>(groups), static_cast<long long>(C));
  args.fits(x, kF32, {N, C, S});
  if (w.data) args.fits(w, wdt, {C});
  if (b.data) args.fits(b, bdt, {C});
  args.fits(out, kF32, {N, C, S});
  if (args.failed()) return nullptr;
  group_norm(static_cast<const float*>(x.data), w.data, wdt, b.data, bdt,
             static_cast<float*>(out.data), N, C, S, groups, static_cast<float>(eps));
  return undefined(env);
}

// upsampleNearest2d(x, out, B, H, W, Ho, Wo, scaleH, scaleW)
napi_value UpsampleNearest2dExport(napi_env env, napi_callback_info info) {
  Args args(env, info, "upsampleNearest2d", 9);
  const Buffer x = args.buffer(0, "x");
  const Buffer out = args.buffer(1, "out");
  const int64_t B = args.integer(2, "B"), H = args.integer(3, "H", 1), W = args.integer(4, "W", 1);
  const int64_t Ho = args.integer(5, "Ho"), Wo = args.integer(6, "Wo");
  const double sh = args.number(7, "scaleH"), sw = args.number(8, "scaleW");
  if (args.failed()) return nullptr;
  args.check(sh >= 0 && sw >= 0, false, "scales must be >= 0, got %g and %g", sh, sw);
  args.fits(x, kF32, {B, H, W});
  args.fits(out, kF32, {B, Ho, Wo});
  if (args.failed()) return nullptr;
  upsample_nearest2d(static_cast<const float*>(x.data), static_cast<float*>(out.data), B, H, W, Ho,
                     Wo, static_cast<float>(sh), static_cast<float>(sw));
  return undefined(env);
}

}  // namespace tsorch
