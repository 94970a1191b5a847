// bfloat16 GEMM with AVX512-BF16's vdpbf16ps, for linears with bfloat16 weights at M >= 2
// (prefill, batched decode). Numerics: A is rounded to bfloat16 (nearest even) before the product,
// as PyTorch's bfloat16 models compute (activations are bfloat16 there); products of pairs are
// summed in float32 (vdpbf16ps flushes denormals). Compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512bf16 -mfma (binding.gyp target tsorch_gemm_avx512bf16). Internal linkage and no
// standard-library templates (see gemm_impl.h).
//
// Layout: the weights W [N, K] stay as stored (row n contiguous in k, so a pair of k is one 32-bit
// word) and are read by broadcasts; the activations, which are few rows, are packed once per call
// (pack_a) so that one zmm holds the same k-pair of 16 rows. The micro-kernel then computes
// C^T tiles: acc[j][v] (16 lanes = rows of A) += dot(pair of A rows, broadcast pair of W row n+j),
// with no shuffle in the loop. Rows of A are packed in blocks of up to 32 (kBlock); a block of
// fewer than 16 rows spreads S = 2, 4 or 8 consecutive k-pairs over the lanes of one row, so that
// the lanes stay busy (lane l = row l / S, pair l % S; the S partial sums are added at the end).
//
// Up to kStreamMaxM rows (batched decode), the kernel instead streams W: the activations are
// packed as plain bfloat16 rows (pack_rows) and each group of R weight rows is read once, a cache
// line (32 values of k) per row at a time, into R * MB accumulators against MB rows of A (from L1),
// summed across lanes at the end (stream_tile). The tiled layout above (then with tiles of 24
// weight rows) read W by 24 broadcast streams of 8 bytes per step, which at M <= 16 left the weight
// reads, not the dot products, the limit (one core: 15.7 GB/s at M = 8 against 23.5 GB/s for the
// float32 GEMV at M = 1).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "gemm.h"
#include "gemm_kernels.h"

namespace tsorch {
namespace {

constexpr int64_t kBlock = 32;  // rows of A per packed block (at most 2 vectors)
constexpr int64_t kStreamMaxM = 16;  // rows of A up to which gemm_packed streams W (stream_cols)
constexpr int64_t kStreamMB = 8;     // rows of A per stream_tile
// Bytes of packed A per group of rows, so that it stays in L1 with the weight lines: M = 8 at
// K = 3072 (the MLP's down projection) in two groups of 4 read W at 16.4 against 14.4 GB/s.
constexpr int64_t kStreamABytes = 32 << 10;

// bfloat16 values per row of A packed by pack_rows: K rounded up to a cache line (32).
int64_t stream_ld(int64_t K) { return (K + 31) / 32 * 32; }

struct BlockShape {
  int s;    // k-pairs per lane group
  int mv;   // zmm vectors per step
  int64_t steps;  // steps of 2*s values of k
};

BlockShape shape_of(int64_t mb, int64_t K) {
  const int s = mb <= 2 ? 8 : mb <= 4 ? 4 : mb <= 8 ? 2 : 1;
  const int mv = s > 1 ? 1 : static_cast<int>((mb + 15) / 16);
  return BlockShape{s, mv, (K + 2 * s - 1) / (2 * s)};
}

// uint32 words of one block of mb rows.
int64_t block_words(int64_t mb, int64_t K) {
  const BlockShape b = shape_of(mb, K);
  return b.steps * b.mv * 16;
}

int64_t packed_words(int64_t M, int64_t K) {
  if (M <= kStreamMaxM) return M * stream_ld(K) / 2;
  return M / kBlock * block_words(kBlock, K) + (M % kBlock ? block_words(M % kBlock, K) : 0);
}

uint16_t to_bf16_bits(float x) {
  return static_cast<uint16_t>(_mm_cvtsi128_si32(reinterpret_cast<__m128i>(_mm_cvtneps_pbh(_mm_set1_ps(x)))));
}

// Rows [0, mb) of A -> one packed block of S pairs per lane group and MV vectors per step.
template <int S>
void pack_block(const float* A, int64_t lda, int64_t mb, int64_t K, int mv, uint32_t* out) {
  constexpr int kRows = 16 / S;  // rows of A per vector
  const int64_t pairs = (K + 1) / 2;
  for (int64_t m = 0; m < mb; ++m) {
    const float* a = A + m * lda;
    uint32_t* o = out + (m / kRows) * 16 + (m % kRows) * S;  // vector m / kRows, lane group
    const int64_t step = mv * 16;  // words between steps
    int64_t p = 0;
    // 16 pairs at a time: convert 32 floats, then place the words.
    for (; 2 * p + 32 <= K; p += 16) {
      const __m512i w = reinterpret_cast<__m512i>(
          _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + 2 * p + 16), _mm512_loadu_ps(a + 2 * p)));
      if constexpr (S == 1) {
        // Word i goes to o[(p + i) * step]: a scatter with a constant index vector.
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(static_cast<int>(step)));
        _mm512_i32scatter_epi32(o + p * step, idx, w, 4);
      } else {
        alignas(64) uint32_t ws[16];
        _mm512_store_si512(ws, w);
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i += S)
          std::memcpy(o + ((p + i) / S) * step, ws + i, S * 4);
      }
    }
    for (; p < pairs; ++p) {
      const uint32_t lo = to_bf16_bits(a[2 * p]);
      const uint32_t hi = 2 * p + 1 < K ? to_bf16_bits(a[2 * p + 1]) : 0;
      o[(p / S) * step + p % S] = lo | hi << 16;
    }
  }
}

