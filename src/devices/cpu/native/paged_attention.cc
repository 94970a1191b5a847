// Paged attention (vLLM's PagedAttention) on cpu: keys and values in a pool of fixed-size blocks,
// each sequence's blocks named by its block table, and a ragged batch of query tokens.
//
// The pools hold float32, float16 or bfloat16 (a half-precision KV cache, as the model's dtype).
// paged_kv_write copies each new token's key/value rows to its slot. paged_attention splits the
// work into pieces of (query tile, kv head, range of key positions). A tile is one query token,
// or up to kTile consecutive positions of one sequence (a prefill chunk); a piece reads each key
// and value row of its range once, in place from its block, for all the tile's query rows of the
// kv head's group, with an online softmax (running max and sum per query row, FlashAttention's
// recurrence) over chunks of keys. Many tiles x kv heads (a serving step) run one piece each over
// the thread pool; fewer (one sequence decoding) also split the keys (flash-decoding) and merge
// the pieces' partial results.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"
#include "isa_clones.h"

// The 16-float vectors below are GCC/Clang vector extensions: one zmm register on AVX-512, two
// ymm on AVX2, four xmm on the baseline. They never cross a call (all helpers inline), so the ABI
// note GCC gives for returning them does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tsorch {

namespace {

// The piece kernel and the row stores are compiled for AVX-512, AVX2+FMA and the baseline, chosen at load time
// (TSORCH_ISA_CLONES, isa_clones.h).
// The helpers below are always inlined, so that each clone of the kernels gets them for its ISA.
#define TSORCH_INLINE inline __attribute__((always_inline))

typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
constexpr int64_t kW = 16;  // floats per vector

TSORCH_INLINE f32x16 load16(const float* p) { f32x16 v; std::memcpy(&v, p, sizeof v); return v; }
TSORCH_INLINE void store16(float* p, const f32x16& v) { std::memcpy(p, &v, sizeof v); }

TSORCH_INLINE float hsum(const f32x16& v) {
  f32x8 lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  const f32x8 s8 = lo + hi;
  f32x4 a, b;
  std::memcpy(&a, &s8, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&s8) + sizeof a, sizeof b);
  const f32x4 s4 = a + b;
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// 2^x for x <= 0 (x < -126 gives 2^-126; NaN stays NaN): 2^n 2^f with n = round(x), |f| <= 1/2,
// 2^f by Cephes' exp2f polynomial (relative error ~2e-7).
TSORCH_INLINE f32x16 exp2_16(const f32x16& v) {
  const i32x16 low = v < -126.f;
  const f32x16 x = (f32x16)((low & (i32x16)(f32x16{} - 126.f)) | (~low & (i32x16)v));
  const f32x16 n = (x + 12582912.f) - 12582912.f;  // round to nearest (1.5 * 2^23)
  const f32x16 f = x - n;
  f32x16 p = 1.535336188319500e-4f * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.f;
  const i32x16 e = (__builtin_convertvector(n, i32x16) + 127) << 23;
  return p * (f32x16)e;
}

// 16 floats of a row from element p on: float32 in place, or bfloat16 widened (the high half of a
// float32) in registers.
TSORCH_INLINE f32x16 ld16(const float* p) { return load16(p); }
TSORCH_INLINE f32x16 ld16(const uint16_t* p) {
  u16x16 h;
  std::memcpy(&h, p, sizeof h);
  return (f32x16)(__builtin_convertvector(h, u32x16) << 16);
}
TSORCH_INLINE float ld1(const float* p) { return *p; }
TSORCH_INLINE float ld1(const uint16_t* p) { return bf16_to_f32(*p); }

// A bfloat16 value of a row that the AVX-512 clone reads (attend_piece picks it where the CPU runs
// that clone): its 16 values widen by one two-source word permute with a zero vector (vpermi2w),
// where the generic widening above compiles there to five instructions (two vpmovzxwd on halves,
// an extract, an insert, a shift) that took most of a decode step's attention time. (The same
// permute compiles to scalar code on AVX2, so the other clones keep the widening above.)
struct Bf16Zmm {
  uint16_t bits;
};
TSORCH_INLINE f32x16 ld16(const Bf16Zmm* p) {
  u16x16 h;
  std::memcpy(&h, p, sizeof h);
  const u16x16 z = {};
  return (f32x16)__builtin_shufflevector(z, h, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9,
                                         25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}
TSORCH_INLINE float ld1(const Bf16Zmm* p) { return bf16_to_f32(p->bits); }

// {sum of a0's lanes, of a1's, a2's, a3's}: a transposed reduction (halving the lanes of all four
// vectors together), not four horizontal sums.
TSORCH_INLINE f32x4 hsum4(const f32x16& a0, const f32x16& a1, const f32x16& a2, const f32x16& a3) {
  const i32x16 lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  const i32x16 hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
  const f32x16 h0 = __builtin_shuffle(a0, a1, lo8) + __builtin_shuffle(a0, a1, hi8);
  const f32x16 h1 = __builtin_shuffle(a2, a3, lo8) + __builtin_shuffle(a2, a3, hi8);
  const i32x16 lo4 = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  const i32x16 hi4 = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};
  const f32x16 g = __builtin_shuffle(h0, h1, lo4) + __builtin_shuffle(h0, h1, hi4);  // 4 partials each
  const i32x16 lo2 = {0, 1, 4, 5, 8, 9, 12, 13, 0, 1, 4, 5, 8, 9, 12, 13};
  const i32x16 hi2 = {2, 3, 6, 7, 10, 11, 14, 15, 2, 3, 6, 7, 10, 11, 14, 15};
  const f32x16 e = __builtin_shuffle(g, lo2) + __builtin_shuffle(g, hi2);  // 2 partials each
  const i32x16 lo1 = {0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6};
  const i32x16 hi1 = {1, 3, 5, 7, 1, 3, 5, 7, 1, 3, 5, 7, 1, 3, 5, 7};
  const f32x16 t = __builtin_shuffle(e, lo1) + __builtin_shuffle(e, hi1);
  f32x4 r;
  std::memcpy(&r, &t, sizeof r);
  return r;
}

// s[0..3] = q . k_j for four key rows k_j (n elements each): four independent vector accumulators.
template <class T>
TSORCH_INLINE void dot4(const float* q, const T* k0, const T* k1, const T* k2, const T* k3, int64_t n, float* s) {
  f32x16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const f32x16 x = load16(q + i);
    a0 += x * ld16(k0 + i), a1 += x * ld16(k1 + i), a2 += x * ld16(k2 + i), a3 += x * ld16(k3 + i);
  }
  f32x4 r = hsum4(a0, a1, a2, a3);
  for (; i < n; ++i) r[0] += q[i] * ld1(k0 + i), r[1] += q[i] * ld1(k1 + i), r[2] += q[i] * ld1(k2 + i), r[3] += q[i] * ld1(k3 + i);
  std::memcpy(s, &r, sizeof r);
}

