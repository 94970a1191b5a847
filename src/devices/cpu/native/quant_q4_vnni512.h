// The q4_0 x int8 dot products for 1-3 activation rows (decode) with AVX512-VNNI, four blocks of W
// (128 values, one 64-byte line of nibbles) per step instead of two:
//   lo = line & 0x0F  -> elements 0..15 of blocks 0, 1, 2, 3 (16 bytes each)
//   hi = line >> 4    -> elements 16..31 of the same blocks
// so that in both vectors the 4 int32 lanes of 16-byte segment s belong to block s. Both go through
// vpdpbusd into ONE int32 accumulator (started at the activations' offset correction), which then
// takes one conversion and one FMA with the lanes' d_w * d_a: 3 unpack + 2 vpdpbusd + 1 cvt +
// 1 permute + 1 mul + 1 FMA per 128 weights and row, where the 64-value step of quant_int_impl.h
// spends 14 (two 32-byte broadcasts and shifts, two scale spreads, two conversions, ...). The same
// integer products as llama.cpp's ggml_vec_dot_q4_0_q8_0, summed exactly in int32 lanes of 8
// products, each lane scaled by d_w * d_a in float32, then summed in float32 (one activation row of
// K = 128, 256, .., 1024, q4_rows_resident: each block's exact int32 sum scaled instead).
//
// Activation rows: quant_q4_act.h's layout with 4 blocks per chunk (128 values), then (where
// q4_resident(K)) the row's block terms (q4_row_terms); q4_row_bytes(K) bytes or more per row.
//
// Internal linkage (see gemm_impl.h). Include after quant_int_impl.h, with IntAvx512Vnni
// (quant_int_traits.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "prefetch.h"
#include "quant_kernels.h"
#include "quant_q4_act.h"

namespace tsorch {
namespace {

inline int64_t q4_kp(int64_t K) { return q4_chunk_kp<4>(K); }
// Bytes after a row's quant_q4_act.h layout (2 Kp) that hold q4_rows_resident's block terms.
constexpr int64_t kQ4TermsBytes = 32 * 4 + 32 * 4;
inline int64_t q4_row_bytes(int64_t K) { return 2 * q4_kp(K) + kQ4TermsBytes; }
// Whether one activation row of K values takes q4_rows_resident (K = 128, 256, .., 1024).
inline bool q4_resident(int64_t K) { return K > 0 && K % 128 == 0 && K <= 1024; }

// One 128-value step (chunk c) of MM activation rows against one row of W (codes qr, scales sr;
// TAIL: only the row's last 1-3 blocks, `tail` of them, are read, with masked loads).
template <int MM, bool TAIL>
inline __attribute__((always_inline)) void q4_step(const uint8_t* act, int64_t stride, int64_t Kp,
                                                   const uint8_t* qr, const float* sr, int64_t c,
                                                   int tail, __m512 (&acc)[MM]) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512i line = TAIL ? _mm512_maskz_loadu_epi8((1ull << (16 * tail)) - 1, qr + c * 64)
                      : _mm512_loadu_si512(qr + c * 64);
  // Both nibble extractions read `line`, and GCC folded the load into each of them: two loads of
  // the 64-byte line per step, on a loop short of load ports (6 other loads per step and row). The
  // empty asm keeps it in one register: int4 decode GEMVs took 9-15% less time (a Qwen3-0.6B-shaped
  // model's GEMV calls replayed alternately with the two builds in one process, AMD EPYC Zen 5,
  // 2 threads).
  asm("" : "+v"(line));
  const __m512i lo = _mm512_and_si512(line, nib);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(line, 4), nib);
  const __m128 s4 = TAIL ? _mm_maskz_loadu_ps(static_cast<__mmask8>((1u << tail) - 1), sr + c * 4)
                         : _mm_loadu_ps(sr + c * 4);
  const __m512 ws = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(s4));
  _Pragma("GCC unroll 4")
  for (int m = 0; m < MM; ++m) {
    const uint8_t* a = act + m * stride;
    const __m512i alo = _mm512_loadu_si512(a + c * 128), ahi = _mm512_loadu_si512(a + c * 128 + 64);
    const __m512i corr = _mm512_loadu_si512(a + Kp + c * 64);
    const __m512 da = _mm512_loadu_ps(reinterpret_cast<const float*>(a + Kp + Kp / 2) + c * 16);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr, lo, alo), hi, ahi);
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, da), acc[m]);
  }
}