// A [M, K] float32 -> M rows of stream_ld(K) bfloat16 (nearest even), zero padded.
void pack_rows(const float* A, int64_t lda, int64_t M, int64_t K, uint16_t* out) {
  const int64_t ld = stream_ld(K);
  for (int64_t m = 0; m < M; ++m) {
    const float* a = A + m * lda;
    uint16_t* o = out + m * ld;
    for (int64_t k = 0; k < ld; k += 32) {
      const int64_t left = K - k;
      const __mmask16 lo = left >= 16 ? 0xFFFF : left > 0 ? static_cast<__mmask16>((1u << left) - 1) : 0;
      const __mmask16 hi = left >= 32 ? 0xFFFF : left > 16 ? static_cast<__mmask16>((1u << (left - 16)) - 1) : 0;
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, a + k + 16), _mm512_maskz_loadu_ps(lo, a + k));
      _mm512_store_si512(o + k, reinterpret_cast<__m512i>(v));
    }
  }
}

// A [M, K] float32 -> packed bfloat16 (see the layouts above); `out` has packed_words(M, K).
void pack_a(const float* A, int64_t lda, int64_t M, int64_t K, uint32_t* out) {
  if (M <= kStreamMaxM) return pack_rows(A, lda, M, K, reinterpret_cast<uint16_t*>(out));
  for (int64_t m0 = 0; m0 < M; m0 += kBlock) {
    const int64_t mb = M - m0 < kBlock ? M - m0 : kBlock;
    const BlockShape b = shape_of(mb, K);
    const int64_t words = b.steps * b.mv * 16;
    std::memset(out, 0, static_cast<size_t>(words) * 4);
    const float* a = A + m0 * lda;
    if (b.s == 8) pack_block<8>(a, lda, mb, K, b.mv, out);
    else if (b.s == 4) pack_block<4>(a, lda, mb, K, b.mv, out);
    else if (b.s == 2) pack_block<2>(a, lda, mb, K, b.mv, out);
    else pack_block<1>(a, lda, mb, K, b.mv, out);
    out += words;
  }
}

// S consecutive k-pairs (4*S bytes) of a weight row, repeated over the 16 lanes.
template <int S>
__m512i broadcast(const uint16_t* p) {
  if constexpr (S == 1) {
    int32_t x;
    std::memcpy(&x, p, 4);
    return _mm512_set1_epi32(x);
  } else if constexpr (S == 2) {
    int64_t x;
    std::memcpy(&x, p, 8);
    return _mm512_set1_epi64(x);
  } else if constexpr (S == 4) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
}

