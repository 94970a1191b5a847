// Integer-vector traits for quant_int_impl.h, one per instruction set, picked by the including
// translation unit's target macros: __AVX512VNNI__ (IntAvx512Vnni), __AVXVNNI__ (IntAvxVnni),
// __AVX2__ (IntAvx2), else IntPortable. Each provides:
//   B                bytes (int8 elements) per vector; vb / vi / vf: byte, int32 and float vectors
//   segment(bits,s)  source offset (within B natural elements) of the vector's 16-byte segment s
//   round_codes      32 floats * id -> int8, rounded to nearest (ties to even)
//   absmax32         max |x| over 32 floats (NaN ignored, as fmaxf)
//   corr             the int32 start value of each lane (minus the weight offset times the lane's
//                    activation sum) for a row of Kp codes
//   wload / wload_tail, wscale / wscale_tail   one vector of weights (all B / 32 blocks, or only
//                    the first) and the per-lane weight scale
//   aload, iload, fload, dot, cvt, fzero, fadd, fmul, ffma, hsum
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tsorch {
namespace {

#if defined(__AVX512VNNI__)
struct IntAvx512Vnni {
  static constexpr const char* kName = "avx512-vnni";
  static constexpr int B = 64;
  using vb = __m512i;
  using vi = __m512i;
  using vf = __m512;
  // q4 weights decode to [b0 0..15, b1 0..15, b0 16..31, b1 16..31] (see wload).
  static int segment(int bits, int s) { return bits == 8 ? s * 16 : (s & 1) * 32 + (s >> 1) * 16; }
  static void round_codes(const float* x, float id, int8_t* q) {
    const __m512 s = _mm512_set1_ps(id);
    for (int h = 0; h < 2; ++h) {
      const __m512i i = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * h), s));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * h), _mm512_cvtsepi32_epi8(i));
    }
  }
  static float absmax32(const float* x) {
    // max(|x|, m) keeps m where x is NaN (vmaxps returns its second operand then).
    const __m512 m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16)), _mm512_setzero_ps());
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), m));
  }
  static void corr(int bits, const int8_t* codes, int32_t* out, int64_t Kp) {
    const __m512i off = _mm512_set1_epi8(static_cast<char>(bits == 8 ? 128 : 8));
    for (int64_t c = 0; c < Kp; c += B) {
      const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, _mm512_loadu_si512(codes + c));
      _mm512_storeu_si512(out + c / 4, _mm512_sub_epi32(_mm512_setzero_si512(), s));
    }
  }
  static vb wload(int bits, const uint8_t* p) {
    if (bits == 8) return _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_set1_epi8(static_cast<char>(0x80)));
    return nibbles(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static vb wload_tail(int bits, const uint8_t* p) {
    if (bits == 8) return _mm512_xor_si512(_mm512_maskz_loadu_epi8(0xFFFFFFFFull, p), _mm512_set1_epi8(static_cast<char>(0x80)));
    return nibbles(_mm256_maskz_loadu_epi8(0xFFFFu, p));
  }
  // 32 bytes of two q4 blocks -> low nibbles in the low half, high nibbles in the high half.
  static vb nibbles(__m256i v) {
    const __m512i z = _mm512_broadcast_i64x4(v);
    const __m512i sh = _mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0));
    return _mm512_and_si512(sh, _mm512_set1_epi8(0x0F));
  }
  static vf wscale(int bits, const float* s) {
    return spread(bits, _mm512_castps128_ps512(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)))));  // unaligned 8-byte load
  }
  static vf wscale_tail(int bits, const float* s) { return spread(bits, _mm512_castps128_ps512(_mm_load_ss(s))); }
  static vf spread(int bits, __m512 two) {
    const __m512i i8 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i i4 = _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(bits == 8 ? i8 : i4, two);
  }
  static vb aload(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static vi iload(const int32_t* p) { return _mm512_loadu_si512(p); }
  static vf fload(const float* p) { return _mm512_loadu_ps(p); }
  static vi dot(vi c, vb w, vb a) { return _mm512_dpbusd_epi32(c, w, a); }
  static vf cvt(vi a) { return _mm512_cvtepi32_ps(a); }
  static vf fzero() { return _mm512_setzero_ps(); }
  static vf fadd(vf a, vf b) { return _mm512_add_ps(a, b); }
  static vf fmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
  static vf ffma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(vf a) { return _mm512_reduce_add_ps(a); }
};
using IntTraits = IntAvx512Vnni;

