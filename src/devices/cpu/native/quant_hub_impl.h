// Kernels of quant_hub_kernels.h, written once for the instruction set the including translation
// unit is compiled for: AVX-512 (__AVX512F__), AVX2 + FMA (__AVX2__), else portable C++. Included
// only by quant_hub_avx512.cc, quant_hub_avx2.cc and quant_hub_portable.cc.
//
// GPTQ: a vector of W packed words (one word-row of qweight, W output channels) holds 32 / bits
// consecutive k per channel; each is shifted out, masked into the mantissa of 2^23, has 2^23 + its
// zero point subtracted (exact) and is FMA'd with the broadcast input; the sums are scaled once per
// run of k in one group. AWQ: a vector of W words of one k holds
// 8 channels per word in AutoAWQ's order; nibble i of every lane is one vector of channels
// 8c + kAwqOrder[i], so zero points and scales are kept in that order and the sums are put back in
// channel order at the end. FP8 e4m3: byte b sign-extended to 16 bits, (b << 7) & 0xbf80 is a float16
// of value e4m3(b) * 2^-8 (subnormals included), widened by the F16C conversion (portable: a table);
// the block scale takes the 2^8, and the code 0x7f (NaN) is patched.
// Panels narrower than the tier's (the last one of an odd N) run the scalar reference loops.
#pragma once

#if defined(__AVX512F__)
#include "simd_avx512.h"
#elif defined(__AVX2__)
#include "simd_avx2.h"
#else
#include "simd_portable.h"
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "dtype.h"
#include "gemm.h"
#include "quant_hub_kernels.h"

namespace tsorch {
namespace {

// The value of a float8_e4m3fn byte (1 sign, 4 exponent bits with bias 7, 3 mantissa bits,
// subnormals; 0x7f / 0xff are NaN), by the same bit moves as the vector decoders.
inline float fp8_value(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return __builtin_nanf("");
  // The float16 (b << 7) & 0xbf80 (sign-extended b) is e4m3(b) * 2^-8, as in the vector decoders.
  const uint16_t h = static_cast<uint16_t>((static_cast<int16_t>(static_cast<int8_t>(b)) * 128) & 0xbf80);
  return f16_to_f32(h) * 256.f;
}

#if defined(__AVX512F__)
using HV = VecAvx512;
using HI = __m512i;
inline HI hload_i(const int32_t* p) { return _mm512_loadu_si512(p); }
// ((q >> shift) & mask) as floats.
inline __m512 hnib(HI q, int shift, int mask) {
  return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(q, shift), _mm512_set1_epi32(mask)));
}
// 2^23 + ((q >> shift) & mask) as floats (the code in the mantissa of 2^23).
inline __m512 hcode(HI q, int shift, int mask) {
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_srli_epi32(q, shift), _mm512_set1_epi32(mask),
                                                       _mm512_set1_epi32(0x4b000000), 0xea));  // (a & b) | c
}
inline __m512 hsub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
inline __m512 hmul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
// 16 float8_e4m3fn bytes as their values times 2^-8 (see kFp8Unit).
inline __m512 hfp8(const uint8_t* p) {
  const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512 f = _mm512_cvtph_ps(_mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(static_cast<short>(0xbf80))));
  const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7f));
  return _mm512_mask_mov_ps(f, nan, _mm512_set1_ps(__builtin_nanf("")));
}
// Output rows per pass (accumulators held in registers): GPTQ, AWQ.
constexpr int kGptqRows = 4, kAwqRows = 2;
#elif defined(__AVX2__)
using HV = VecAvx2;
using HI = __m256i;
inline HI hload_i(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 hnib(HI q, int shift, int mask) {
  return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(q, shift), _mm256_set1_epi32(mask)));
}
inline __m256 hcode(HI q, int shift, int mask) {
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q, shift), _mm256_set1_epi32(mask)),
                                             _mm256_set1_epi32(0x4b000000)));
}
inline __m256 hsub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
inline __m256 hmul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
inline __m256 hfp8(const uint8_t* p) {
  const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256 f = _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16(static_cast<short>(0xbf80))));
  const __m128i nan = _mm_cmpeq_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7f));
  return _mm256_or_ps(f, _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan)));  // all ones: a NaN
}
constexpr int kGptqRows = 2, kAwqRows = 1;
#else
using HV = VecPortable;
struct HI { uint32_t v[HV::W]; };
inline HI hload_i(const int32_t* p) { HI r; std::memcpy(r.v, p, sizeof(r.v)); return r; }
inline HV::vf hnib(HI q, int shift, int mask) {
  HV::vf r;
  for (int i = 0; i < HV::W; ++i) r.v[i] = static_cast<float>((q.v[i] >> shift) & static_cast<uint32_t>(mask));
  return r;
}
inline HV::vf hcode(HI q, int shift, int mask) {
  HV::vf r;
  for (int i = 0; i < HV::W; ++i) r.v[i] = 8388608.f + static_cast<float>((q.v[i] >> shift) & static_cast<uint32_t>(mask));
  return r;
}
inline HV::vf hsub(HV::vf a, HV::vf b) { for (int i = 0; i < HV::W; ++i) a.v[i] -= b.v[i]; return a; }
inline HV::vf hmul(HV::vf a, HV::vf b) { for (int i = 0; i < HV::W; ++i) a.v[i] *= b.v[i]; return a; }
inline HV::vf hfp8(const uint8_t* p) {
  static const struct Table { float v[256]; Table() { for (int c = 0; c < 256; ++c) v[c] = fp8_value(static_cast<uint8_t>(c)) * 0x1p-8f; } } table;
  HV::vf r;
  for (int i = 0; i < HV::W; ++i) r.v[i] = table.v[p[i]];
  return r;
}
constexpr int kGptqRows = 2, kAwqRows = 1;
#endif

