// Vector traits for the AVX-512 kernels (16 floats per __m512). Included only by gemm_avx512.cc,
// which is compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tsorch {
namespace {

struct VecAvx512 {
  static constexpr const char* kName = "avx512";
  static constexpr bool kOwnTranspose = false;  // transpose() vs permute2()
  static constexpr int W = 16;
  using vf = __m512;

  // 12x32 packed tile: 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers.
  static constexpr int MR = 12, NV = 2, KC = 256, NC = 256;
  // Direct kernels: 4 rows of A x 4 rows of W (16 accumulators + 4 converted weight vectors).
  static constexpr int DM = 4, DN = 4, NN_NV = 4;
  static constexpr int64_t kDirectMaxM = 8;

  static vf zero() { return _mm512_setzero_ps(); }
  static vf set1(float a) { return _mm512_set1_ps(a); }
  static vf load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vf a) { _mm512_storeu_ps(p, a); }
  static vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
  static vf fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(vf a) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), hi);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // bf16 -> f32: widen the 16-bit lanes to 32 and shift them into the high half.
  static vf load_bf16(const uint16_t* p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static vf load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // out[l] = idx[l] < W ? a[idx[l]] : b[idx[l] - W] (gemm_impl.h's butterfly transpose).
  static vf permute2(vf a, const int32_t* idx, vf b) {
    return _mm512_permutex2var_ps(a, _mm512_loadu_si512(idx), b);
  }
};

}  // namespace
}  // namespace tsorch