// Steps [t0, t1) of one packed block times weight rows n .. n+NR-1: the tile's float32 sums T
// ([NR][MV*16]) start from zero (t0 == 0) or from T, and go back to T.
//
// PF (the first block of rows over a panel, which reads W from memory; later blocks find it in
// L2): as each line of the tile's rows is begun, the line kAhead lines further along the stream of
// this tile's rows, then of the next tile's, is prefetched (a prefetch past the matrix never
// faults; short chunks and a panel's last tile prefetch lines that are not next), so that the
// tile's row streams stay ahead of the dot products. Measured with tiles of 12 weight rows on AMD
// EPYC Zen 5, 2 threads, M = 32 (a 32-token prefill), W from DRAM, the builds alternating in one
// process: K = 1024, N = 4096 / 6144 0.82-0.89 / 0.78-0.90 of the time; K = 2048 / 3072, N = 1024
// 0.95 / 0.96-0.99; M = 512 unchanged; the Qwen3-0.6B-shaped prefill's recorded calls 0.92
// (linearGroup 0.87). Distances 2 and 4 lines: no better. Prefetching the next tile's rows at the
// current line instead lost at row strides of 4 KB multiples (K = 2048, 4096: 1.07-1.27), whose 24
// lines share one L1 set.
template <int S, int MV, int NR, bool PF>
void tile(const uint32_t* P, int64_t t0, int64_t t1, int64_t steps, int64_t K, const uint16_t* W,
          int64_t ldw, float* T, int64_t n) {
  __m512 acc[NR][MV];
  _Pragma("GCC unroll 32") for (int j = 0; j < NR; ++j)
    _Pragma("GCC unroll 4") for (int v = 0; v < MV; ++v)
      acc[j][v] = t0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(T + (j * MV + v) * 16);
  const uint16_t* w = W + n * ldw;
  const int64_t full = K / (2 * S);  // steps whose k all lie inside K
  const int64_t tf = t1 < full ? t1 : full;
  constexpr int64_t kLineSteps = 16 / S;  // steps per 64-byte line of a weight row
  constexpr int64_t kAhead = 8;
  for (int64_t t = t0; t < tf; ++t) {
    __m512bh a[MV];
    _Pragma("GCC unroll 4") for (int v = 0; v < MV; ++v)
      a[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(P + (t * MV + v) * 16));
    if (PF && t % kLineSteps == 0) {
      const int64_t ahead = t + kAhead * kLineSteps;
      const uint16_t* p = ahead < tf ? w + ahead * 2 * S : w + NR * ldw + (t0 + ahead - tf) * 2 * S;
      _Pragma("GCC unroll 32") for (int j = 0; j < NR; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(p + j * ldw), _MM_HINT_T0);
    }
    _Pragma("GCC unroll 32") for (int j = 0; j < NR; ++j) {
      const __m512bh b = reinterpret_cast<__m512bh>(broadcast<S>(w + j * ldw + t * 2 * S));
      _Pragma("GCC unroll 4") for (int v = 0; v < MV; ++v) acc[j][v] = _mm512_dpbf16_ps(acc[j][v], a[v], b);
    }
  }
  if (t1 == steps && full < steps) {  // the last, partial step: the rest of each row, zero padded
    const int64_t k0 = full * 2 * S;
    __m512bh a[MV];
    _Pragma("GCC unroll 4") for (int v = 0; v < MV; ++v)
      a[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(P + (full * MV + v) * 16));
    for (int j = 0; j < NR; ++j) {
      uint16_t rest[16] = {};
      std::memcpy(rest, w + j * ldw + k0, static_cast<size_t>(K - k0) * 2);
      const __m512bh b = reinterpret_cast<__m512bh>(broadcast<S>(rest));
      for (int v = 0; v < MV; ++v) acc[j][v] = _mm512_dpbf16_ps(acc[j][v], a[v], b);
    }
  }
  _Pragma("GCC unroll 32") for (int j = 0; j < NR; ++j)
    _Pragma("GCC unroll 4") for (int v = 0; v < MV; ++v) _mm512_store_ps(T + (j * MV + v) * 16, acc[j][v]);
}

// Columns [n0, n1) of one packed block of mb rows, in chunks of steps whose packed A stays in L1
// (32 KiB): every column tile of NR (then narrower tails) per chunk, summing into T
// ([n1 - n0][MV*16] floats); then T, transposed, to C (+ bias).
template <int S, int MV, int NR, bool PF>
void block_cols(const uint32_t* P, int64_t steps, int64_t mb, int64_t K, const uint16_t* W,
                int64_t ldw, float* T, const float* bias, float* C, int64_t ldc, int64_t n0,
                int64_t n1) {
  constexpr int64_t kChunk = 512 / MV;
  constexpr int kStride = MV * 16;  // floats of T per column
  for (int64_t t0 = 0; t0 < steps; t0 += kChunk) {
    const int64_t t1 = t0 + kChunk < steps ? t0 + kChunk : steps;
    int64_t n = n0;
    for (; n + NR <= n1; n += NR) tile<S, MV, NR, PF>(P, t0, t1, steps, K, W, ldw, T + (n - n0) * kStride, n);
    if constexpr (NR > 4) {
      for (; n + 4 <= n1; n += 4) tile<S, MV, 4, PF>(P, t0, t1, steps, K, W, ldw, T + (n - n0) * kStride, n);
    }
    for (; n < n1; ++n) tile<S, MV, 1, PF>(P, t0, t1, steps, K, W, ldw, T + (n - n0) * kStride, n);
  }
  // Row m of the block is lane group m % (16 / S) of vector m / (16 / S).
  constexpr int kRows = 16 / S;
  for (int64_t c0 = n0; c0 < n1; c0 += 16) {
    const int64_t c1 = c0 + 16 < n1 ? c0 + 16 : n1;
    for (int64_t m = 0; m < mb; ++m) {
      const float* t = T + (c0 - n0) * kStride + (m / kRows) * 16 + (m % kRows) * S;
      float* c = C + m * ldc;
      for (int64_t n = c0; n < c1; ++n, t += kStride) {
        float s = t[0];
        for (int i = 1; i < S; ++i) s += t[i];
        c[n] = s + (bias ? bias[n] : 0.f);
      }
    }
  }
}