using HVec = HV::vf;
constexpr int kW = HV::W;
// GPTQ panel: kNV vectors of channels.
constexpr int kNV = 4;
constexpr int64_t kGptqPanel = kNV * kW, kAwqPanel = 8 * kW;
// hfp8 returns e4m3 values times 2^-8: e4m3 bits moved into a float16 (sign, then exponent and
// mantissa) read as such by the hardware conversion, subnormals included, never a float32 subnormal.
constexpr float kFp8Unit = 256.f;

// AutoAWQ packs columns 8c + kAwqOrder[i] into nibble i of word c; column j sits in nibble kAwqSlot[j].
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kAwqSlot[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// Code and zero point (zero_offset added) of w[n, k].
inline int pi_code(const PackedIntWeight& w, int64_t n, int64_t k) {
  const uint32_t mask = (1u << w.bits) - 1;
  if (w.awq) return static_cast<int>((static_cast<uint32_t>(w.qweight[k * (w.N / 8) + n / 8]) >> (kAwqSlot[n & 7] * 4)) & 15u);
  const int per = 32 / w.bits;
  return static_cast<int>((static_cast<uint32_t>(w.qweight[(k / per) * w.N + n]) >> ((k % per) * w.bits)) & mask);
}
inline float pi_zero(const PackedIntWeight& w, int64_t g, int64_t n) {
  const int lp = w.bits == 4 ? 3 : 2;  // log2(32 / bits)
  const uint32_t mask = (1u << w.bits) - 1;
  const int shift = w.awq ? kAwqSlot[n & 7] * 4 : static_cast<int>(n & ((1 << lp) - 1)) * w.bits;
  return static_cast<float>(static_cast<int>((static_cast<uint32_t>(w.qzeros[g * (w.N >> lp) + (n >> lp)]) >> shift) & mask) + w.zero_offset);
}
inline float pi_value(const PackedIntWeight& w, int64_t n, int64_t k) {
  const int64_t g = w.g_idx[k];
  return (static_cast<float>(pi_code(w, n, k)) - pi_zero(w, g, n)) * w.scales[g * w.N + n];
}

// Scalar reference loops (narrow panels).
void packed_int_rows_scalar(const PackedIntWeight& w, const float* x, int64_t M, const float* bias,
                            float* out, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float s = 0.f;
      for (int64_t k = 0; k < w.K; ++k) s += x[m * w.K + k] * pi_value(w, n, k);
      out[m * w.N + n] = s + (bias ? bias[n] : 0.f);
    }
}

// Zero points of channels [n0, n0 + width) as floats plus `add`, per group: z[g * width + j].
float* zeros_f32(const PackedIntWeight& w, int64_t n0, int64_t width, float add) {
  float* z = thread_scratch(2, static_cast<size_t>(w.G * width));
  for (int64_t g = 0; g < w.G; ++g)
    for (int64_t j = 0; j < width; ++j) z[g * width + j] = pi_zero(w, g, n0 + j) + add;
  return z;
}