// dot4 for two query rows q0, q1 (s0, s1), reading (and widening) each key vector once.
template <class T>
TSORCH_INLINE void dot4x2(const float* q0, const float* q1, const T* k0, const T* k1, const T* k2, const T* k3, int64_t n, float* s0, float* s1) {
  f32x16 a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const f32x16 x = load16(q0 + i), y = load16(q1 + i);
    const f32x16 c0 = ld16(k0 + i), c1 = ld16(k1 + i), c2 = ld16(k2 + i), c3 = ld16(k3 + i);
    a0 += x * c0, a1 += x * c1, a2 += x * c2, a3 += x * c3;
    b0 += y * c0, b1 += y * c1, b2 += y * c2, b3 += y * c3;
  }
  if (i < n) return dot4(q0, k0, k1, k2, k3, n, s0), dot4(q1, k0, k1, k2, k3, n, s1);  // D not a multiple of kW
  const f32x4 r0 = hsum4(a0, a1, a2, a3), r1 = hsum4(b0, b1, b2, b3);
  std::memcpy(s0, &r0, sizeof r0), std::memcpy(s1, &r1, sizeof r1);
}

// pv_block for two output rows y0, y1 over the same keys, each value vector read once.
template <int NV, class VRow>
TSORCH_INLINE void pv_block2(float* y0, float* y1, float a0, float a1, const float* p0, const float* p1, int64_t j0, int64_t j1, const VRow& vrow, int64_t off) {
  f32x16 c[NV], d[NV];
  for (int k = 0; k < NV; ++k) c[k] = a0 * load16(y0 + k * kW), d[k] = a1 * load16(y1 + k * kW);
  for (int64_t j = j0; j < j1; ++j) {
    const auto* v = vrow(j) + off;
    const float u = p0[j], w = p1[j];
    for (int k = 0; k < NV; ++k) {
      const f32x16 x = ld16(v + k * kW);
      c[k] += u * x, d[k] += w * x;
    }
  }
  for (int k = 0; k < NV; ++k) store16(y0 + k * kW, c[k]), store16(y1 + k * kW, d[k]);
}

