// Integer dot products of block-quantized weights (q8_0 / q4_0, quant_kernels.h) with int8
// activations, as llama.cpp's ggml_vec_dot_q8_0_q8_0 / q4_0_q8_0: each row of A is quantized to
// blocks of 32 (d = max|x| / 127, codes = x / d rounded to nearest, ties to even), and
//   C[m, n] = sum over blocks g of d_w(n, g) * d_a(m, g) * sum_j w_code * a_code   (+ bias[n])
// with the inner sum exact in int32. Written once against an integer-vector traits class IV:
//   IntAvx512Vnni  64 bytes (2 blocks) per vector, vpdpbusd zmm    (quant_avx512vnni.cc)
//   IntAvxVnni     32 bytes (1 block),               vpdpbusd ymm    (quant_avxvnni.cc)
//   IntAvx2        32 bytes, vpmaddubsw + vpmaddwd (sign trick)     (quant_avx2.cc)
//   IntPortable    32 bytes, scalar                                 (quant_portable.cc)
// (q4_0 weights on the first three take their own kernels: quant_q4_vnni512.h, quant_q4_ymm.h.)
// vpdpbusd multiplies unsigned by signed bytes: weights enter as unsigned (q8: code + 128,
// q4: the stored nibble = code + 8) and the offset times the activations' sum is subtracted through
// the accumulator's start value (corr, computed once per activation row).
//
// Activation row layout (act_row_bytes(Kp), Kp = K rounded up to IV::B): int8 codes [Kp] (in the
// order the weight vectors decode to, zero padded), int32 corr [Kp / 4], float scale per int32 lane
// [Kp / 4] (the activation block's d repeated).
//
// Internal linkage and no standard-library templates (see gemm_impl.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "prefetch.h"
#include "quant_kernels.h"