// The rows kernels below sum (code - z) * x over the run of k of one group (exact codes: 2^23 + code
// minus 2^23 + z) and scale the sum once per run: acc += s * t. Runs end where g_idx changes (every
// group_size k, or at every k of an act-order g_idx, which then costs one more FMA per weight).
constexpr float kMagic = 8388608.f;  // 2^23
// How many k ahead the rows kernels prefetch their strided weight rows (~ DRAM latency of work).
constexpr int64_t kPrefetchRows = 96;

// GPTQ, one full panel, MM rows of x.
template <int BITS, int MM>
void gptq_pass(const PackedIntWeight& w, const float* x, const float* bias, float* out, int64_t n0,
               const float* zm) {
  constexpr int PER = 32 / BITS, MASK = (1 << BITS) - 1;
  const int64_t N = w.N, K = w.K;
  HVec acc[MM][kNV], t[MM][kNV];
  for (int m = 0; m < MM; ++m)
    for (int v = 0; v < kNV; ++v) acc[m][v] = HV::zero(), t[m][v] = HV::zero();
  int64_t gc = K > 0 ? w.g_idx[0] : 0;
  auto flush = [&](int64_t g) {
    const float* s = w.scales + gc * N + n0;
    for (int v = 0; v < kNV; ++v) {
      const HVec sv = HV::load(s + v * kW);
      for (int m = 0; m < MM; ++m) acc[m][v] = HV::fma(t[m][v], sv, acc[m][v]), t[m][v] = HV::zero();
    }
    gc = g;
  };
  for (int64_t kk = 0; kk < K / PER; ++kk) {
    const int32_t* q = w.qweight + kk * N + n0;
    // Word-rows are N words apart: fetch every line of the one kPrefetchRows ahead.
    for (int l = 0; l < kGptqPanel * 4; l += 64) __builtin_prefetch(reinterpret_cast<const char*>(q + kPrefetchRows / PER * N) + l);
    HI qw[kNV];
    for (int v = 0; v < kNV; ++v) qw[v] = hload_i(q + v * kW);
    for (int i = 0; i < PER; ++i) {
      const int64_t k = kk * PER + i, g = w.g_idx[k];
      if (g != gc) flush(g);
      const float* z = zm + g * kGptqPanel;
      HVec xb[MM];
      for (int m = 0; m < MM; ++m) xb[m] = HV::set1(x[m * K + k]);
      for (int v = 0; v < kNV; ++v) {
        const HVec c = hsub(hcode(qw[v], i * BITS, MASK), HV::load(z + v * kW));
        for (int m = 0; m < MM; ++m) t[m][v] = HV::fma(c, xb[m], t[m][v]);
      }
    }
  }
  flush(gc);
  for (int m = 0; m < MM; ++m)
    for (int v = 0; v < kNV; ++v) {
      HVec r = acc[m][v];
      if (bias) r = HV::add(r, HV::load(bias + n0 + v * kW));
      HV::store(out + m * N + n0 + v * kW, r);
    }
}

// Zero points (plus `add`) and scales of an AWQ panel in nibble order: zs[(g * 8 + i) * kW + c] is
// channel n0 + 8c + kAwqOrder[i] of group g; scales at zs + G * kAwqPanel.
float* awq_zero_scales(const PackedIntWeight& w, int64_t n0, float add) {
  float* zs = thread_scratch(2, static_cast<size_t>(2 * w.G * kAwqPanel));
  for (int64_t g = 0; g < w.G; ++g)
    for (int i = 0; i < 8; ++i)
      for (int c = 0; c < kW; ++c) {
        const int64_t n = n0 + 8 * c + kAwqOrder[i];
        zs[(g * 8 + i) * kW + c] = pi_zero(w, g, n) + add;
        zs[w.G * kAwqPanel + (g * 8 + i) * kW + c] = w.scales[g * w.N + n];
      }
  return zs;
}