// MM activation rows against rows [n0, n1) of W: C[m * ldc + n]. One row of W at a time, its
// steps spread over U accumulators per activation row (independent FMA chains). Rows of W are
// contiguous, so the codes and the scales are read as two linear streams, each also prefetched
// kDecodePrefetchBytes ahead (prefetch.h); tiles of R interleaved rows (R + R streams) left it
// well short of the bandwidth. Measured on Zen 5 with W from DRAM (1024 x 3072, one thread, the
// same process, before the software prefetch): M = 1 19-22 -> 24-26 GB/s (a streaming read of the
// same bytes: 29-39), M = 2 16 -> 20, M = 3 15 -> 17. Four rows of W sharing each step's
// activation loads ran 10-20% faster in a kernel benchmark but not in a model's decode, so not kept.
template <int MM, int U>
void q4_rows(const uint8_t* act, int64_t stride, int64_t K, const uint8_t* q, const float* scales,
             const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t nb = K / 32, row = K / 2, Kp = q4_kp(K), full = nb / 4;
  const int tail = static_cast<int>(nb % 4);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* qr = q + n * row;
    const float* sr = scales + n * nb;
    __m512 acc[U][MM];
    _Pragma("GCC unroll 8")
    for (int u = 0; u < U; ++u)
      _Pragma("GCC unroll 4")
      for (int m = 0; m < MM; ++m) acc[u][m] = _mm512_setzero_ps();
    // The scales run at a quarter of the codes' pace: as far ahead of them in the weight.
    for (int64_t l = 0; l < nb * 4; l += 64) prefetch_ahead(sr, kDecodePrefetchBytes / 4 + l);
    int64_t c = 0;
    for (; c + U <= full; c += U)
      _Pragma("GCC unroll 8")
      for (int u = 0; u < U; ++u) {
        prefetch_ahead(qr + (c + u) * 64, kDecodePrefetchBytes);
        q4_step<MM, false>(act, stride, Kp, qr, sr, c + u, 0, acc[u]);
      }
    for (; c < full; ++c) q4_step<MM, false>(act, stride, Kp, qr, sr, c, 0, acc[c % U]);
    if (tail) q4_step<MM, true>(act, stride, Kp, qr, sr, full, tail, acc[U - 1]);
    _Pragma("GCC unroll 4")
    for (int m = 0; m < MM; ++m) {
      __m512 sum = acc[0][m];
      _Pragma("GCC unroll 8")
      for (int u = 1; u < U; ++u) sum = _mm512_add_ps(sum, acc[u][m]);
      C[m * ldc + n] = _mm512_reduce_add_ps(sum) + (bias ? bias[n] : 0.f);
    }
  }
}

