// The AVX512-VNNI GEMM of block-quantized weights (q8_0 / q4_0, quant_kernels.h) for several
// activation rows (prefill, batched decode): C[m, n] = sum_g d_w(n, g) * d_a(m, g) *
// sum_j w_code * a_code (+ bias[n]), the inner sums exact in int32, as quant_int_impl.h computes
// them (same activation codes and scales), but with the output rows in the vector lanes:
//
// W is taken 16 rows (a panel) at a time and repacked into scratch as llama.cpp's repacked
// q8_0 / q4_0 layouts and oneDNN's VNNI layouts do: for block g and k-quad j (j < 8), one 64-byte
// vector holds bytes 4j..4j+3 of block g of each of the 16 rows, as unsigned codes (q8: code + 128,
// q4: the nibble = code + 8). One vpdpbusd against the activation's 4 bytes (broadcast) then adds
// 64 products into 16 row sums; 8 of them finish a block, which is scaled once for 16 rows
// (cvt, mul, fma). The offset times the activation block's code sum is the int32 start value.
// The repack (a 16 x 16 dword transpose per two blocks) reads each weight byte once per call and is
// reused by every activation row.
//
// Activation row layout (gemm_act_row_bytes(K)): int8 codes [K] in natural order, int32 start
// value per block [K / 32] (-offset * sum of the block's codes), float d per block [K / 32].
//
// Included only by quant_avx512vnni.cc (compiled with AVX512-F/BW/VL/VNNI). Internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant_int_impl.h"

namespace tsorch {
namespace {

constexpr int kPanel = 16;  // W rows per panel (the zmm lanes)

inline int64_t gemm_act_row_bytes(int64_t K) { return K + 8 * (K / 32); }

inline int32_t load32(const uint8_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}
inline float loadf(const uint8_t* p) {
  float x;
  std::memcpy(&x, p, 4);
  return x;
}

// Scratch bytes of one repacked panel of K columns: codes, then float scales [K / 32][16].
inline int64_t gemm_panel_bytes(int64_t K) { return kPanel * K + kPanel * 4 * (K / 32); }

// Rows m0 <= m < m1 of A [M, K] -> the GEMM activation layout (codes as quantize_act_block makes
// them, so that the result equals the row-at-a-time path's).
void gemm_quantize_act(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K,
                       uint8_t* act) {
  const int64_t nb = K / 32, rb = gemm_act_row_bytes(K);
  const int32_t off = bits == 8 ? 128 : 8;
  for (int64_t m = m0; m < m1; ++m) {
    uint8_t* row = act + m * rb;
    for (int64_t g = 0; g < nb; ++g) {
      float d;
      quantize_act_block<IntTraits>(A + m * lda + g * 32, reinterpret_cast<int8_t*>(row + g * 32), &d);
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + g * 32));
      const __m512i s = _mm512_cvtepi8_epi16(c);
      const int32_t start = -off * _mm512_reduce_add_epi32(_mm512_madd_epi16(s, _mm512_set1_epi16(1)));
      std::memcpy(row + K + 4 * g, &start, 4);
      std::memcpy(row + K + 4 * nb + 4 * g, &d, 4);
    }
  }
}