// y[0, NV * kW) = alpha y + sum over j in [j0, j1) of p[j] v_j (v_j = vrow(j) + off), the NV
// output vectors held in registers across the keys.
template <int NV, class VRow>
TSORCH_INLINE void pv_block(float* y, float alpha, const float* p, int64_t j0, int64_t j1, const VRow& vrow, int64_t off) {
  f32x16 acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = alpha * load16(y + k * kW);
  for (int64_t j = j0; j < j1; ++j) {
    const auto* v = vrow(j) + off;
    const float c = p[j];
    for (int k = 0; k < NV; ++k) acc[k] += c * ld16(v + k * kW);
  }
  for (int k = 0; k < NV; ++k) store16(y + k * kW, acc[k]);
}

// y[0, n) = alpha y + sum over j in [j0, j1) of p[j] vrow(j).
template <class VRow>
TSORCH_INLINE void pv_row(float* y, int64_t n, float alpha, const float* p, int64_t j0, int64_t j1, const VRow& vrow) {
  int64_t i = 0;
  for (; i + 8 * kW <= n; i += 8 * kW) pv_block<8>(y + i, alpha, p, j0, j1, vrow, i);
  if (i + 4 * kW <= n) pv_block<4>(y + i, alpha, p, j0, j1, vrow, i), i += 4 * kW;
  if (i + 2 * kW <= n) pv_block<2>(y + i, alpha, p, j0, j1, vrow, i), i += 2 * kW;
  if (i + kW <= n) pv_block<1>(y + i, alpha, p, j0, j1, vrow, i), i += kW;
  for (; i < n; ++i) {
    float acc = alpha * y[i];
    for (int64_t j = j0; j < j1; ++j) acc += p[j] * ld1(vrow(j) + i);
    y[i] = acc;
  }
}

// pv_block2 for two pairs of rows: y[0], y[1] over value rows va(j) + off, y[2], y[3] over
// vb(j) + off (two kv heads), NV = 4, so that one pass over the chunk's value rows serves both
// heads: a decode piece of 4 kv heads reads each value row in 4 passes instead of 8 (each output's
// sum in the same order as pv_block2's: the same values). The int4 Qwen3-0.6B-shaped compiled
// decode step's attention nodes, median 16.5 us against 17.9 (AMD EPYC Zen 5, 2 threads, builds
// alternating in one process); replayed alone, 0.83-0.96 of the time.
template <class VA, class VB>
TSORCH_INLINE void pv_block4(float* const* y, const float* al, const float* const* p, int64_t j0, int64_t j1, const VA& va, const VB& vb, int64_t off) {
  f32x16 c[4][4];
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 4; ++k) c[r][k] = al[r] * load16(y[r] + k * kW);
  for (int64_t j = j0; j < j1; ++j) {
    const auto* a = va(j) + off;
    const auto* b = vb(j) + off;
    const float u0 = p[0][j], u1 = p[1][j], u2 = p[2][j], u3 = p[3][j];
    for (int k = 0; k < 4; ++k) {
      const f32x16 x = ld16(a + k * kW), z = ld16(b + k * kW);
      c[0][k] += u0 * x, c[1][k] += u1 * x, c[2][k] += u2 * z, c[3][k] += u3 * z;
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 4; ++k) store16(y[r] + k * kW, c[r][k]);
}

// pv_row for two rows over the same keys [j0, j1) (n a multiple of 4 kW; else one row at a time).
template <class VRow>
TSORCH_INLINE void pv_row2(float* y0, float* y1, int64_t n, float a0, float a1, const float* p0, const float* p1, int64_t j0, int64_t j1, const VRow& vrow) {
  if (n % (4 * kW) != 0) return pv_row(y0, n, a0, p0, j0, j1, vrow), pv_row(y1, n, a1, p1, j0, j1, vrow);
  for (int64_t i = 0; i < n; i += 4 * kW) pv_block2<4>(y0 + i, y1 + i, a0, a1, p0, p1, j0, j1, vrow, i);
}

