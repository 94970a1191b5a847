// bfloat16 GEMM with AVX512-BF16's vdpbf16ps, for linears with bfloat16 weights at M >= kMinM
// (prefill, batched decode). Numerics: A is rounded to bfloat16 (nearest even) before the product,
// as PyTorch's bfloat16 models compute (activations are bfloat16 there); products of pairs are
// summed in float32 (vdpbf16ps flushes denormals). Compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512bf16 -mfma (binding.gyp target tsorch_gemm_avx512bf16). Internal linkage and no
// standard-library templates (see gemm_impl.h).
#include <immintrin.h>

#include <cstdint>

#include "gemm.h"
#include "gemm_kernels.h"

namespace tsorch {
namespace {

// A [M, K] float32 -> bfloat16 rows of Kp (K rounded up to 32, zero padded).
void to_bf16(const float* A, int64_t lda, int64_t M, int64_t K, int64_t Kp, uint16_t* out) {
  for (int64_t m = 0; m < M; ++m) {
    const float* a = A + m * lda;
    uint16_t* o = out + m * Kp;
    for (int64_t k = 0; k < Kp; k += 32) {
      const int64_t left = K - k;
      const __mmask16 lo = left >= 16 ? 0xFFFF : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
      const __mmask16 hi = left >= 32 ? 0xFFFF : left <= 16 ? 0 : static_cast<__mmask16>((1u << (left - 16)) - 1);
      const __m512 x0 = _mm512_maskz_loadu_ps(lo, a + k), x1 = _mm512_maskz_loadu_ps(hi, a + k + 16);
      _mm512_storeu_si512(o + k, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0)));
    }
  }
}

// MM rows of A (bf16, row stride Kp) x R rows of W from row n.
template <int MM, int R>
void tile(const uint16_t* A, int64_t Kp, int64_t K, const uint16_t* W, int64_t ldw,
          const float* bias, float* C, int64_t ldc, int64_t n) {
  __m512 acc[MM][R];
  _Pragma("GCC unroll 16") for (int m = 0; m < MM; ++m)
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[m][r] = _mm512_setzero_ps();
  const int64_t kfull = K / 32 * 32;
  for (int64_t k = 0; k < Kp; k += 32) {
    __m512i w[R];
    if (k < kfull) {
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) w[r] = _mm512_loadu_si512(W + (n + r) * ldw + k);
    } else {
      const __mmask32 mk = static_cast<__mmask32>((1ull << (K - k)) - 1);
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) w[r] = _mm512_maskz_loadu_epi16(mk, W + (n + r) * ldw + k);
    }
    _Pragma("GCC unroll 16") for (int m = 0; m < MM; ++m) {
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_loadu_si512(A + m * Kp + k));
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r)
        acc[m][r] = _mm512_dpbf16_ps(acc[m][r], a, reinterpret_cast<__m512bh>(w[r]));
    }
  }
  _Pragma("GCC unroll 16") for (int m = 0; m < MM; ++m)
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r)
      C[m * ldc + n + r] = _mm512_reduce_add_ps(acc[m][r]) + (bias ? bias[n + r] : 0.f);
}

template <int MM>
void rows(const uint16_t* A, int64_t Kp, int64_t K, const uint16_t* W, int64_t ldw,
          const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) tile<MM, 4>(A, Kp, K, W, ldw, bias, C, ldc, n);
  for (; n < n1; ++n) tile<MM, 1>(A, Kp, K, W, ldw, bias, C, ldc, n);
}

void gemm_nt_bf16(const float* A, int64_t lda, int64_t M, int64_t K, const uint16_t* W,
                  int64_t ldw, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t Kp = (K + 31) / 32 * 32;
  // Blocks of 64 rows of A (bf16) stay in L2 while 4 rows of W at a time stay in L1.
  constexpr int64_t kMB = 64;
  uint16_t* a = reinterpret_cast<uint16_t*>(thread_scratch(3, static_cast<size_t>((kMB * Kp + 1) / 2)));
  for (int64_t m0 = 0; m0 < M; m0 += kMB) {
    const int64_t mb = M - m0 < kMB ? M - m0 : kMB;
    to_bf16(A + m0 * lda, lda, mb, K, Kp, a);
    // Four rows of W against every group of 4 rows of A.
    for (int64_t s0 = n0; s0 < n1; s0 += 16) {
      const int64_t s1 = s0 + 16 < n1 ? s0 + 16 : n1;
      for (int64_t m = 0; m < mb; m += 4) {
        const uint16_t* am = a + m * Kp;
        float* c = C + (m0 + m) * ldc;
        switch (mb - m) {
          case 1: rows<1>(am, Kp, K, W, ldw, bias, c, ldc, s0, s1); break;
          case 2: rows<2>(am, Kp, K, W, ldw, bias, c, ldc, s0, s1); break;
          case 3: rows<3>(am, Kp, K, W, ldw, bias, c, ldc, s0, s1); break;
          default: rows<4>(am, Kp, K, W, ldw, bias, c, ldc, s0, s1); break;
        }
      }
    }
  }
}

}  // namespace

// The AVX512-BF16 GEMM (see gemm_kernels.h).
const Bf16GemmKernels& gemm_kernels_avx512bf16() {
  static const Bf16GemmKernels kernels{"avx512-bf16", gemm_nt_bf16};
  return kernels;
}

}  // namespace tsorch