// In-register transpose of 16 vectors of 16 dwords: v[r] dword c -> v[c] dword r.
inline void transpose16(__m512i v[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // v[4a + b]: 128-bit lane L holds dwords 4L..4L+3 of rows 4a..4a+3... of column quads; gather the
  // lanes so that vector c = 4 * lane + b holds column c of all 16 rows.
  for (int b = 0; b < 4; ++b) {
    const __m512i x0 = _mm512_shuffle_i32x4(v[b], v[4 + b], 0x88), x1 = _mm512_shuffle_i32x4(v[b], v[4 + b], 0xDD);
    const __m512i x2 = _mm512_shuffle_i32x4(v[8 + b], v[12 + b], 0x88), x3 = _mm512_shuffle_i32x4(v[8 + b], v[12 + b], 0xDD);
    t[b] = _mm512_shuffle_i32x4(x0, x2, 0x88);
    t[8 + b] = _mm512_shuffle_i32x4(x0, x2, 0xDD);
    t[4 + b] = _mm512_shuffle_i32x4(x1, x3, 0x88);
    t[12 + b] = _mm512_shuffle_i32x4(x1, x3, 0xDD);
  }
  for (int i = 0; i < 16; ++i) v[i] = t[i];
}

// 64 unsigned codes (two blocks, natural order) of row n from `blocks` blocks (1 or 2) at block g.
template <int BITS>
inline __m512i panel_row(const uint8_t* q, int64_t row, int64_t n, int64_t g, int blocks) {
  if (BITS == 8) {
    const uint8_t* p = q + n * row + g * 32;
    const __m512i v = blocks == 2 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, p);
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  const uint8_t* p = q + n * row + g * 16;
  const __m256i b = blocks == 2 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi8(0xFFFFu, p);
  // [b0, b0, b1, b1] -> [b0 & 15, b0 >> 4, b1 & 15, b1 >> 4]: elements 0..15, 16..31 of each block.
  const __m512i z = _mm512_shuffle_i64x2(_mm512_castsi256_si512(b), _mm512_castsi256_si512(b), 0x50);
  const __m512i sh = _mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_and_si512(sh, _mm512_set1_epi8(0x0F));
}

// Rows [n, n + rows) (rows <= 16; missing rows repacked as zero scales) of W -> panel.
template <int BITS>
void repack_panel(const uint8_t* q, const float* scales, int64_t K, int64_t n, int rows, uint8_t* panel) {
  const int64_t nb = K / 32, row = quant_row_bytes(BITS, K);
  __m512i* pv = reinterpret_cast<__m512i*>(panel);
  for (int64_t g = 0; g < nb; g += 2) {
    const int blocks = g + 1 < nb ? 2 : 1;
    __m512i v[16];
    for (int r = 0; r < kPanel; ++r) v[r] = panel_row<BITS>(q, row, n + (r < rows ? r : 0), g, blocks);
    transpose16(v);
    for (int c = 0; c < 8 * blocks; ++c) _mm512_store_si512(pv + g * 8 + c, v[c]);
  }
  float* ws = reinterpret_cast<float*>(panel + kPanel * K);
  for (int64_t g = 0; g < nb; ++g)
    for (int r = 0; r < kPanel; ++r) ws[g * kPanel + r] = r < rows ? scales[(n + r) * nb + g] : 0.f;
}

// MR activation rows from m against a repacked panel: out[i * ldc + r] for r < rows.
template <int MR>
void gemm_tile(const uint8_t* act, int64_t rb, int64_t K, const uint8_t* panel, const float* bias,
               float* C, int64_t ldc, int rows) {
  const int64_t nb = K / 32;
  const __m512i* pv = reinterpret_cast<const __m512i*>(panel);
  const float* ws = reinterpret_cast<const float*>(panel + kPanel * K);
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < nb; ++g) {
    __m512i s[MR];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < MR; ++i) s[i] = _mm512_set1_epi32(load32(act + i * rb + K + 4 * g));
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 8; ++j) {
      const __m512i w = _mm512_load_si512(pv + g * 8 + j);
      _Pragma("GCC unroll 8")
      for (int i = 0; i < MR; ++i)
        s[i] = _mm512_dpbusd_epi32(s[i], w, _mm512_set1_epi32(load32(act + i * rb + g * 32 + 4 * j)));
    }
    const __m512 wsv = _mm512_load_ps(ws + g * kPanel);
    _Pragma("GCC unroll 8")
    for (int i = 0; i < MR; ++i) {
      const float da = loadf(act + i * rb + K + 4 * nb + 4 * g);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]), _mm512_mul_ps(wsv, _mm512_set1_ps(da)), acc[i]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(C + i * ldc, mask, _mm512_add_ps(acc[i], b));
}

// Rows [0, M) of GEMM activations against rows [n0, n1) of W, a panel of 16 at a time, repacked
// into `panel` (gemm_panel_bytes(K), 64-byte aligned). Single-threaded.
template <int BITS>
void gemm_rows_b(const uint8_t* act, int64_t M, int64_t K, const uint8_t* q, const float* scales,
                 const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1, uint8_t* panel) {
  constexpr int MR = 8;
  const int64_t rb = gemm_act_row_bytes(K);
  for (int64_t n = n0; n < n1; n += kPanel) {
    const int rows = static_cast<int>(n1 - n < kPanel ? n1 - n : kPanel);
    repack_panel<BITS>(q, scales, K, n, rows, panel);
    const float* b = bias ? bias + n : nullptr;
    int64_t m = 0;
    for (; m + MR <= M; m += MR) gemm_tile<MR>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows);
    switch (M - m) {
      case 1: gemm_tile<1>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      case 2: gemm_tile<2>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      case 3: gemm_tile<3>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      case 4: gemm_tile<4>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      case 5: gemm_tile<5>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      case 6: gemm_tile<6>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      case 7: gemm_tile<7>(act + m * rb, rb, K, panel, b, C + m * ldc + n, ldc, rows); break;
      default: break;
    }
  }
}

void gemm_rows(int bits, const uint8_t* act, int64_t M, int64_t K, const uint8_t* q,
               const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
               int64_t n1, uint8_t* panel) {
  if (bits == 8) gemm_rows_b<8>(act, M, K, q, scales, bias, C, ldc, n0, n1, panel);
  else gemm_rows_b<4>(act, M, K, q, scales, bias, C, ldc, n0, n1, panel);
}

}  // namespace
}  // namespace tsorch
