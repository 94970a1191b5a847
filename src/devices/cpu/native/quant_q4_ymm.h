// The q4_0 x int8 dot products on 32-byte vectors (AVX2, AVX-VNNI): two blocks of W (64 values,
// one 32-byte load of nibbles) per step instead of one:
//   lo = bytes & 0x0F  -> elements 0..15 of blocks b, b + 1 (16 bytes each)
//   hi = bytes >> 4    -> elements 16..31 of the same blocks
// so that in both vectors the 4 int32 lanes of 16-byte half h belong to block b + h. Both products
// go into ONE int32 accumulator (started at the activations' offset correction), which takes one
// conversion and one FMA with the lanes' d_w * d_a: 3 unpack ops per 64 weights, where the one-block
// step of quant_int_impl.h spends 5 per 32 (a 16-byte load widened to 32 bytes), and on AVX2 the
// unsigned nibbles go straight into vpmaddubsw, without the sign trick's two vpsignb. The same
// integer products as llama.cpp's ggml_vec_dot_q4_0_q8_0, summed exactly in int32 lanes of 8
// products, each lane scaled by d_w * d_a in float32, then summed in float32.
// The 64-byte-line version for AVX512-VNNI is quant_q4_vnni512.h.
//
// Activation rows: quant_q4_act.h's layout with 2 blocks per chunk (64 values; q4y_row_bytes(K)
// bytes or more per row).
//
// Internal linkage (see gemm_impl.h). Include after quant_int_impl.h, with IntTraits
// (quant_int_traits.h) a 32-byte vector: Q4yDot::dot2 is vpdpbusd twice (AVX-VNNI) or
// vpmaddubsw / vpmaddwd (AVX2). make_ymm_int_kernels() is the integer-path table of these tiers:
// quant_int_impl.h's kernels for q8_0, this file's for q4_0.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "prefetch.h"
#include "quant_kernels.h"
#include "quant_q4_act.h"

namespace tsorch {
namespace {

inline int64_t q4y_kp(int64_t K) { return q4_chunk_kp<2>(K); }
inline int64_t q4y_row_bytes(int64_t K) { return 2 * q4y_kp(K); }

// lo . alo + hi . ahi + corr per int32 lane (weights unsigned, activations signed).
struct Q4yDot {
  static __m256i dot2(__m256i corr, __m256i lo, __m256i alo, __m256i hi, __m256i ahi) {
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(corr, lo, alo), hi, ahi);
#else
    // Each int16 lane of vpmaddubsw is at most 2 * 15 * 128 = 3840 in magnitude (codes are within
    // +-127, -128 only from a NaN or infinite input), so the sum of two cannot saturate.
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
    return _mm256_add_epi32(corr, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
  }
};

// One 64-value step (chunk c) of MM activation rows against one row of W (codes qr, scales sr;
// TAIL: only the row's last block, read with 16-byte and 4-byte loads).
template <int MM, bool TAIL>
inline __attribute__((always_inline)) void q4y_step(const uint8_t* act, int64_t stride, int64_t Kp,
                                                    const uint8_t* qr, const float* sr, int64_t c,
                                                    __m256 (&acc)[MM]) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256i line = TAIL ? _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_loadu_si128(reinterpret_cast<const __m128i*>(qr + c * 32)), 0)
                      : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qr + c * 32));
  asm("" : "+v"(line));  // one load of the line, not one per nibble extraction (as quant_q4_vnni512.h)
  const __m256i lo = _mm256_and_si256(line, nib);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(line, 4), nib);
  const __m128 s2 = TAIL ? _mm_load_ss(sr + c * 2) : _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sr + c * 2)));
  const __m256 ws = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s2), spread);
  _Pragma("GCC unroll 4")
  for (int m = 0; m < MM; ++m) {
    const uint8_t* a = act + m * stride;
    const __m256i alo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + c * 64));
    const __m256i ahi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + c * 64 + 32));
    const __m256i corr = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + Kp + c * 32));
    const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(a + Kp + Kp / 2) + c * 8);
    const __m256i s = Q4yDot::dot2(corr, lo, alo, hi, ahi);
    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(ws, da), acc[m]);
  }
}