// The lanes of 4 chunks' int32 sums s0..s3 (lane 4 j + l of s_i: chunk i's block j) reduced to
// one sum per block, block j of chunk i in lane 4 j + i: a 4 x 4 transpose within each 128-bit
// lane, added as it goes.
inline __m512i q4_block_sums(__m512i s0, __m512i s1, __m512i s2, __m512i s3) {
  const __m512i p0 = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
  const __m512i p1 = _mm512_add_epi32(_mm512_unpacklo_epi32(s2, s3), _mm512_unpackhi_epi32(s2, s3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(p0, p1), _mm512_unpackhi_epi64(p0, p1));
}

// One activation row's terms in q4_block_sums' order: for group g of 4 chunks (16 blocks), lane
// 4 j + i of corr[16 g ..] / da[16 g ..] holds block b = 16 g + 4 i + j's offset correction (the
// sum of its 4 corr lanes, -8 times the sum of its codes) and d_a; zero from nb up to 32 blocks.
// Written once per row when it is quantized (q4_row_terms), at 2 Kp: corr int32 [32], da float [32].
inline void q4_row_terms(uint8_t* row, int64_t K) {
  if (!q4_resident(K)) return;
  const int64_t Kp = q4_kp(K), nb = K / 32;
  const int32_t* lanes = reinterpret_cast<const int32_t*>(row + Kp);
  const float* dl = reinterpret_cast<const float*>(row + Kp + Kp / 2);
  int32_t* corr = reinterpret_cast<int32_t*>(row + 2 * Kp);
  float* da = reinterpret_cast<float*>(row + 2 * Kp + 32 * 4);
  for (int64_t p = 0; p < 32; ++p) {
    const int64_t b = p / 16 * 16 + p % 4 * 4 + p % 16 / 4;
    corr[p] = b < nb ? lanes[4 * b] + lanes[4 * b + 1] + lanes[4 * b + 2] + lanes[4 * b + 3] : 0;
    da[p] = b < nb ? dl[4 * b] : 0.f;
  }
}

// One activation row against rows [n0, n1) of W, K = 128 CH <= 1024: the activation codes, loaded
// once, stay in 2 CH registers for every row, so each 64-byte line of W costs one load (and each
// 16 blocks' scales, corrections and d_a one each), where q4_rows loads four activation vectors per
// line besides (a loop that loads more per line streams from DRAM more slowly, even with the
// loads hitting L1). Each 4 chunks' lane sums are reduced to block sums (q4_block_sums), the
// offset correction added, so that each block's exact int32 product is converted and scaled by
// d_w * d_a once, as in q4_rows (where each lane of 8 products is). Measured on AMD EPYC Zen 5,
// 2 threads, W from DRAM, the kernels alternating in one process, with this kernel's first version
// (each line's lanes scaled as q4_step does, the correction added per block in float32; this one
// measured the same: 0.85-0.96 of a plain read, through linearQuantized 1.00-1.02 of its time):
// 3072 x 1024 GEMVs read at 0.64-0.80 of a plain read of the same bytes with q4_rows, 0.86-0.98
// with it; through linearQuantized, 6144 x 1024 and 151936 x 1024 took 0.93 and 0.88 of q4_rows'
// time, and the Qwen3-0.6B-shaped model's decode step 0.94-0.97 (its replayed kernel calls;
// gate/up 0.91-0.95, LM head 0.89-0.94) while the VM read 50-60 GB/s, 1.00 in a spell when it
// read 75. K > 1024 keeps q4_rows: loading each 1024-value segment's codes per row (two loads a
// line), or taking a segment for 16 rows at a time, measured no faster at K = 2048 and 3072.
// Its weight is prefetched as the other decode kernels' is (prefetch.h). Session 14 measured that
// slower (before the prefetch was non-temporal); session 16, same host kind, alternating in one
// process: a 295 MB weight in one call 55.4 -> 65.8 GB/s, in calls of 1, 2 and 4 MB 36.6 -> 42.6,
// 46.5 -> 49.3 and 50.0 -> 54.8 (medians of 12-24); compiled int4 decode of the Qwen3-0.6B-shaped
// model 110.7 -> 116.7 and 108.9 -> 113.8 tok/s, eager 99.8 -> 111.9 (medians of 14, 10 and 10
// generations; one run of 10 108.5 -> 108.7, in a spell where no variant differed), none slower;
// distances 2 and 8 KB and prefetcht0 no better.
template <int CH>
void q4_rows_resident(const uint8_t* act, const int32_t* corr, const float* da, const uint8_t* q,
                      const float* scales, const float* bias, float* C, int64_t n0, int64_t n1) {
  constexpr int NB = 4 * CH, G = (CH + 3) / 4;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  // Lane 4 j + i <- scale 4 i + j (q4_block_sums' order).
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  __m512i a[2 * CH];
  _Pragma("GCC unroll 16")
  for (int i = 0; i < 2 * CH; ++i) a[i] = _mm512_loadu_si512(act + i * 64);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* qr = q + n * CH * 64;
    const float* sr = scales + n * NB;
    // Both streams through prefetch_ahead (prefetch.h; the scales, a quarter of the codes' bytes, as
    // far ahead in the weight), called on every line of the row's codes and its scale lines.
    _Pragma("GCC unroll 8")
    for (int c = 0; c < CH; ++c) prefetch_ahead(qr + c * 64, kDecodePrefetchBytes);
    _Pragma("GCC unroll 2")
    for (int l = 0; l < NB * 4; l += 64) prefetch_ahead(sr, kDecodePrefetchBytes / 4 + l);
    __m512 part[G];
    _Pragma("GCC unroll 2")
    for (int g = 0; g < G; ++g) {
      __m512i s[4];
      _Pragma("GCC unroll 4")
      for (int i = 0; i < 4; ++i) {
        const int c = 4 * g + i;
        if (c >= CH) {
          s[i] = _mm512_setzero_si512();
          continue;
        }
        __m512i line = _mm512_loadu_si512(qr + c * 64);
        asm("" : "+v"(line));  // one load, two extractions (see q4_step)
        const __m512i lo = _mm512_and_si512(line, nib);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(line, 4), nib);
        s[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, a[2 * c]), hi, a[2 * c + 1]);
      }
      const __m512i r = _mm512_add_epi32(q4_block_sums(s[0], s[1], s[2], s[3]), _mm512_loadu_si512(corr + 16 * g));
      const int nbg = NB - 16 * g < 16 ? NB - 16 * g : 16;
      const __m512 w = nbg == 16 ? _mm512_loadu_ps(sr + 16 * g)
                                 : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << nbg) - 1), sr + 16 * g);
      const __m512 f = _mm512_mul_ps(_mm512_permutexvar_ps(order, w), _mm512_loadu_ps(da + 16 * g));
      part[g] = _mm512_mul_ps(_mm512_cvtepi32_ps(r), f);
    }
    const __m512 sum = G == 2 ? _mm512_add_ps(part[0], part[G - 1]) : part[0];
    C[n] = _mm512_reduce_add_ps(sum) + (bias ? bias[n] : 0.f);
  }
}