namespace tsorch {
namespace {

inline int64_t act_row_bytes_of(int64_t Kp) { return 3 * Kp; }

// Quantize one block of 32 floats to int8 codes (ties to even, as the vector conversions round).
template <class IV>
void quantize_act_block(const float* x, int8_t* q, float* d) {
  const float amax = IV::absmax32(x);
  *d = amax / 127.f;
  const float id = amax != 0.f ? 127.f / amax : 0.f;
  IV::round_codes(x, id, q);
}

// Rows [0, M) of A [M, K] (lda) -> the activation layout of IV at act (row stride 3 * Kp).
template <class IV>
void quantize_act_rows(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K,
                       uint8_t* act) {
  const int64_t Kp = (K + IV::B - 1) / IV::B * IV::B;
  for (int64_t m = m0; m < m1; ++m) {
    uint8_t* row = act + m * act_row_bytes_of(Kp);
    int8_t* codes = reinterpret_cast<int8_t*>(row);
    int32_t* corr = reinterpret_cast<int32_t*>(row + Kp);
    float* dl = reinterpret_cast<float*>(row + 2 * Kp);
    for (int64_t c = 0; c < Kp; c += IV::B) {
      int8_t nat[IV::B];
      float d[IV::B / 32];
      for (int b = 0; b < IV::B / 32; ++b) {
        const int64_t k = c + b * 32;
        if (k < K) {
          quantize_act_block<IV>(A + m * lda + k, nat + b * 32, d + b);
        } else {
          for (int i = 0; i < 32; ++i) nat[b * 32 + i] = 0;
          d[b] = 0.f;
        }
      }
      // Place the 16-byte segments where the weight decode puts them; lane scales follow.
      for (int s = 0; s < IV::B / 16; ++s) {
        const int src = IV::segment(bits, s);
        std::memcpy(codes + c + s * 16, nat + src, 16);
        for (int l = 0; l < 4; ++l) dl[(c + s * 16) / 4 + l] = d[src / 32];
      }
    }
    IV::corr(bits, codes, corr, Kp);
  }
}

// One vector step of a tile: all B / 32 blocks (TAIL false) or only the first (the row's last,
// odd block on 64-byte vectors).
template <class IV, int MM, int R, bool TAIL>
inline __attribute__((always_inline)) void idot_step(int bits, const uint8_t* act, int64_t stride,
                                                     int64_t Kp, const uint8_t* const* qr,
                                                     const float* const* sr, int64_t v,
                                                     typename IV::vf (&acc)[MM][R]) {
  using vb = typename IV::vb;
  using vf = typename IV::vf;
  constexpr int BPV = IV::B / 32;
  const int64_t vbytes = bits == 8 ? IV::B : IV::B / 2;  // weight bytes per vector
  vb w[R];
  vf ws[R];
  _Pragma("GCC unroll 16")
  for (int r = 0; r < R; ++r) {
    w[r] = TAIL ? IV::wload_tail(bits, qr[r] + v * vbytes) : IV::wload(bits, qr[r] + v * vbytes);
    ws[r] = TAIL ? IV::wscale_tail(bits, sr[r] + v * BPV) : IV::wscale(bits, sr[r] + v * BPV);
  }
  _Pragma("GCC unroll 16")
  for (int m = 0; m < MM; ++m) {
    const uint8_t* a = act + m * stride;
    const vb av = IV::aload(a + v * IV::B);
    const int32_t* cp = reinterpret_cast<const int32_t*>(a + Kp) + v * IV::B / 4;
    const vf dv = IV::fload(reinterpret_cast<const float*>(a + 2 * Kp) + v * IV::B / 4);
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; ++r)
      acc[m][r] = IV::ffma(IV::cvt(IV::dot(IV::iload(cp), w[r], av)), IV::fmul(ws[r], dv), acc[m][r]);
  }
}

// MM rows of activations against R rows of W from row n.
template <class IV, int MM, int R>
void idot_tile(int bits, const uint8_t* act, int64_t stride, int64_t Kp, int64_t K, const uint8_t* q,
               const float* scales, const float* bias, float* C, int64_t ldc, int64_t n) {
  constexpr int BPV = IV::B / 32;
  const int64_t nb = K / 32, row = quant_row_bytes(bits, K);
  const int64_t nfull = nb / BPV;
  const uint8_t* qr[R];
  const float* sr[R];
  _Pragma("GCC unroll 16")
  for (int r = 0; r < R; ++r) {
    qr[r] = q + (n + r) * row;
    sr[r] = scales + (n + r) * nb;
  }
  typename IV::vf acc[MM][R];
  _Pragma("GCC unroll 16")
  for (int m = 0; m < MM; ++m)
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; ++r) acc[m][r] = IV::fzero();
  for (int64_t v = 0; v < nfull; ++v) idot_step<IV, MM, R, false>(bits, act, stride, Kp, qr, sr, v, acc);
  if (nfull * BPV < nb) idot_step<IV, MM, R, true>(bits, act, stride, Kp, qr, sr, nfull, acc);
  _Pragma("GCC unroll 16")
  for (int m = 0; m < MM; ++m)
    _Pragma("GCC unroll 16")
    for (int r = 0; r < R; ++r)
      C[m * ldc + n + r] = IV::hsum(acc[m][r]) + (bias ? bias[n + r] : 0.f);
}