// AWQ, one full panel, MM rows of x; sums in nibble order, stored in channel order.
template <int MM>
void awq_pass(const PackedIntWeight& w, const float* x, const float* bias, float* out, int64_t n0,
              const float* zs) {
  const int64_t N = w.N, K = w.K;
  const float* sc = zs + w.G * kAwqPanel;
  HVec acc[MM][8], t[MM][8];
  for (int m = 0; m < MM; ++m)
    for (int i = 0; i < 8; ++i) acc[m][i] = HV::zero(), t[m][i] = HV::zero();
  int64_t gc = K > 0 ? w.g_idx[0] : 0;
  auto flush = [&](int64_t g) {
    const float* s = sc + gc * kAwqPanel;
    for (int i = 0; i < 8; ++i) {
      const HVec sv = HV::load(s + i * kW);
      for (int m = 0; m < MM; ++m) acc[m][i] = HV::fma(t[m][i], sv, acc[m][i]), t[m][i] = HV::zero();
    }
    gc = g;
  };
  for (int64_t k = 0; k < K; ++k) {
    const int32_t* q = w.qweight + k * (N / 8) + n0 / 8;
    for (int l = 0; l < kW * 4; l += 64) __builtin_prefetch(reinterpret_cast<const char*>(q + kPrefetchRows * (N / 8)) + l);
    const HI qw = hload_i(q);
    const int64_t g = w.g_idx[k];
    if (g != gc) flush(g);
    const float* z = zs + g * kAwqPanel;
    HVec xb[MM];
    for (int m = 0; m < MM; ++m) xb[m] = HV::set1(x[m * K + k]);
    for (int i = 0; i < 8; ++i) {
      const HVec c = hsub(hcode(qw, 4 * i, 15), HV::load(z + i * kW));
      for (int m = 0; m < MM; ++m) t[m][i] = HV::fma(c, xb[m], t[m][i]);
    }
  }
  flush(gc);
  alignas(64) float r[8 * kW];
  for (int m = 0; m < MM; ++m) {
    for (int i = 0; i < 8; ++i) HV::store(r + i * kW, acc[m][i]);
    for (int i = 0; i < 8; ++i)
      for (int c = 0; c < kW; ++c) {
        const int64_t n = n0 + 8 * c + kAwqOrder[i];
        out[m * N + n] = r[i * kW + c] + (bias ? bias[n] : 0.f);
      }
  }
}

// Rows of x in passes of up to ROWS (the accumulators of a pass stay in registers).
template <int ROWS, class Pass>
void in_passes(int64_t M, Pass pass) {
  int64_t m = 0;
  for (; m + ROWS <= M; m += ROWS) pass(std::integral_constant<int, ROWS>{}, m);
  switch (M - m) {
    case 1: pass(std::integral_constant<int, 1>{}, m); break;
    case 2: if constexpr (ROWS > 2) pass(std::integral_constant<int, 2>{}, m); break;
    case 3: if constexpr (ROWS > 3) pass(std::integral_constant<int, 3>{}, m); break;
    default: break;
  }
}

void packed_int_rows(const PackedIntWeight& w, const float* x, int64_t M, const float* bias,
                     float* out, int64_t n0, int64_t n1) {
  const int64_t K = w.K, N = w.N;
  if (w.awq) {
    if (n1 - n0 != kAwqPanel) return packed_int_rows_scalar(w, x, M, bias, out, n0, n1);
    const float* zs = awq_zero_scales(w, n0, kMagic);
    in_passes<kAwqRows>(M, [&](auto mm, int64_t m) { awq_pass<decltype(mm)::value>(w, x + m * K, bias, out + m * N, n0, zs); });
    return;
  }
  if (n1 - n0 != kGptqPanel) return packed_int_rows_scalar(w, x, M, bias, out, n0, n1);
  const float* zf = zeros_f32(w, n0, kGptqPanel, kMagic);
  in_passes<kGptqRows>(M, [&](auto mm, int64_t m) {
    if (w.bits == 4) gptq_pass<4, decltype(mm)::value>(w, x + m * K, bias, out + m * N, n0, zf);
    else gptq_pass<8, decltype(mm)::value>(w, x + m * K, bias, out + m * N, n0, zf);
  });
}

void packed_int_decode(const PackedIntWeight& w, float* dst, int64_t n0, int64_t n1) {
  const int64_t width = n1 - n0, K = w.K, N = w.N;
  if (!w.awq && width == kGptqPanel) {
    const float* zf = zeros_f32(w, n0, kGptqPanel, 0.f);
    const int per = 32 / w.bits, mask = (1 << w.bits) - 1;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t* q = w.qweight + (k / per) * N + n0;
      const int shift = static_cast<int>(k % per) * w.bits;
      const int64_t g = w.g_idx[k];
      for (int v = 0; v < kNV; ++v) {
        const HVec wv = hmul(hsub(hnib(hload_i(q + v * kW), shift, mask), HV::load(zf + g * kGptqPanel + v * kW)),
                             HV::load(w.scales + g * N + n0 + v * kW));
        HV::store(dst + k * width + v * kW, wv);
      }
    }
    return;
  }
  if (w.awq && width == kAwqPanel) {
    const float* zs = awq_zero_scales(w, n0, 0.f);
    const float* sc = zs + w.G * kAwqPanel;
    alignas(64) float t[8 * kW];
    for (int64_t k = 0; k < K; ++k) {
      const HI qw = hload_i(w.qweight + k * (N / 8) + n0 / 8);
      const int64_t g = w.g_idx[k];
      for (int i = 0; i < 8; ++i)
        HV::store(t + i * kW, hmul(hsub(hnib(qw, 4 * i, 15), HV::load(zs + g * kAwqPanel + i * kW)),
                                   HV::load(sc + g * kAwqPanel + i * kW)));
      float* row = dst + k * width;
      for (int i = 0; i < 8; ++i)
        for (int c = 0; c < kW; ++c) row[8 * c + kAwqOrder[i]] = t[i * kW + c];
    }
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < width; ++j) dst[k * width + j] = pi_value(w, n0 + j, k);
}