// One activation row, K = 128 CH <= 1024 (its terms written by q4_row_terms): q4_rows_resident.
inline void q4_dot_row_resident(const uint8_t* act, int64_t K, const uint8_t* q, const float* scales,
                                const float* bias, float* C, int64_t n0, int64_t n1) {
  const int32_t* corr = reinterpret_cast<const int32_t*>(act + 2 * q4_kp(K));
  const float* da = reinterpret_cast<const float*>(act + 2 * q4_kp(K) + 32 * 4);
  switch (K / 128) {
#define TSORCH_Q4_RESIDENT(CH) \
  case CH: return q4_rows_resident<CH>(act, corr, da, q, scales, bias, C, n0, n1);
    TSORCH_Q4_RESIDENT(1) TSORCH_Q4_RESIDENT(2) TSORCH_Q4_RESIDENT(3) TSORCH_Q4_RESIDENT(4)
    TSORCH_Q4_RESIDENT(5) TSORCH_Q4_RESIDENT(6) TSORCH_Q4_RESIDENT(7) TSORCH_Q4_RESIDENT(8)
#undef TSORCH_Q4_RESIDENT
  }
}

// Activation rows [0, M) (row m at m * stride, each with its q4_row_terms; decode sizes, the GEMM of
// quant_gemm_vnni.h takes more) against rows [n0, n1) of the q4_0 weight: C[m * ldc + n] = sum_k a(m, k) * W(n, k) (+ bias[n]).
// One row of up to 8 whole chunks (K = 128, 256, .., 1024) takes q4_dot_row_resident, else q4_rows.
inline void q4_dot_rows(const uint8_t* act, int64_t stride, int64_t M, int64_t K, const uint8_t* q,
                        const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                        int64_t n1) {
  if (M == 1 && q4_resident(K)) return q4_dot_row_resident(act, K, q, scales, bias, C, n0, n1);
  q4_by_row_triples(M, [&](auto rows, int64_t m) {
    q4_rows<decltype(rows)::value, 2>(act + m * stride, stride, K, q, scales, bias, C + m * ldc, ldc, n0, n1);
  });
}

}  // namespace
}  // namespace tsorch