// MM activation rows (decode sizes) against rows [n0, n1) of W, one row of W at a time, its vector
// steps spread over U accumulators per activation row (independent FMA chains). Rows of W are
// contiguous, so the codes and the scales are read as two linear streams, which the hardware
// prefetcher follows, helped by a software prefetch (prefetch.h); tiles of R interleaved rows
// (R + R streams, even with software prefetch) left it well short of the bandwidth (measured on
// Zen 5 with W from DRAM, one thread, before the prefetch of prefetch.h,
// M = 1: q8 on avx512-vnni 21.5 -> 26 GB/s at 1024 x 3072 (unchanged at 3072 x 1024), on avx2 /
// avx-vnni 16-19 -> 24-25, q4 on avx-vnni 13-19 -> 21; M = 2 / 3: q8 on avx512-vnni 16 -> 23 /
// 12 -> 20; a streaming read: 30-40). BITS is a template argument so that the weight decode is
// resolved at compile time in the inner loop.
template <class IV, int BITS, int MM, int U>
void idot_rows_lin(const uint8_t* act, int64_t stride, int64_t Kp, int64_t K, const uint8_t* q, const float* scales,
                   const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  constexpr int BPV = IV::B / 32;
  constexpr int64_t kVBytes = BITS == 8 ? IV::B : IV::B / 2;  // weight bytes per vector step
  const int64_t nb = K / 32, row = quant_row_bytes(BITS, K), nfull = nb / BPV;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* qr[1] = {q + n * row};
    const float* sr[1] = {scales + n * nb};
    typename IV::vf acc[U][MM][1];
    _Pragma("GCC unroll 8")
    for (int u = 0; u < U; ++u)
      _Pragma("GCC unroll 4")
      for (int m = 0; m < MM; ++m) acc[u][m][0] = IV::fzero();
    // prefetch_ahead on each 64-byte line of the codes (prefetch.h: one line in 32 prefetched); the
    // scales run at nb * 4 / row of the codes' pace: as far ahead of them in the weight.
    for (int64_t l = 0; l < nb * 4; l += 64)
      prefetch_ahead(sr[0], kDecodePrefetchBytes * nb * 4 / row + l);
    int64_t v = 0;
    for (; v + U <= nfull; v += U)
      _Pragma("GCC unroll 8")
      for (int u = 0; u < U; ++u) {
        if (u * kVBytes % 64 == 0) prefetch_ahead(qr[0] + (v + u) * kVBytes, kDecodePrefetchBytes);
        idot_step<IV, MM, 1, false>(BITS, act, stride, Kp, qr, sr, v + u, acc[u]);
      }
    for (; v < nfull; ++v) idot_step<IV, MM, 1, false>(BITS, act, stride, Kp, qr, sr, v, acc[v % U]);
    if (nfull * BPV < nb) idot_step<IV, MM, 1, true>(BITS, act, stride, Kp, qr, sr, nfull, acc[U - 1]);
    _Pragma("GCC unroll 4")
    for (int m = 0; m < MM; ++m) {
      typename IV::vf sum = acc[0][m][0];
      _Pragma("GCC unroll 8")
      for (int u = 1; u < U; ++u) sum = IV::fadd(sum, acc[u][m][0]);
      C[m * ldc + n] = IV::hsum(sum) + (bias ? bias[n] : 0.f);
    }
  }
}

// Activation rows [0, M), M <= 3, as idot_rows_lin.
template <class IV, int BITS>
void idot_rows_few(int64_t M, const uint8_t* act, int64_t stride, int64_t Kp, int64_t K, const uint8_t* q,
                   const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  if (M == 1) idot_rows_lin<IV, BITS, 1, 4>(act, stride, Kp, K, q, scales, bias, C, ldc, n0, n1);
  else if (M == 2) idot_rows_lin<IV, BITS, 2, 2>(act, stride, Kp, K, q, scales, bias, C, ldc, n0, n1);
  else idot_rows_lin<IV, BITS, 3, 2>(act, stride, Kp, K, q, scales, bias, C, ldc, n0, n1);
}

template <class IV, int MM>
void idot_rows_m(int bits, const uint8_t* act, int64_t stride, int64_t Kp, int64_t K, const uint8_t* q,
                 const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                 int64_t n1) {
  constexpr int R = MM == 1 ? 1 : MM == 2 ? 4 : 3;
  int64_t n = n0;
  for (; n + R <= n1; n += R) idot_tile<IV, MM, R>(bits, act, stride, Kp, K, q, scales, bias, C, ldc, n);
  for (; n < n1; ++n) idot_tile<IV, MM, 1>(bits, act, stride, Kp, K, q, scales, bias, C, ldc, n);
}