// A pool row of `dtype` as float32: the row itself (float32), or converted into `buf`.
TSORCH_INLINE const float* row_f32(const char* src, int dtype, float* buf, int64_t n) {
  if (dtype == kF32) return reinterpret_cast<const float*>(src);
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (dtype == kBF16) {
    for (; i + kW <= n; i += kW) {  // bfloat16 is the high half of a float32
      u16x16 h;
      std::memcpy(&h, s + i, sizeof h);
      const u32x16 w = __builtin_convertvector(h, u32x16) << 16;
      std::memcpy(buf + i, &w, sizeof w);
    }
    for (; i < n; ++i) buf[i] = bf16_to_f32(s[i]);
  } else {
    for (; i < n; ++i) buf[i] = f16_to_f32(s[i]);
  }
  return buf;
}

// One float32 row into a pool row of `dtype` (float32, float16 or bfloat16, rounded to nearest
// even; a NaN stays a quiet NaN).
TSORCH_ISA_CLONES
void store_row(const float* src, void* dst, int dtype, int64_t n) {
  if (dtype == kF32) {
    std::memcpy(dst, src, sizeof(float) * n);
  } else if (dtype == kBF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    int64_t i = 0;
    for (; i + kW <= n; i += kW) {
      u32x16 u;
      std::memcpy(&u, src + i, sizeof u);
      const u32x16 nan = (u & 0x7fffffffu) > 0x7f800000u;
      const u32x16 r = (nan & (u | 0x400000u)) | (~nan & (u + 0x7fffu + ((u >> 16) & 1u)));
      const u16x16 h = __builtin_convertvector(r >> 16, u16x16);
      std::memcpy(d + i, &h, sizeof h);
    }
    for (; i < n; ++i) d[i] = f32_to_bf16(src[i]);
  } else {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
  }
}

}  // namespace

void paged_kv_write(const float* k, const float* v, void* k_cache, void* v_cache, int kv_dtype,
                    const int32_t* slots, int64_t T, int64_t k_row, int64_t v_row) {
  const int64_t es = dtype_size(kv_dtype);
  char* kc = static_cast<char*>(k_cache);
  char* vc = static_cast<char*>(v_cache);
  parallel_rows(T, 4.0 * (k_row + v_row), [&](int64_t t) {
    store_row(k + t * k_row, kc + slots[t] * k_row * es, kv_dtype, k_row);
    store_row(v + t * v_row, vc + slots[t] * v_row * es, kv_dtype, v_row);
  });
}

