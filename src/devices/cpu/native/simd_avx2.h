// Vector traits for the AVX2 + FMA + F16C kernels (8 floats per __m256). Included only by
// gemm_avx2.cc, which is compiled with -mavx2 -mfma -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tsorch {
namespace {

struct VecAvx2 {
  static constexpr const char* kName = "avx2";
  static constexpr bool kOwnTranspose = true;  // transpose() vs permute2()
  static constexpr int W = 8;
  using vf = __m256;

  // 6x16 packed tile: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers.
  static constexpr int MR = 6, NV = 2, KC = 256, NC = 256;
  // Direct kernels (M > 1): 4 rows of A x 3 rows of W (12 accumulators + 3 converted weight
  // vectors); measured faster than 2 x 4 for M = 4 and 8.
  static constexpr int DM = 4, DN = 3, NN_NV = 4;
  static constexpr int64_t kDirectMaxM = 8;

  static vf zero() { return _mm256_setzero_ps(); }
  static vf set1(float a) { return _mm256_set1_ps(a); }
  static vf load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vf a) { _mm256_storeu_ps(p, a); }
  static vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
  static vf fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // bf16 -> f32: widen the 16-bit lanes to 32 and shift them into the high half.
  static vf load_bf16(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static vf load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // In-register 8x8 transpose: r[i][j] becomes r[j][i].
  static void transpose(vf (&r)[W]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
  }
};

}  // namespace
}  // namespace tsorch