#elif defined(__AVX2__)
// 32-byte vectors (one block): shared by AVX-VNNI (vpdpbusd ymm) and plain AVX2 (sign trick).
struct IntYmmBase {
  static constexpr int B = 32;
  using vb = __m256i;
  using vi = __m256i;
  using vf = __m256;
  static int segment(int, int s) { return s * 16; }
  static void round_codes(const float* x, float id, int8_t* q) {
    const __m256 s = _mm256_set1_ps(id);
    __m256i i[4];
    for (int h = 0; h < 4; ++h) i[h] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * h), s));
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  static float absmax32(const float* x) {
    // max(|x|, m) keeps m where x is NaN (vmaxps returns its second operand then).
    const __m256 sign = _mm256_set1_ps(-0.f);
    __m256 m = _mm256_setzero_ps();
    for (int h = 0; h < 4; ++h) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * h)), m);
    __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    r = _mm_max_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_max_ss(r, _mm_movehdup_ps(r)));
  }
  // q4: low nibbles (elements 0..15) then high nibbles (16..31), each still offset by 8.
  static __m256i nibbles(const uint8_t* p) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    asm("" : "+v"(v));  // one load, not one per nibble extraction (see quant_q4_vnni512.h)
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
  }
  static vf wscale(int, const float* s) { return _mm256_broadcast_ss(s); }
  static vf wscale_tail(int bits, const float* s) { return wscale(bits, s); }
  static vb aload(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static vi iload(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static vf fload(const float* p) { return _mm256_loadu_ps(p); }
  static vf cvt(vi a) { return _mm256_cvtepi32_ps(a); }
  static vf fzero() { return _mm256_setzero_ps(); }
  static vf fadd(vf a, vf b) { return _mm256_add_ps(a, b); }
  static vf fmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
  static vf ffma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#if defined(__AVXVNNI__)
struct IntAvxVnni : IntYmmBase {
  static constexpr const char* kName = "avx-vnni";
  static void corr(int bits, const int8_t* codes, int32_t* out, int64_t Kp) {
    const __m256i off = _mm256_set1_epi8(static_cast<char>(bits == 8 ? 128 : 8));
    for (int64_t c = 0; c < Kp; c += B) {
      const __m256i s = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), off, aload(reinterpret_cast<const uint8_t*>(codes + c)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c / 4), _mm256_sub_epi32(_mm256_setzero_si256(), s));
    }
  }
  // Unsigned weights: q8 code + 128, q4 nibble (code + 8).
  static vb wload(int bits, const uint8_t* p) {
    if (bits == 8) return _mm256_xor_si256(aload(p), _mm256_set1_epi8(static_cast<char>(0x80)));
    return nibbles(p);
  }
  static vb wload_tail(int bits, const uint8_t* p) { return wload(bits, p); }
  static vi dot(vi c, vb w, vb a) { return _mm256_dpbusd_avx_epi32(c, w, a); }
};
using IntTraits = IntAvxVnni;
#else
struct IntAvx2 : IntYmmBase {
  static constexpr const char* kName = "avx2";
  // Signed weights, no offset: the start value is zero.
  static void corr(int, const int8_t*, int32_t* out, int64_t Kp) { std::memset(out, 0, Kp); }
  static vb wload(int bits, const uint8_t* p) {
    if (bits == 8) return aload(p);
    return _mm256_sub_epi8(nibbles(p), _mm256_set1_epi8(8));
  }
  static vb wload_tail(int bits, const uint8_t* p) { return wload(bits, p); }
  // |w| * (a with w's sign): |w| <= 127 (q8 codes are within +-127, q4 within -8..7) and |a| <= 127,
  // so the pairwise int16 sums cannot saturate.
  static vi dot(vi, vb w, vb a) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
  }
};
using IntTraits = IntAvx2;
#endif

#else
struct IntPortable {
  static constexpr const char* kName = "portable";
  static constexpr int B = 32;
  struct vb { int8_t v[32]; };
  struct vi { int32_t v[8]; };
  struct vf { float v[8]; };
  static int segment(int, int s) { return s * 16; }
  static void round_codes(const float* x, float id, int8_t* q) {
    for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  }
  static float absmax32(const float* x) {
    float m = 0.f;
    for (int i = 0; i < 32; ++i) m = std::fmax(m, std::fabs(x[i]));
    return m;
  }
  static void corr(int, const int8_t*, int32_t* out, int64_t Kp) { std::memset(out, 0, Kp); }
  static vb wload(int bits, const uint8_t* p) {
    vb r;
    for (int i = 0; i < 32; ++i)
      r.v[i] = bits == 8 ? static_cast<int8_t>(p[i]) : static_cast<int8_t>((i < 16 ? (p[i] & 0x0F) : (p[i - 16] >> 4)) - 8);
    return r;
  }
  static vb wload_tail(int bits, const uint8_t* p) { return wload(bits, p); }
  static vf wscale(int, const float* s) { vf r; for (float& x : r.v) x = *s; return r; }
  static vf wscale_tail(int bits, const float* s) { return wscale(bits, s); }
  static vb aload(const uint8_t* p) { vb r; std::memcpy(r.v, p, 32); return r; }
  static vi iload(const int32_t* p) { vi r; std::memcpy(r.v, p, 32); return r; }
  static vf fload(const float* p) { vf r; std::memcpy(r.v, p, 32); return r; }
  static vi dot(vi c, vb w, vb a) {
    for (int l = 0; l < 8; ++l)
      for (int j = 0; j < 4; ++j) c.v[l] += w.v[4 * l + j] * a.v[4 * l + j];
    return c;
  }
  static vf cvt(vi a) { vf r; for (int l = 0; l < 8; ++l) r.v[l] = static_cast<float>(a.v[l]); return r; }
  static vf fzero() { vf r; for (float& x : r.v) x = 0.f; return r; }
  static vf fadd(vf a, vf b) { for (int l = 0; l < 8; ++l) a.v[l] += b.v[l]; return a; }
  static vf fmul(vf a, vf b) { for (int l = 0; l < 8; ++l) a.v[l] *= b.v[l]; return a; }
  static vf ffma(vf a, vf b, vf c) { for (int l = 0; l < 8; ++l) c.v[l] += a.v[l] * b.v[l]; return c; }
  static float hsum(vf a) {
    float s = 0.f;
    for (float x : a.v) s += x;
    return s;
  }
};
using IntTraits = IntPortable;
#endif

}  // namespace
}  // namespace tsorch
