// Kernels of quant_kernels.h, written once for the instruction set the including translation unit
// is compiled for: AVX-512 (__AVX512F__), AVX2 + FMA (__AVX2__), else portable C++. Included only
// by quant_avx512.cc, quant_avx2.cc and quant_portable.cc.
#pragma once

#if defined(__AVX512F__)
#include "simd_avx512.h"
#elif defined(__AVX2__)
#include "simd_avx2.h"
#else
#include "simd_portable.h"
#endif

#include "quant_kernels.h"

namespace tsorch {
namespace {

// The GEMM's vector traits (simd_*.h: zero, set1, load, store, fma, hsum) for the instruction set of
// the translation unit, plus what quantized blocks add: a product and the decoding of one block.
#if defined(__AVX512F__)
using QV = VecAvx512;
using QVec = QV::vf;
inline QVec qmul(QVec a, QVec b) { return _mm512_mul_ps(a, b); }
// The 32 values of one block (before scaling) in two vectors.
inline void qdecode(int bits, const uint8_t* p, QVec w[2]) {
  if (bits == 8) {
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16))));
  } else {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(b, m), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), eight);
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
    w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
  }
}
#elif defined(__AVX2__)
using QV = VecAvx2;
using QVec = QV::vf;
inline QVec qmul(QVec a, QVec b) { return _mm256_mul_ps(a, b); }
inline QVec qcvt8(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }
inline void qdecode(int bits, const uint8_t* p, QVec w[4]) {
  __m128i a, c;
  if (bits == 8) {
    a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  } else {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    a = _mm_sub_epi8(_mm_and_si128(b, m), eight);
    c = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), eight);
  }
  w[0] = qcvt8(a);
  w[1] = qcvt8(_mm_srli_si128(a, 8));
  w[2] = qcvt8(c);
  w[3] = qcvt8(_mm_srli_si128(c, 8));
}
#else
using QV = VecPortable;
using QVec = QV::vf;
inline QVec qmul(QVec a, QVec b) { for (int i = 0; i < QV::W; ++i) a.v[i] *= b.v[i]; return a; }
inline void qdecode(int bits, const uint8_t* p, QVec w[4]) {
  for (int i = 0; i < 32; ++i) {
    const int v = bits == 8 ? static_cast<int8_t>(p[i])
                            : (i < 16 ? (p[i] & 0x0F) : (p[i - 16] >> 4)) - 8;
    w[i / 8].v[i % 8] = static_cast<float>(v);
  }
}
#endif

constexpr const char* kQuantName = QV::kName;
constexpr int kQW = QV::W;
constexpr int kQV = 32 / kQW;  // vectors per block

// MM rows of A against R rows of W starting at row n: each block of W is decoded once and used
// for the MM rows; each block's partial sum is scaled once (acc += d * sum(codes * a)).
template <int MM, int R>
void dot_tile(int bits, const float* A, int64_t lda, int64_t K, const uint8_t* q,
              const float* scales, const float* bias, float* C, int64_t ldc, int64_t n) {
  const int64_t nb = K / 32, bb = bits == 8 ? 32 : 16, row = quant_row_bytes(bits, K);
  QVec acc[MM][R];
  for (int m = 0; m < MM; ++m)
    for (int r = 0; r < R; ++r) acc[m][r] = QV::zero();
  for (int64_t g = 0; g < nb; ++g) {
    QVec w[R][kQV], d[R];
    for (int r = 0; r < R; ++r) {
      // Interleaved rows (R > 1): fetch ~16 KB ahead, the hardware prefetcher does not follow R
      // streams far enough (as gemv_nt_block in gemm_impl.h).
      if (R > 1) __builtin_prefetch(q + (n + r) * row + g * bb + 16384 / R);
      qdecode(bits, q + (n + r) * row + g * bb, w[r]);
      d[r] = QV::set1(scales[(n + r) * nb + g]);
    }
    for (int m = 0; m < MM; ++m) {
      QVec a[kQV];
      for (int v = 0; v < kQV; ++v) a[v] = QV::load(A + m * lda + g * 32 + v * kQW);
      for (int r = 0; r < R; ++r) {
        QVec t = qmul(w[r][0], a[0]);
        for (int v = 1; v < kQV; ++v) t = QV::fma(w[r][v], a[v], t);
        acc[m][r] = QV::fma(t, d[r], acc[m][r]);
      }
    }
  }
  for (int m = 0; m < MM; ++m)
    for (int r = 0; r < R; ++r)
      C[m * ldc + n + r] = QV::hsum(acc[m][r]) + (bias ? bias[n + r] : 0.f);
}

// MM rows of A against rows [n0, n1) of W. One row of A (decode) takes one row of W at a time, so
// that W is read in address order, a single stream the hardware prefetcher follows at close to the
// DRAM bandwidth (four interleaved rows measured ~2x slower in the model); several rows of A are
// bound by arithmetic instead and share each decoded block: 4 rows of W for MM = 2, else 2.
template <int MM>
void dot_rows_m(int bits, const float* A, int64_t lda, int64_t K, const uint8_t* q,
                const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                int64_t n1) {
  constexpr int R = MM == 1 ? 1 : MM == 2 ? 4 : 2;
  int64_t n = n0;
  for (; n + R <= n1; n += R) dot_tile<MM, R>(bits, A, lda, K, q, scales, bias, C, ldc, n);
  for (; n < n1; ++n) dot_tile<MM, 1>(bits, A, lda, K, q, scales, bias, C, ldc, n);
}

void dot_rows(int bits, const float* A, int64_t lda, int64_t M, int64_t K, const uint8_t* q,
              const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
              int64_t n1) {
  for (int64_t m = 0; m < M; m += 4) {
    const float* a = A + m * lda;
    float* c = C + m * ldc;
    switch (M - m) {
      case 1: dot_rows_m<1>(bits, a, lda, K, q, scales, bias, c, ldc, n0, n1); break;
      case 2: dot_rows_m<2>(bits, a, lda, K, q, scales, bias, c, ldc, n0, n1); break;
      case 3: dot_rows_m<3>(bits, a, lda, K, q, scales, bias, c, ldc, n0, n1); break;
      default: dot_rows_m<4>(bits, a, lda, K, q, scales, bias, c, ldc, n0, n1); break;
    }
  }
}

void dequant_rows(int bits, int64_t K, const uint8_t* q, const float* scales, float* dst,
                  int64_t n0, int64_t n1) {
  const int64_t nb = K / 32, bb = bits == 8 ? 32 : 16, row = quant_row_bytes(bits, K);
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t g = 0; g < nb; ++g) {
      QVec w[kQV];
      qdecode(bits, q + n * row + g * bb, w);
      const QVec d = QV::set1(scales[n * nb + g]);
      float* o = dst + (n - n0) * K + g * 32;
      for (int v = 0; v < kQV; ++v) QV::store(o + v * kQW, qmul(w[v], d));
    }
  }
}

}  // namespace
}  // namespace tsorch