// Rows [0, M) of quantized activations (row m at act + m * stride, stride >= act_row_bytes_of(Kp):
// a table's rows may hold another layout after this one) against rows [n0, n1) of W. Rows of W are
// taken a tile at a time and run against every group of 4 activation rows while they are in cache.
template <class IV>
void idot_rows_at(int bits, const uint8_t* act, int64_t stride, int64_t M, int64_t K, const uint8_t* q,
                  const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
                  int64_t n1) {
  const int64_t Kp = (K + IV::B - 1) / IV::B * IV::B;
  if (M <= 3) {
    if (bits == 8) return idot_rows_few<IV, 8>(M, act, stride, Kp, K, q, scales, bias, C, ldc, n0, n1);
    return idot_rows_few<IV, 4>(M, act, stride, Kp, K, q, scales, bias, C, ldc, n0, n1);
  }
  // Weight rows per pass: a few KB of W stay in L1 while every activation row streams past.
  const int64_t step = M <= 4 ? n1 - n0 : 12;
  for (int64_t s0 = n0; s0 < n1; s0 += step) {
    const int64_t s1 = s0 + step < n1 ? s0 + step : n1;
    for (int64_t m = 0; m < M; m += 4) {
      const uint8_t* a = act + m * stride;
      float* c = C + m * ldc;
      switch (M - m) {
        case 1: idot_rows_m<IV, 1>(bits, a, stride, Kp, K, q, scales, bias, c, ldc, s0, s1); break;
        case 2: idot_rows_m<IV, 2>(bits, a, stride, Kp, K, q, scales, bias, c, ldc, s0, s1); break;
        case 3: idot_rows_m<IV, 3>(bits, a, stride, Kp, K, q, scales, bias, c, ldc, s0, s1); break;
        default: idot_rows_m<IV, 4>(bits, a, stride, Kp, K, q, scales, bias, c, ldc, s0, s1); break;
      }
    }
  }
}

// idot_rows_at for rows of this layout alone.
template <class IV>
void idot_rows(int bits, const uint8_t* act, int64_t M, int64_t K, const uint8_t* q,
               const float* scales, const float* bias, float* C, int64_t ldc, int64_t n0,
               int64_t n1) {
  idot_rows_at<IV>(bits, act, act_row_bytes_of((K + IV::B - 1) / IV::B * IV::B), M, K, q, scales, bias, C, ldc, n0, n1);
}

template <class IV>
void quantize_act(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K,
                  uint8_t* act) {
  quantize_act_rows<IV>(bits, A, lda, m0, m1, K, act);
}

template <class IV>
int64_t act_row_bytes(int64_t K) {
  return act_row_bytes_of((K + IV::B - 1) / IV::B * IV::B);
}

// quantize_act for activation rows `stride` bytes apart (stride >= act_row_bytes<IV>(K): a table
// whose rows also hold another layout, e.g. q4_0's of quant_q4_act.h): all rows at once where the
// stride is this layout's, else one row at a time.
template <class IV>
void quantize_act_strided(int bits, const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K, uint8_t* act,
                          int64_t stride) {
  if (stride == act_row_bytes<IV>(K)) return quantize_act<IV>(bits, A, lda, m0, m1, K, act);
  for (int64_t m = m0; m < m1; ++m) quantize_act<IV>(bits, A + m * lda, lda, 0, 1, K, act + m * stride);
}

// The integer-path entries of a QuantKernels table for traits IV.
template <class IV>
IntQuantKernels make_int_kernels() {
  return IntQuantKernels{IV::kName, act_row_bytes<IV>, quantize_act<IV>, idot_rows<IV>, nullptr, nullptr, nullptr, nullptr};
}

}  // namespace
}  // namespace tsorch