// FP8: MM rows of x against row n of W, two partial sums per row, scaled once per block.
template <int MM>
void fp8_row(const Fp8Weight& w, const float* x, const float* bias, float* out, int64_t n) {
  const int64_t K = w.K, bk = w.block_k, sk = (K + bk - 1) / bk;
  const uint8_t* q = w.w + n * K;
  const float* sr = w.scale_inv + (n / w.block_n) * sk;
  HVec acc[MM];
  float tail[MM];
  for (int m = 0; m < MM; ++m) acc[m] = HV::zero(), tail[m] = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += bk) {
    const int64_t k1 = std::min(K, k0 + bk);
    HVec t0[MM], t1[MM];
    float ts[MM];
    for (int m = 0; m < MM; ++m) t0[m] = HV::zero(), t1[m] = HV::zero(), ts[m] = 0.f;
    int64_t k = k0;
    for (; k + 2 * kW <= k1; k += 2 * kW) {
      const HVec f0 = hfp8(q + k), f1 = hfp8(q + k + kW);
      for (int m = 0; m < MM; ++m) {
        t0[m] = HV::fma(f0, HV::load(x + m * K + k), t0[m]);
        t1[m] = HV::fma(f1, HV::load(x + m * K + k + kW), t1[m]);
      }
    }
    for (; k + kW <= k1; k += kW) {
      const HVec f0 = hfp8(q + k);
      for (int m = 0; m < MM; ++m) t0[m] = HV::fma(f0, HV::load(x + m * K + k), t0[m]);
    }
    for (; k < k1; ++k) {
      const float f = fp8_value(q[k]);
      for (int m = 0; m < MM; ++m) ts[m] += f * x[m * K + k];
    }
    const float d = sr[k0 / bk];
    for (int m = 0; m < MM; ++m) {
      acc[m] = HV::fma(HV::add(t0[m], t1[m]), HV::set1(d * kFp8Unit), acc[m]);
      tail[m] += ts[m] * d;
    }
  }
  for (int m = 0; m < MM; ++m) out[m * w.N + n] = HV::hsum(acc[m]) + tail[m] + (bias ? bias[n] : 0.f);
}

void fp8_rows(const Fp8Weight& w, const float* x, int64_t M, const float* bias, float* out,
              int64_t n0, int64_t n1) {
  const int64_t K = w.K, N = w.N;
  in_passes<kGptqRows>(M, [&](auto mm, int64_t m) {
    for (int64_t n = n0; n < n1; ++n) fp8_row<decltype(mm)::value>(w, x + m * K, bias, out + m * N, n);
  });
}

void fp8_decode(const Fp8Weight& w, float* dst, int64_t n0, int64_t n1) {
  const int64_t K = w.K, bk = w.block_k, sk = (K + bk - 1) / bk;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* q = w.w + n * K;
    const float* sr = w.scale_inv + (n / w.block_n) * sk;
    float* row = dst + (n - n0) * K;
    for (int64_t k0 = 0; k0 < K; k0 += bk) {
      const int64_t k1 = std::min(K, k0 + bk);
      const float d = sr[k0 / bk];
      int64_t k = k0;
      for (; k + kW <= k1; k += kW) HV::store(row + k, hmul(hfp8(q + k), HV::set1(d * kFp8Unit)));
      for (; k < k1; ++k) row[k] = fp8_value(q[k]) * d;
    }
  }
}

constexpr HubKernels make_hub_kernels() {
  return HubKernels{HV::kName, kGptqPanel, kAwqPanel, packed_int_rows, packed_int_decode, fp8_rows, fp8_decode};
}

}  // namespace
}  // namespace tsorch