namespace {

// Keys per online-softmax step (a multiple of 4 and of kW): a chunk's scores stay in L1.
constexpr int64_t kChunk = 64;
// Rows ahead of the one being scored that a piece of several kv heads prefetches (see run).
constexpr int64_t kAhead = 8;
// Query tokens per tile at most: consecutive positions of one sequence (a prefill chunk) share
// each key and value row read.
constexpr int64_t kTile = 8;
constexpr float kLog2e = 1.4426950408889634f;

// Query tokens [t0, t0 + nt) (one sequence, consecutive positions), kv heads [g, g + nh), keys [k0, k1).
struct Piece {
  int64_t t0, nt, g, nh, k0, k1;
};

// Key positions [lo, hi) that token t sees.
inline void key_range(const PagedAttentionArgs& a, int64_t t, int64_t* lo, int64_t* hi) {
  *hi = int64_t(a.pos[t]) + 1;
  *lo = a.window > 0 ? std::max<int64_t>(0, *hi - a.window) : 0;
}

// One piece over its R = nt * nh * group query rows (with gw = nh * group rows per token, row r:
// token t0 + r / gw, query head g * group + r % gw, of kv head g + (r % gw) / group). A piece of
// several kv heads reads each key row's heads [g, g + nh) (contiguous in the pool row) together.
// Leaves in O (row r at O + (r / gw) * ostride + (r % gw) * Dv) the
// unnormalized sum of 2^(s - m) v over the keys the row sees within [k0, k1), in m [R] the
// running max of its scores s (in log2 units: scores times log2(e)) and in l [R] the sum of
// 2^(s - m) (no key seen: m = -inf, l = 0, O = 0).
TSORCH_ISA_CLONES
void attend_piece(const PagedAttentionArgs& a, const Piece& pc, float* O, int64_t ostride, float* m, float* l) {
  const int64_t group = a.Hq / a.Hkv, D = a.D, Dv = a.Dv, nh = pc.nh, gw = nh * group, R = pc.nt * gw;
  const int64_t es = dtype_size(a.kv_dtype), kstride = a.Hkv * D * es, vstride = a.Hkv * Dv * es;
  const char* kc = static_cast<const char*>(a.k_cache) + pc.g * D * es;
  const char* vc = static_cast<const char*>(a.v_cache) + pc.g * Dv * es;
  const int32_t* table = a.tables + int64_t(a.seq[pc.t0]) * a.max_blocks;
  float* S = thread_scratch(3, R * kChunk + kChunk * nh * (D + Dv) + 2 * (kChunk + 4 * R) + R);
  float* Kb = S + R * kChunk;  // the chunk's key and value rows as float32 (converted pools only)
  float* Vb = Kb + kChunk * nh * D;
  int64_t* slot = reinterpret_cast<int64_t*>(Vb + kChunk * nh * Dv);  // the chunk's slots (pool rows)
  int64_t* lo = slot + kChunk;  // each row's key range [lo, hi)
  int64_t* hi = lo + R;
  int64_t* jr = hi + R;  // per chunk: each row's seen keys [jr[2r], jr[2r + 1]) and rescale al[r]
  float* al = reinterpret_cast<float*>(jr + 2 * R);
  const auto q_row = [&](int64_t r) { return a.q + ((pc.t0 + r / gw) * a.Hq + pc.g * group + r % gw) * D; };
  const auto o_row = [&](int64_t r) { return O + (r / gw) * ostride + (r % gw) * Dv; };
  const auto head = [&](int64_t r) { return (r % gw) / group; };  // row r's kv head, from g
  for (int64_t r = 0; r < R; ++r) {
    key_range(a, pc.t0 + r / gw, lo + r, hi + r);
    lo[r] = std::max(lo[r], pc.k0), hi[r] = std::min(hi[r], pc.k1);
    std::fill(o_row(r), o_row(r) + Dv, 0.f);
    m[r] = -std::numeric_limits<float>::infinity(), l[r] = 0.f;
  }
  const float mul = a.softcap > 0 ? a.scale / a.softcap : a.scale * kLog2e;
  const float smul = a.softcap > 0 ? 1.f : mul;  // the scale left for the vector pass
  const i32x16 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const f32x16 ninf = f32x16{} - std::numeric_limits<float>::infinity();
  // The chunk loop over rows krow(j), vrow(j) of chunk key j (in place in the pool, or float32
  // rows that `prep` converts per chunk).
  const auto run = [&](const auto& krow, const auto& vrow, const auto& prep, bool converts) __attribute__((always_inline)) {
    for (int64_t c0 = pc.k0; c0 < pc.k1; c0 += kChunk) {
      const int64_t n = std::min(kChunk, pc.k1 - c0), nv = (n + kW - 1) / kW * kW;
      for (int64_t j = 0, b = c0 / a.bs, off = c0 % a.bs; j < n; ++j) {
        slot[j] = int64_t(table[b]) * a.bs + off;
        if (++off == a.bs) off = 0, ++b;
      }
      // The chunk's rows sit a pool row apart (all kv heads interleaved): for one head's piece, ask
      // for them all now, so their cache misses overlap (keys to L1, values, used after the
      // softmax, to L2). A piece of several heads read in place reads long runs of consecutive
      // rows, which the hardware prefetchers follow (all lines prefetched measured slower there:
      // batch-1 decode, bfloat16, Zen 5); it asks for each row's first lines ahead (scores below).
      if (nh == 1 || converts) {
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < nh * D * es; i += 64) __builtin_prefetch(kc + slot[j] * kstride + i, 0, 3);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < nh * Dv * es; i += 64) __builtin_prefetch(vc + slot[j] * vstride + i, 0, 2);
      }
      prep(n);
      // Scores, four keys at a time (indices past n repeat the last key; masked below), all the
      // piece's kv heads of a key row together.
      for (int64_t j = 0; j < n; j += 4) {
        if (nh > 1 && !converts) {
          // One prefetch per row kAhead rows ahead, of its first key and value lines: starts each
          // row's (and 4 KiB page's) misses early, where the hardware prefetchers, which stop at
          // page ends, then follow (measured faster than none, and than all of a row's lines).
          const int64_t c = c0 + j;
          for (int64_t p = c == pc.k0 ? c : c + kAhead, e = std::min(c + kAhead + 4, pc.k1); p < e; ++p) {
            const int64_t sl = int64_t(table[p / a.bs]) * a.bs + p % a.bs;
            __builtin_prefetch(kc + sl * kstride, 0, 3), __builtin_prefetch(vc + sl * vstride, 0, 2);
          }
        }
        const auto *k0 = krow(j), *k1 = krow(std::min(j + 1, n - 1)), *k2 = krow(std::min(j + 2, n - 1)), *k3 = krow(std::min(j + 3, n - 1));
        for (int64_t r = 0; r < R;) {
          const int64_t h = head(r) * D;
          if (r + 1 < R && head(r + 1) * D == h) {
            dot4x2(q_row(r), q_row(r + 1), k0 + h, k1 + h, k2 + h, k3 + h, D, S + r * kChunk + j, S + (r + 1) * kChunk + j);
            r += 2;
          } else {
            dot4(q_row(r), k0 + h, k1 + h, k2 + h, k3 + h, D, S + r * kChunk + j);
            r += 1;
          }
        }
      }
      for (int64_t r = 0; r < R; ++r) {
        float* s = S + r * kChunk;
        // The keys of this chunk the row sees: [j0, j1); the other lanes get -inf, then weight 0.
        const int64_t j0 = std::clamp(lo[r] - c0, int64_t(0), n), j1 = std::clamp(hi[r] - c0, j0, n);
        jr[2 * r] = j0, jr[2 * r + 1] = j1, al[r] = 1.f;
        if (j0 == j1) continue;
        if (a.softcap > 0)
          for (int64_t j = j0; j < j1; ++j) s[j] = a.softcap * kLog2e * std::tanh(s[j] * mul);
        // Lane j is seen when j - j0 < j1 - j0 (unsigned).
        const u32x16 width = u32x16{} + uint32_t(j1 - j0);
        const i32x16 from = iota - int32_t(j0);
        f32x16 vmax = ninf;
        i32x16 idx = from;
        for (int64_t j = 0; j < nv; j += kW, idx += int32_t(kW)) {
          const i32x16 in = (u32x16)idx < width;
          const f32x16 x = (f32x16)((in & (i32x16)(load16(s + j) * smul)) | (~in & (i32x16)ninf));
          store16(s + j, x);
          vmax = vmax > x ? vmax : x;
        }
        float mx = m[r];
        for (int k = 0; k < kW; ++k) mx = vmax[k] > mx ? vmax[k] : mx;
        const float alpha = std::exp2(m[r] - mx);  // 0 on the row's first keys (m = -inf)
        f32x16 sum = {};
        idx = from;
        for (int64_t j = 0; j < nv; j += kW, idx += int32_t(kW)) {
          const i32x16 in = (u32x16)idx < width;
          const f32x16 e = (f32x16)(in & (i32x16)exp2_16(load16(s + j) - mx));
          store16(s + j, e);
          sum += e;
        }
        l[r] = l[r] * alpha + hsum(sum);
        m[r] = mx;
        al[r] = alpha;
      }
      // Weighted values, two rows at a time where they see the same keys and kv head (a token's
      // query heads of one group), two such pairs of different kv heads together where they see the
      // same keys (pv_block4).
      for (int64_t r = 0; r < R;) {
        const int64_t j0 = jr[2 * r], j1 = jr[2 * r + 1], h = head(r) * Dv;
        const auto vh = [&](int64_t j) __attribute__((always_inline)) { return vrow(j) + h; };
        const auto same = [&](int64_t q) { return jr[2 * q] == j0 && jr[2 * q + 1] == j1; };
        if (r + 3 < R && Dv % (4 * kW) == 0 && head(r + 1) == head(r) && head(r + 3) == head(r + 2) && head(r + 2) != head(r) &&
            same(r + 1) && same(r + 2) && same(r + 3)) {
          const int64_t h2 = head(r + 2) * Dv;
          const auto vh2 = [&](int64_t j) __attribute__((always_inline)) { return vrow(j) + h2; };
          float* ys[4] = {o_row(r), o_row(r + 1), o_row(r + 2), o_row(r + 3)};
          const float* ps[4] = {S + r * kChunk, S + (r + 1) * kChunk, S + (r + 2) * kChunk, S + (r + 3) * kChunk};
          if (j0 < j1)
            for (int64_t i = 0; i < Dv; i += 4 * kW) {
              float* yi[4] = {ys[0] + i, ys[1] + i, ys[2] + i, ys[3] + i};
              pv_block4(yi, al + r, ps, j0, j1, vh, vh2, i);
            }
          r += 4;
        } else if (r + 1 < R && head(r + 1) * Dv == h && same(r + 1)) {
          if (j0 < j1) pv_row2(o_row(r), o_row(r + 1), Dv, al[r], al[r + 1], S + r * kChunk, S + (r + 1) * kChunk, j0, j1, vh);
          r += 2;
        } else {
          if (j0 < j1) pv_row(o_row(r), Dv, al[r], S + r * kChunk, j0, j1, vh);
          r += 1;
        }
      }
    }
  };
  const auto none = [](int64_t) {};
  if (a.kv_dtype == kF32) {
    run([&](int64_t j) { return reinterpret_cast<const float*>(kc + slot[j] * kstride); },
        [&](int64_t j) { return reinterpret_cast<const float*>(vc + slot[j] * vstride); }, none, false);
  } else if (a.kv_dtype == kBF16 && pc.nt * group <= 4 && runs_v4_clones()) {  // few query rows per kv head: widen each bfloat16 row in registers
    run([&](int64_t j) { return reinterpret_cast<const Bf16Zmm*>(kc + slot[j] * kstride); },
        [&](int64_t j) { return reinterpret_cast<const Bf16Zmm*>(vc + slot[j] * vstride); }, none, false);
  } else if (a.kv_dtype == kBF16 && pc.nt * group <= 4) {
    run([&](int64_t j) { return reinterpret_cast<const uint16_t*>(kc + slot[j] * kstride); },
        [&](int64_t j) { return reinterpret_cast<const uint16_t*>(vc + slot[j] * vstride); }, none, false);
  } else {  // float16, or many query rows: convert the chunk's rows once
    run([&](int64_t j) { return static_cast<const float*>(Kb + j * nh * D); },
        [&](int64_t j) { return static_cast<const float*>(Vb + j * nh * Dv); },
        [&](int64_t n) {
          for (int64_t j = 0; j < n; ++j) {
            row_f32(kc + slot[j] * kstride, a.kv_dtype, Kb + j * nh * D, nh * D);
            row_f32(vc + slot[j] * vstride, a.kv_dtype, Vb + j * nh * Dv, nh * Dv);
          }
        }, true);
  }
}

