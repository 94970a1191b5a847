// Vector traits for the portable kernels: 8 floats in a plain struct, which the compiler maps to
// whatever SIMD the baseline target has (SSE2 on x86-64, NEON on arm64). Included only by
// gemm_portable.cc. Tile sizes are read by gemm_impl.h.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace tsorch {
namespace {

struct VecPortable {
  static constexpr const char* kName = "portable";
  static constexpr bool kOwnTranspose = false;  // transpose() vs permute2()
  static constexpr int W = 8;
  struct vf { float v[W]; };

  // Packed micro-kernel tile (MR x NV*W), cache blocks, direct-kernel tile (DM x DN).
  static constexpr int MR = 4, NV = 2, KC = 256, NC = 256;
  static constexpr int DM = 1, DN = 4, NN_NV = 2;
  static constexpr int64_t kDirectMaxM = 4;

  static vf zero() { vf r; for (int i = 0; i < W; ++i) r.v[i] = 0.f; return r; }
  static vf set1(float a) { vf r; for (int i = 0; i < W; ++i) r.v[i] = a; return r; }
  static vf load(const float* p) { vf r; for (int i = 0; i < W; ++i) r.v[i] = p[i]; return r; }
  static void store(float* p, vf a) { for (int i = 0; i < W; ++i) p[i] = a.v[i]; }
  static vf add(vf a, vf b) { for (int i = 0; i < W; ++i) a.v[i] += b.v[i]; return a; }
  static vf fma(vf a, vf b, vf c) { for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }
  static float hsum(vf a) {
    float s = 0.f;
    for (int i = 0; i < W; ++i) s += a.v[i];
    return s;
  }
  static vf load_bf16(const uint16_t* p) { vf r; for (int i = 0; i < W; ++i) r.v[i] = bf16_to_f32(p[i]); return r; }
  static vf load_f16(const uint16_t* p) { vf r; for (int i = 0; i < W; ++i) r.v[i] = f16_to_f32(p[i]); return r; }
  // out[l] = idx[l] < W ? a[idx[l]] : b[idx[l] - W] (gemm_impl.h's butterfly transpose; the
  // portable kernels use it so that the AVX-512 transpose logic is exercised on any CPU).
  static vf permute2(vf a, const int32_t* idx, vf b) {
    vf r;
    for (int i = 0; i < W; ++i) r.v[i] = idx[i] < W ? a.v[idx[i]] : b.v[idx[i] - W];
    return r;
  }
};

}  // namespace
}  // namespace tsorch
