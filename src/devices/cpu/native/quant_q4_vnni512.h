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
// products, each lane scaled by d_w * d_a in float32, then summed in float32.
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

// Activation rows [0, M) (row m at m * stride; decode sizes, the GEMM of quant_gemm_vnni.h takes
// more) against rows [n0, n1) of the q4_0 weight: C[m * ldc + n] = sum_k a(m, k) * W(n, k) (+ bias[n]).
inline void q4_dot_rows(const uint8_t* act, int64_t stride, int64_t M, int64_t K, const uint8_t* q,
                        const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                        int64_t n1) {
  q4_by_row_triples(M, [&](auto rows, int64_t m) {
    q4_rows<decltype(rows)::value, 2>(act + m * stride, stride, K, q, scales, bias, C + m * ldc, ldc, n0, n1);
  });
}

}  // namespace
}  // namespace tsorch