// Keys per piece at least, when a tile's keys are split over the pool.
constexpr int64_t kMinSplit = 256;

}  // namespace

void paged_attention(const PagedAttentionArgs& a) {
  const int64_t group = a.Hq / a.Hkv, Dv = a.Dv;
  ThreadPool& pool = ThreadPool::get();
  // Tiles: runs of up to kTile tokens of one sequence at consecutive positions, and their keys.
  std::vector<Piece> tiles;
  double work = 0;
  int64_t longest = 0;
  for (int64_t t = 0; t < a.T; ++t) {
    int64_t lo, hi;
    key_range(a, t, &lo, &hi);
    work += 2.0 * a.Hq * (hi - lo) * (a.D + a.Dv);
    Piece* last = tiles.empty() ? nullptr : &tiles.back();
    if (last && last->nt < kTile && a.seq[t] == a.seq[t - 1] && a.pos[t] == a.pos[t - 1] + 1) {
      ++last->nt, last->k0 = std::min(last->k0, lo), last->k1 = std::max(last->k1, hi);
    } else {
      tiles.push_back({t, 1, 0, 1, lo, hi});
    }
    longest = std::max(longest, tiles.back().k1 - tiles.back().k0);
  }
  int64_t max_nt = 1;
  for (const Piece& t : tiles) max_nt = std::max(max_nt, t.nt);
  const int64_t threads = split_count(work, pool.size()), ntiles = int64_t(tiles.size());
  // Kv heads per piece: where each kv head has few query rows (decode steps) and the rows are read
  // in place (float32, bfloat16), a piece takes several heads, so that a thread reads whole
  // contiguous runs of each key row (a batch-1 step of 8 kv heads on 2 threads: 4 heads, half a
  // row, each), as many as still leave a unit per thread.
  int64_t nh = 1;
  if (max_nt * group <= 4 && (a.kv_dtype == kF32 || a.kv_dtype == kBF16))
    while (a.Hkv % (2 * nh) == 0 && ntiles * (a.Hkv / (2 * nh)) >= threads) nh *= 2;
  const int64_t hunits = a.Hkv / nh, units = ntiles * hunits, gw = nh * group;
  // Splits of each unit's keys: enough pieces for ~4 per thread, each of >= kMinSplit keys.
  const int64_t splits =
      threads == 1 ? 1 : std::max<int64_t>(1, std::min((4 * threads + units - 1) / units, longest / kMinSplit));
  const auto piece = [&](int64_t u, int64_t p) {
    Piece pc = tiles[u / hunits];
    pc.g = (u % hunits) * nh, pc.nh = nh;
    const int64_t n = pc.k1 - pc.k0, k0 = pc.k0;
    pc.k0 = k0 + n * p / splits, pc.k1 = k0 + n * (p + 1) / splits;
    return pc;
  };
  const auto out_of = [&](const Piece& pc) { return a.out + (pc.t0 * a.Hq + pc.g * group) * Dv; };
  if (splits == 1) {
    // One piece per unit, accumulated straight into its output rows, then normalized.
    const auto task = [&](int64_t u) {
      const Piece pc = piece(u, 0);
      const int64_t R = pc.nt * gw;
      float* ml = thread_scratch(2, 2 * R);
      float* O = out_of(pc);
      attend_piece(a, pc, O, a.Hq * Dv, ml, ml + R);
      for (int64_t r = 0; r < R; ++r) {
        const float inv = 1.f / ml[R + r];
        for (float *y = O + (r / gw) * a.Hq * Dv + (r % gw) * Dv, *e = y + Dv; y < e; ++y) *y *= inv;
      }
    };
    if (threads == 1) {
      for (int64_t u = 0; u < units; ++u) task(u);
    } else {
      pool.parallel_for(units, task);
    }
    return;
  }
  // Flash-decoding: piece p of a unit takes its keys [k0 + n p / P, k0 + n (p + 1) / P); each
  // piece leaves (O, m, l) in `parts`, and the merge rescales them to each row's largest m.
  const int64_t Rmax = max_nt * gw, per = Rmax * (Dv + 2);
  std::vector<float> parts(static_cast<size_t>(units * splits * per));
  pool.parallel_for(units * splits, [&](int64_t i) {
    float* P = parts.data() + i * per;
    attend_piece(a, piece(i / splits, i % splits), P, gw * Dv, P + Rmax * Dv, P + Rmax * Dv + Rmax);
  });
  pool.parallel_for(units, [&](int64_t u) {
    const Piece pc = piece(u, 0);
    for (int64_t r = 0; r < pc.nt * gw; ++r) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t p = 0; p < splits; ++p) mx = std::max(mx, parts[(u * splits + p) * per + Rmax * Dv + r]);
      float* O = out_of(pc) + (r / gw) * a.Hq * Dv + (r % gw) * Dv;
      std::fill(O, O + Dv, 0.f);
      float l = 0;
      for (int64_t p = 0; p < splits; ++p) {
        const float* P = parts.data() + (u * splits + p) * per;
        const float pl = P[Rmax * Dv + Rmax + r];
        if (pl == 0) continue;  // a piece with none of the row's keys
        const float c = std::exp2(P[Rmax * Dv + r] - mx);
        l += c * pl;
        for (int64_t i = 0; i < Dv; ++i) O[i] += c * P[r * Dv + i];
      }
      const float inv = 1.f / l;
      for (int64_t i = 0; i < Dv; ++i) O[i] *= inv;
    }
  });
}

}  // namespace tsorch
