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
// K <= 1024, q4_rows_resident: the offset correction added per block in float32 instead, results
// within float32 rounding of these).
//
// Activation rows: quant_q4_act.h's layout with 4 blocks per chunk (128 values; q4_row_bytes(K)
// bytes or more per row).
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
inline int64_t q4_row_bytes(int64_t K) { return 2 * q4_kp(K); }

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

// One activation row with its codes held in registers (below): the blocks' terms of that row.
// Per block b: d_a(b), and d_a(b) times the block's offset correction (the sum of its 4 corr
// lanes, -8 times the sum of its codes), zero from nb up to a multiple of 32 blocks.
inline void q4_block_terms(const uint8_t* act, int64_t Kp, int64_t nb, float* da, float* cf) {
  const int32_t* corr = reinterpret_cast<const int32_t*>(act + Kp);
  const float* dl = reinterpret_cast<const float*>(act + Kp + Kp / 2);
  int64_t b = 0;
  for (; b < nb; ++b) {
    const int32_t* lanes = corr + 4 * b;  // chunk b / 4's lanes 4 (b % 4) ..
    da[b] = dl[4 * b];
    cf[b] = da[b] * static_cast<float>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
  }
  for (; b % 32; ++b) da[b] = cf[b] = 0.f;
}

// CH (<= 8) chunks of one row of W (codes qr, scales sr: 4 CH blocks) against the activation
// codes a[2 CH] (lo, hi of each chunk, in registers) with the blocks' terms da / cf: the chunks'
// int32 lane sums without the offset correction, each scaled by its block's d_w * d_a, into acc0
// and acc1, and the correction once per block as d_w * cf.
template <int CH>
inline __attribute__((always_inline)) void q4_segment(const uint8_t* qr, const float* sr, const __m512i* a,
                                                      const float* da, const float* cf, __m512& acc0,
                                                      __m512& acc1) {
  constexpr int NB = 4 * CH;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i idx0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i four = _mm512_set1_epi32(4);
  const __m512i idx[4] = {idx0, _mm512_add_epi32(idx0, four), _mm512_add_epi32(idx0, _mm512_add_epi32(four, four)),
                          _mm512_add_epi32(idx0, _mm512_set1_epi32(12))};
  const __m512 w0 = NB >= 16 ? _mm512_loadu_ps(sr) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << NB) - 1), sr);
  const __m512 w1 = NB > 16 ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(NB >= 32 ? 0xFFFFu : (1u << (NB - 16)) - 1), sr + 16)
                            : _mm512_setzero_ps();
  const __m512 wd0 = _mm512_mul_ps(w0, _mm512_loadu_ps(da));
  const __m512 wd1 = _mm512_mul_ps(w1, _mm512_loadu_ps(da + 16));
  acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(cf), acc0);
  if (NB > 16) acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(cf + 16), acc1);
  _Pragma("GCC unroll 8")
  for (int c = 0; c < CH; ++c) {
    __m512i line = _mm512_loadu_si512(qr + c * 64);
    asm("" : "+v"(line));  // one load, two extractions (see q4_step)
    const __m512i lo = _mm512_and_si512(line, nib);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(line, 4), nib);
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, a[2 * c]), hi, a[2 * c + 1]);
    const __m512 ws = _mm512_permutexvar_ps(idx[c % 4], c < 4 ? wd0 : wd1);
    if (c & 1) acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), ws, acc1);
    else acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), ws, acc0);
  }
}

// One activation row against rows [n0, n1) of W, K = 128 CH <= 1024: the activation codes, loaded
// once, stay in 2 CH registers for every row, so each 64-byte line of W costs one load (and a
// row's scales two), where q4_rows loads four activation vectors per line besides (a loop that
// loads more per line streams from DRAM more slowly, even with the loads hitting L1). Measured on
// AMD EPYC Zen 5, 2 threads, W from DRAM, the two kernels alternating in one process: 3072 x 1024
// GEMVs read at 0.64-0.80 of a plain read of the same bytes with q4_rows, 0.86-0.98 with this (a
// C++ loop over 128 weights); through linearQuantized, 6144 x 1024 and 151936 x 1024 took 0.93 and
// 0.88 of q4_rows' time, and the Qwen3-0.6B-shaped model's decode step 0.94-0.97 (its replayed
// kernel calls; gate/up 0.91-0.95, LM head 0.89-0.94) while the VM read 50-60 GB/s, 1.00 in a
// spell when it read 75. Software prefetch ahead made it slower (0.71-0.80 against 0.85-0.91).
// K > 1024 keeps q4_rows: loading each 1024-value segment's codes per row (two loads a line), or
// taking a segment for 16 rows at a time, measured no faster at K = 2048 and 3072.
template <int CH>
void q4_rows_resident(const uint8_t* act, const float* da, const float* cf, const uint8_t* q,
                      const float* scales, const float* bias, float* C, int64_t n0, int64_t n1) {
  __m512i a[2 * CH];
  _Pragma("GCC unroll 16")
  for (int i = 0; i < 2 * CH; ++i) a[i] = _mm512_loadu_si512(act + i * 64);
  for (int64_t n = n0; n < n1; ++n) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    q4_segment<CH>(q + n * CH * 64, scales + n * CH * 4, a, da, cf, acc0, acc1);
    C[n] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + (bias ? bias[n] : 0.f);
  }
}

// One activation row, K = 128 CH <= 1024: q4_rows_resident.
inline void q4_dot_row_resident(const uint8_t* act, int64_t K, const uint8_t* q, const float* scales,
                                const float* bias, float* C, int64_t n0, int64_t n1) {
  alignas(64) float da[32], cf[32];
  q4_block_terms(act, q4_kp(K), K / 32, da, cf);
  switch (K / 128) {
#define TSORCH_Q4_RESIDENT(CH) \
  case CH: return q4_rows_resident<CH>(act, da, cf, q, scales, bias, C, n0, n1);
    TSORCH_Q4_RESIDENT(1) TSORCH_Q4_RESIDENT(2) TSORCH_Q4_RESIDENT(3) TSORCH_Q4_RESIDENT(4)
    TSORCH_Q4_RESIDENT(5) TSORCH_Q4_RESIDENT(6) TSORCH_Q4_RESIDENT(7) TSORCH_Q4_RESIDENT(8)
#undef TSORCH_Q4_RESIDENT
  }
}

// Activation rows [0, M) (row m at m * stride; decode sizes, the GEMM of quant_gemm_vnni.h takes
// more) against rows [n0, n1) of the q4_0 weight: C[m * ldc + n] = sum_k a(m, k) * W(n, k) (+ bias[n]).
// One row of up to 8 whole chunks (K = 128, 256, .., 1024) takes q4_dot_row_resident, else q4_rows.
inline void q4_dot_rows(const uint8_t* act, int64_t stride, int64_t M, int64_t K, const uint8_t* q,
                        const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                        int64_t n1) {
  if (M == 1 && K % 128 == 0 && K <= 1024) return q4_dot_row_resident(act, K, q, scales, bias, C, n0, n1);
  q4_by_row_triples(M, [&](auto rows, int64_t m) {
    q4_rows<decltype(rows)::value, 2>(act + m * stride, stride, K, q, scales, bias, C + m * ldc, ldc, n0, n1);
  });
}

}  // namespace
}  // namespace tsorch
