// The activation rows of the q4_0 decode kernels that take several blocks of W per load
// (quant_q4_vnni512.h: 4 blocks per 64-byte line, quant_q4_ymm.h: 2 per 32 bytes), and how those
// kernels walk them. With BPC
// blocks per chunk, Kp = K rounded up to 32 * BPC values, a row is (2 * Kp bytes):
//   int8 codes [Kp]: per chunk c, block b = BPC c + j's elements 0..15 at 32 BPC c + 16 j and its
//     elements 16..31 at 32 BPC c + 16 BPC + 16 j (the order the nibbles of a load unpack to:
//     low nibbles, then high), zero where the row has no block b;
//   int32 corr [Kp / 8]: per chunk 4 BPC lanes, -8 times the sum of the lane's 8 codes (the
//     nibbles carry the weight offset 8), lane 4 j + l over bytes 4 l.. of both halves of block j;
//   float d_a [Kp / 8]: lane 4 j + l holds block j's scale.
// Internal linkage (see gemm_impl.h). Include after quant_int_impl.h (quantize_act_block).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tsorch {
namespace {

// Activation rows [0, M) three at a time, as the decode kernels take them: f(rows, m) for m = 0, 3,
// 6, ... with rows a std::integral_constant<int, MM> (3, or the 1-2 left at the end).
template <class F>
inline void q4_by_row_triples(int64_t M, F&& f) {
  for (int64_t m = 0; m < M; m += 3) {
    switch (M - m) {
      case 1: f(std::integral_constant<int, 1>{}, m); break;
      case 2: f(std::integral_constant<int, 2>{}, m); break;
      default: f(std::integral_constant<int, 3>{}, m); break;
    }
  }
}

template <int BPC>
inline int64_t q4_chunk_kp(int64_t K) { return (K + 32 * BPC - 1) / (32 * BPC) * (32 * BPC); }

// Rows m0 <= m < m1 of A [., K] (row stride lda) -> the layout above with integer traits IV,
// row m at m * stride (stride >= 2 * q4_chunk_kp<BPC>(K)). chunk_corr(lo, out) writes a chunk's
// 4 BPC corr lanes from its 32 BPC codes at lo (a vector instruction or two on each path).
template <class IV, int BPC, class ChunkCorr>
void q4_quantize_chunks(const float* A, int64_t lda, int64_t m0, int64_t m1, int64_t K, uint8_t* act,
                        int64_t stride, ChunkCorr chunk_corr) {
  constexpr int64_t kW = 32 * BPC;
  const int64_t Kp = q4_chunk_kp<BPC>(K), nb = K / 32;
  for (int64_t m = m0; m < m1; ++m) {
    uint8_t* row = act + m * stride;
    int8_t* codes = reinterpret_cast<int8_t*>(row);
    int32_t* corr = reinterpret_cast<int32_t*>(row + Kp);
    float* dl = reinterpret_cast<float*>(row + Kp + Kp / 2);
    for (int64_t c = 0; c < Kp / kW; ++c) {
      int8_t* lo = codes + c * kW;
      for (int j = 0; j < BPC; ++j) {
        int8_t nat[32] = {};
        float d = 0.f;
        if (c * BPC + j < nb) quantize_act_block<IV>(A + m * lda + (c * BPC + j) * 32, nat, &d);
        std::memcpy(lo + 16 * j, nat, 16);
        std::memcpy(lo + 16 * BPC + 16 * j, nat + 16, 16);
        for (int l = 0; l < 4; ++l) dl[c * 4 * BPC + 4 * j + l] = d;
      }
      chunk_corr(lo, corr + c * 4 * BPC);
    }
  }
}

}  // namespace
}  // namespace tsorch