// MM activation rows against rows [n0, n1) of W: C[m * ldc + n]. One row of W at a time (codes
// and scales two linear streams, each also prefetched kDecodePrefetchBytes ahead: prefetch.h), its
// steps alternating between 2 accumulators per activation row; the tail block goes to the second.
// Measured on Zen 5 (2 threads, W from DRAM, bench/quant_linear.js --copies 300, 1024 x 3072 and
// 3072 x 1024): M = 1 avx2 30.2 / 30.7 -> 37.5 / 36.2 GB/s, avx-vnni 34.6 / 33.5 -> 43.9 / 43.4
// against the one-block steps of quant_int_impl.h; M = 8 and 32 20-40% faster.
template <int MM>
void q4y_rows(const uint8_t* act, int64_t stride, int64_t K, const uint8_t* q, const float* scales,
              const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t nb = K / 32, row = K / 2, Kp = q4y_kp(K), full = nb / 2;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* qr = q + n * row;
    const float* sr = scales + n * nb;
    __m256 even[MM], odd[MM];
    _Pragma("GCC unroll 4")
    for (int m = 0; m < MM; ++m) even[m] = odd[m] = _mm256_setzero_ps();
    for (int64_t l = 0; l < nb * 4; l += 64) prefetch_ahead(sr, kDecodePrefetchBytes / 4 + l);
    int64_t c = 0;
    for (; c + 2 <= full; c += 2) {
      prefetch_ahead(qr + c * 32, kDecodePrefetchBytes);
      q4y_step<MM, false>(act, stride, Kp, qr, sr, c, even);
      q4y_step<MM, false>(act, stride, Kp, qr, sr, c + 1, odd);
    }
    if (c < full) q4y_step<MM, false>(act, stride, Kp, qr, sr, c, even);
    if (nb % 2) q4y_step<MM, true>(act, stride, Kp, qr, sr, full, odd);
    _Pragma("GCC unroll 4")
    for (int m = 0; m < MM; ++m) {
      const __m256 sum = _mm256_add_ps(even[m], odd[m]);
      __m128 s = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
      s = _mm_add_ps(s, _mm_movehl_ps(s, s));
      s = _mm_add_ss(s, _mm_movehdup_ps(s));
      C[m * ldc + n] = _mm_cvtss_f32(s) + (bias ? bias[n] : 0.f);
    }
  }
}

// Activation rows [0, M) (row m at m * stride) against rows [n0, n1) of the q4_0 weight, three
// activation rows at a time: C[m * ldc + n] = sum_k a(m, k) * W(n, k) (+ bias[n]).
inline void q4y_dot_rows(const uint8_t* act, int64_t stride, int64_t M, int64_t K, const uint8_t* q,
                         const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                         int64_t n1) {
  q4_by_row_triples(M, [&](auto rows, int64_t m) {
    q4y_rows<decltype(rows)::value>(act + m * stride, stride, K, q, scales, bias, C + m * ldc, ldc, n0, n1);
  });
}

// The activation row holds either layout (q8_0: quant_int_impl.h's, q4_0: the one above).
inline int64_t act_row_bytes_ymm(int64_t K) {
  const int64_t a = act_row_bytes<IntTraits>(K), b = q4y_row_bytes(K);
  return a > b ? a : b;
}

inline void quantize_act_ymm(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K, uint8_t* act) {
  const int64_t stride = act_row_bytes_ymm(K);
  if (bits == 4) {
    return q4_quantize_chunks<IntTraits, 2>(A, lda, m0, m1, K, act, stride, [](const int8_t* lo, int32_t* corr) {
      // 8 * (sum of 4 codes) per int32 lane of each half, as vpmaddubsw (8 unsigned) + vpmaddwd.
      const __m256i eight = _mm256_set1_epi8(8), one = _mm256_set1_epi16(1);
      const auto half = [&](const int8_t* p) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(eight, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), one);
      };
      const __m256i s = _mm256_add_epi32(half(lo), half(lo + 32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr), _mm256_sub_epi32(_mm256_setzero_si256(), s));
    });
  }
  quantize_act_strided<IntTraits>(bits, A, lda, m0, m1, K, act, stride);  // q8_0
}

inline void dot_rows_ymm(int bits, const uint8_t* act, int64_t M, int64_t K, const uint8_t* q, const float* scales,
                         const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t stride = act_row_bytes_ymm(K);
  if (bits == 4) return q4y_dot_rows(act, stride, M, K, q, scales, bias, C, ldc, n0, n1);
  idot_rows_at<IntTraits>(bits, act, stride, M, K, q, scales, bias, C, ldc, n0, n1);  // q8_0
}

inline IntQuantKernels make_ymm_int_kernels() {
  IntQuantKernels k = make_int_kernels<IntTraits>();
  k.act_row_bytes = act_row_bytes_ymm;
  k.quantize_act = quantize_act_ymm;
  k.dot_rows = dot_rows_ymm;
  return k;
}

}  // namespace
}  // namespace tsorch
