// Kernels of the image ops (conv2d.cc, group_norm.cc, upsample.cc) and the Node-API exports that
// call them (addon_spatial.cc). The exports check every argument before a kernel runs.
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstdint>

namespace tsorch {

// torch.nn.functional.conv2d: x [N, C, H, W] float32, w [O, C / groups, kh, kw] of w_dtype
// (float32, float16 or bfloat16, read as stored), bias [O] of bias_dtype or null, out float32
// [N, O, Ho, Wo]; all contiguous.
struct Conv2dArgs {
  const float* x;
  const void* w;
  int w_dtype;
  const void* bias;
  int bias_dtype;
  float* out;
  int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, groups, Ho, Wo;
};
void conv2d(const Conv2dArgs& a);

// torch.nn.functional.group_norm over x [N, C, S] float32 contiguous (S = the spatial size):
// per (n, group of C / groups channels) out = (x - mean) / sqrt(var + eps) * w[c] + b[c] with the
// biased variance; w, b [C] of their dtypes or null (1 / 0).
void group_norm(const float* x, const void* w, int w_dtype, const void* b, int b_dtype, float* out,
                int64_t N, int64_t C, int64_t S, int64_t groups, float eps);

// Nearest upsampling (PyTorch's cpu index rule): out [B, Ho, Wo] = x [B, H, W] at
// (min(floor(ho * scale_h), H - 1), min(floor(wo * scale_w), W - 1)), products in float32.
void upsample_nearest2d(const float* x, float* out, int64_t B, int64_t H, int64_t W, int64_t Ho,
                        int64_t Wo, float scale_h, float scale_w);

// The exports (addon_spatial.cc); addon.cc lists them.
napi_value Conv2dExport(napi_env env, napi_callback_info info);
napi_value GroupNormExport(napi_env env, napi_callback_info info);
napi_value UpsampleNearest2dExport(napi_env env, napi_callback_info info);

}  // namespace tsorch