// C[m, n + r] (+ bias) for m < MB, r < R: rows n .. n+R-1 of W, each read once in cache lines of
// 32 values, against MB rows of A packed by pack_rows (row stride ld, zero padded); the last,
// partial line of each W row is read under a mask.
template <int R, int MB>
void stream_tile(const uint16_t* A, int64_t ld, int64_t K, const uint16_t* W, int64_t ldw,
                 const float* bias, float* C, int64_t ldc, int64_t n) {
  __m512 acc[R][MB];
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r)
    _Pragma("GCC unroll 8") for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
  const uint16_t* w = W + n * ldw;
  const int64_t full = K / 32 * 32;
  for (int64_t k = 0; k < full; k += 32) {
    __m512bh b[R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
      b[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + r * ldw + k));
      // The next tile's rows, one line per row and step (a prefetch past the matrix never faults):
      // the hardware prefetcher alone left the dot products waiting on these reads.
      _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * ldw + k), _MM_HINT_T0);
    }
    _Pragma("GCC unroll 8") for (int m = 0; m < MB; ++m) {
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_load_si512(A + m * ld + k));
      _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], a, b[r]);
    }
  }
  if (full < K) {
    const __mmask32 mask = static_cast<__mmask32>((1ull << (K - full)) - 1);
    __m512bh b[R];
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r)
      b[r] = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, w + r * ldw + full));
    _Pragma("GCC unroll 8") for (int m = 0; m < MB; ++m) {
      const __m512bh a = reinterpret_cast<__m512bh>(_mm512_load_si512(A + m * ld + full));
      _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], a, b[r]);
    }
  }
  _Pragma("GCC unroll 8") for (int m = 0; m < MB; ++m)
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r)
      C[m * ldc + n + r] = _mm512_reduce_add_ps(acc[r][m]) + (bias ? bias[n + r] : 0.f);
}

// Columns [n0, n1) for MB rows of A: tiles of R weight rows, then single rows.
template <int R, int MB>
void stream_rows(const uint16_t* A, int64_t ld, int64_t K, const uint16_t* W, int64_t ldw,
                 const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + R <= n1; n += R) stream_tile<R, MB>(A, ld, K, W, ldw, bias, C, ldc, n);
  for (; n < n1; ++n) stream_tile<1, MB>(A, ld, K, W, ldw, bias, C, ldc, n);
}

// Columns [n0, n1) of C for M <= kStreamMaxM rows packed by pack_rows. With more than one group
// of rows (above kStreamMB rows or kStreamABytes of A), in panels of 12 weight rows (24-72 KiB:
// they stay in L1/L2) over which each group passes, so that W is read from memory once.
void stream_cols(const uint16_t* A, int64_t M, int64_t K, const uint16_t* W, int64_t ldw,
                 const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t ld = stream_ld(K);
  // Groups of at most kStreamMB rows and kStreamABytes of packed A, which each tile rereads.
  const int64_t by_rows = (M + kStreamMB - 1) / kStreamMB, by_bytes = (M * ld * 2 + kStreamABytes - 1) / kStreamABytes;
  const int64_t groups = by_rows > by_bytes ? by_rows : by_bytes;
  const int64_t panel = groups == 1 ? n1 - n0 : 12;
  for (int64_t p0 = n0; p0 < n1; p0 += panel) {
    const int64_t p1 = p0 + panel < n1 ? p0 + panel : n1;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t m0 = M * g / groups, mb = M * (g + 1) / groups - m0;
      const uint16_t* a = A + m0 * ld;
      float* c = C + m0 * ldc;
      // R * MB accumulators (at most 24 of the 32 zmm); more weight rows in flight when MB is small.
      switch (mb) {
        case 1: stream_rows<8, 1>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        case 2: stream_rows<8, 2>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        case 3: stream_rows<8, 3>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        case 4: stream_rows<6, 4>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        case 5: stream_rows<4, 5>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        case 6: stream_rows<4, 6>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        case 7: stream_rows<3, 7>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
        default: stream_rows<3, 8>(a, ld, K, W, ldw, bias, c, ldc, p0, p1); break;
      }
    }
  }
}

