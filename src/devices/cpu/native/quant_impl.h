// Kernels of quant_kernels.h, written once for the instruction set the including translation unit
// is compiled for: AVX-512 (__AVX512F__), AVX2 + FMA (__AVX2__), else portable C++. Included only
// by quant_avx512.cc, quant_avx2.cc and quant_portable.cc.
#pragma once

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "quant_kernels.h"

namespace tsorch {
namespace {

#if defined(__AVX512F__)
constexpr const char* kQuantName = "avx512";
using QVec = __m512;
constexpr int kQW = 16;
inline QVec qzero() { return _mm512_setzero_ps(); }
inline QVec qload(const float* p) { return _mm512_loadu_ps(p); }
inline void qstore(float* p, QVec v) { _mm512_storeu_ps(p, v); }
inline QVec qfma(QVec a, QVec b, QVec c) { return _mm512_fmadd_ps(a, b, c); }
inline QVec qmul(QVec a, QVec b) { return _mm512_mul_ps(a, b); }
inline QVec qset1(float a) { return _mm512_set1_ps(a); }
inline float qhsum(QVec v) { return _mm512_reduce_add_ps(v); }
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
constexpr const char* kQuantName = "avx2";
using QVec = __m256;
constexpr int kQW = 8;
inline QVec qzero() { return _mm256_setzero_ps(); }
inline QVec qload(const float* p) { return _mm256_loadu_ps(p); }
inline void qstore(float* p, QVec v) { _mm256_storeu_ps(p, v); }
inline QVec qfma(QVec a, QVec b, QVec c) { return _mm256_fmadd_ps(a, b, c); }
inline QVec qmul(QVec a, QVec b) { return _mm256_mul_ps(a, b); }
inline QVec qset1(float a) { return _mm256_set1_ps(a); }
inline float qhsum(QVec v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
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
constexpr const char* kQuantName = "portable";
struct QVec { float v[8]; };
constexpr int kQW = 8;
inline QVec qzero() { return QVec{}; }
inline QVec qload(const float* p) { QVec r; for (int i = 0; i < 8; ++i) r.v[i] = p[i]; return r; }
inline void qstore(float* p, QVec a) { for (int i = 0; i < 8; ++i) p[i] = a.v[i]; }
inline QVec qfma(QVec a, QVec b, QVec c) { for (int i = 0; i < 8; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }
inline QVec qmul(QVec a, QVec b) { for (int i = 0; i < 8; ++i) a.v[i] *= b.v[i]; return a; }
inline QVec qset1(float a) { QVec r; for (int i = 0; i < 8; ++i) r.v[i] = a; return r; }
inline float qhsum(QVec a) { float s = 0; for (int i = 0; i < 8; ++i) s += a.v[i]; return s; }
inline void qdecode(int bits, const uint8_t* p, QVec w[4]) {
  for (int i = 0; i < 32; ++i) {
    const int v = bits == 8 ? static_cast<int8_t>(p[i])
                            : (i < 16 ? (p[i] & 0x0F) : (p[i - 16] >> 4)) - 8;
    w[i / 8].v[i % 8] = static_cast<float>(v);
  }
}
#endif

constexpr int kQV = 32 / kQW;  // vectors per block

// MM rows of A against R rows of W starting at row n: each block of W is decoded once and used
// for the MM rows; each block's partial sum is scaled once (acc += d * sum(codes * a)).
template <int MM, int R>
void dot_tile(int bits, const float* A, int64_t lda, int64_t K, const uint8_t* q,
              const float* scales, const float* bias, float* C, int64_t ldc, int64_t n) {
  const int64_t nb = K / 32, bb = bits == 8 ? 32 : 16, row = quant_row_bytes(bits, K);
  QVec acc[MM][R];
  for (int m = 0; m < MM; ++m)
    for (int r = 0; r < R; ++r) acc[m][r] = qzero();
  for (int64_t g = 0; g < nb; ++g) {
    QVec w[R][kQV], d[R];
    for (int r = 0; r < R; ++r) {
      // Interleaved rows (R > 1): fetch ~16 KB ahead, the hardware prefetcher does not follow R
      // streams far enough (as gemv_nt_block in gemm_impl.h).
      if (R > 1) __builtin_prefetch(q + (n + r) * row + g * bb + 16384 / R);
      qdecode(bits, q + (n + r) * row + g * bb, w[r]);
      d[r] = qset1(scales[(n + r) * nb + g]);
    }
    for (int m = 0; m < MM; ++m) {
      QVec a[kQV];
      for (int v = 0; v < kQV; ++v) a[v] = qload(A + m * lda + g * 32 + v * kQW);
      for (int r = 0; r < R; ++r) {
        QVec t = qmul(w[r][0], a[0]);
        for (int v = 1; v < kQV; ++v) t = qfma(w[r][v], a[v], t);
        acc[m][r] = qfma(t, d[r], acc[m][r]);
      }
    }
  }
  for (int m = 0; m < MM; ++m)
    for (int r = 0; r < R; ++r)
      C[m * ldc + n + r] = qhsum(acc[m][r]) + (bias ? bias[n + r] : 0.f);
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
      const QVec d = qset1(scales[n * nb + g]);
      float* o = dst + (n - n0) * K + g * 32;
      for (int v = 0; v < kQV; ++v) qstore(o + v * kQW, qmul(w[v], d));
    }
  }
}

}  // namespace
}  // namespace tsorch