// Columns [n0, n1) of C from A packed by pack_a, in panels of kPanel columns whose weights
// (kPanel rows of W) stay in L2 while every block of rows of A passes over them. Uses
// thread_scratch(0).
void gemm_packed(const uint32_t* P0, int64_t M, int64_t K, const uint16_t* W, int64_t ldw,
                 const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  constexpr int64_t kPanel = 96;  // a multiple of both column tiles (8, 16)
  if (n1 <= n0) return;
  if (M <= kStreamMaxM) return stream_cols(reinterpret_cast<const uint16_t*>(P0), M, K, W, ldw, bias, C, ldc, n0, n1);
  float* T = thread_scratch(0, static_cast<size_t>(kPanel * kBlock));  // MV <= kBlock / 16
  for (int64_t p0 = n0; p0 < n1; p0 += kPanel) {
    const int64_t p1 = p0 + kPanel < n1 ? p0 + kPanel : n1;
    const uint32_t* P = P0;
    for (int64_t m0 = 0; m0 < M; m0 += kBlock) {
      const int64_t mb = M - m0 < kBlock ? M - m0 : kBlock;
      const BlockShape b = shape_of(mb, K);
      float* c = C + m0 * ldc;
      // Register tiles of NR * MV accumulators, 16 of the 32 zmm: 8 weight rows for two vectors of
      // activation rows, 16 for one. (With 12 and 24, the M = 32 prefill GEMMs took 1.03-1.14x the
      // time, K = 1024-4096, and with a block of 1-16 rows after the first (M = 33, 40, 48)
      // 1.03-1.27x; AMD EPYC Zen 5, builds alternating: that many row streams crowd L1, and the
      // loop's addresses did not fit the registers.) The first block, which reads W from memory,
      // prefetches it (tile's PF); it has min(M, kBlock) > kStreamMaxM rows: S = 1, MV = 2.
      static_assert(kStreamMaxM >= 16 && kBlock == 32, "the first block takes block_cols<1, 2, 8>");
      if (m0 == 0) block_cols<1, 2, 8, true>(P, b.steps, mb, K, W, ldw, T, bias, c, ldc, p0, p1);
      else if (b.s == 8) block_cols<8, 1, 16, false>(P, b.steps, mb, K, W, ldw, T, bias, c, ldc, p0, p1);
      else if (b.s == 4) block_cols<4, 1, 16, false>(P, b.steps, mb, K, W, ldw, T, bias, c, ldc, p0, p1);
      else if (b.s == 2) block_cols<2, 1, 16, false>(P, b.steps, mb, K, W, ldw, T, bias, c, ldc, p0, p1);
      else if (b.mv == 1) block_cols<1, 1, 16, false>(P, b.steps, mb, K, W, ldw, T, bias, c, ldc, p0, p1);
      else block_cols<1, 2, 8, false>(P, b.steps, mb, K, W, ldw, T, bias, c, ldc, p0, p1);
      P += b.steps * b.mv * 16;
    }
  }
}

// Single-threaded: pack A into thread_scratch(3), then gemm_packed.
void gemm_nt(const float* A, int64_t lda, int64_t M, int64_t K, const uint16_t* W, int64_t ldw,
             const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  uint32_t* P = reinterpret_cast<uint32_t*>(thread_scratch(3, static_cast<size_t>(packed_words(M, K))));
  pack_a(A, lda, M, K, P);
  gemm_packed(P, M, K, W, ldw, bias, C, ldc, n0, n1);
}

}  // namespace

// The AVX512-BF16 GEMM (see gemm_kernels.h).
const Bf16GemmKernels& gemm_kernels_avx512bf16() {
  static const Bf16GemmKernels kernels{"avx512-bf16", gemm_nt, packed_words, pack_a, gemm_packed};
  return kernels;
}

}  // namespace tsorch
