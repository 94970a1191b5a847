// The GEMM/GEMV kernels, written once against a vector-traits class V (simd_portable.h,
// simd_avx2.h, simd_avx512.h) and instantiated by one translation unit per instruction set.
//
// Everything here has internal linkage and uses no standard-library templates: the per-ISA
// translation units are compiled with different -m flags, and a shared (weak) instantiation could
// otherwise be resolved to a copy containing instructions the running CPU lacks.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <numeric>

#include "dtype.h"
#include "gemm_kernels.h"
#include "prefetch.h"

namespace tsorch {
namespace {

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

// Loading element i of a float32 / float16 / bfloat16 array as float32, as a vector or a scalar.
template <class V, int DT>
struct Load;
template <class V>
struct Load<V, kF32> {
  static typename V::vf vec(const void* p, int64_t i) { return V::load(static_cast<const float*>(p) + i); }
  static float one(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};
template <class V>
struct Load<V, kBF16> {
  static typename V::vf vec(const void* p, int64_t i) { return V::load_bf16(static_cast<const uint16_t*>(p) + i); }
  static float one(const void* p, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(p)[i]); }
};
template <class V>
struct Load<V, kF16> {
  static typename V::vf vec(const void* p, int64_t i) { return V::load_f16(static_cast<const uint16_t*>(p) + i); }
  static float one(const void* p, int64_t i) { return f16_to_f32(static_cast<const uint16_t*>(p)[i]); }
};

// ---------------------------------------------------------------------------------------------
// Direct kernel, B rows contiguous in k (C = A @ W^T): a DM x DN block of dot products (DM rows of
// A against DN rows of W), each kept in NA vector accumulators (so that at least 8 independent FMA
// chains hide the FMA latency) and reduced horizontally at the end. W is converted to float32 in
// registers.
//
// A single row of A (M = 1, decode) takes one row of W at a time (DN = 1): W is then read strictly
// in address order, a single stream, which the hardware prefetcher follows at close to the DRAM
// bandwidth from one core (measured on Zen 4: ~27 GB/s, against ~13 GB/s for four interleaved row
// streams, with or without software prefetch), helped by a software prefetch ahead (prefetch.h).
// With several rows of A the kernel is bound by loads and FMAs rather than by DRAM, and blocks of
// DN rows of W (each converted vector reused DM times) win; those interleaved streams do need the
// software prefetch below.
// ---------------------------------------------------------------------------------------------
template <class V, int DT, int DM, int DN>
void gemv_nt_block(const float* A, int64_t lda, int64_t K, const void* W, int64_t ldw, int64_t n,
                   const float* bias, float* C, int64_t ldc) {
  using vf = typename V::vf;
  using L = Load<V, DT>;
  constexpr int NA = DM * DN >= 8 ? 1 : 8 / (DM * DN);
  constexpr int64_t kWBytes = DT == kF32 ? 4 : 2;
  vf acc[DM][DN][NA];
#pragma GCC unroll 16
  for (int i = 0; i < DM; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < DN; ++j)
#pragma GCC unroll 16
      for (int a = 0; a < NA; ++a) acc[i][j][a] = V::zero();
  // Interleaved rows (DN > 1): fetch them ~16 KB ahead (at least two blocks), since the hardware
  // prefetcher does not get far enough ahead of DN streams, least of all when rows are short
  // (keys of one head: K = head_dim). Integer arithmetic: that address may lie past the end of W,
  // which a prefetch tolerates.
  const int64_t row_bytes = ldw * kWBytes;
  const int64_t rows_ahead = row_bytes == 0 || row_bytes * 2 * DN >= 16384 ? 2 * DN : 16384 / row_bytes;
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(W) + (n + rows_ahead) * row_bytes;
  int64_t k = 0;
  for (; k + NA * V::W <= K; k += NA * V::W) {
#pragma GCC unroll 16
    for (int a = 0; a < NA; ++a) {
      vf w[DN];
      // One row of W (decode): prefetch_ahead on each 64-byte line (prefetch.h: one line in 32).
      if (DN == 1 && a * V::W * kWBytes % 64 == 0)
        prefetch_ahead(W, (n * ldw + k + a * V::W) * kWBytes + kDecodePrefetchBytes);
#pragma GCC unroll 16
      for (int j = 0; j < DN; ++j) {
        if (DN > 1)
          __builtin_prefetch(reinterpret_cast<const void*>(ahead + (j * ldw + k + a * V::W) * kWBytes));
        w[j] = L::vec(W, (n + j) * ldw + k + a * V::W);
      }
#pragma GCC unroll 16
      for (int i = 0; i < DM; ++i) {
        const vf x = V::load(A + i * lda + k + a * V::W);
#pragma GCC unroll 16
        for (int j = 0; j < DN; ++j) acc[i][j][a] = V::fma(x, w[j], acc[i][j][a]);
      }
    }
  }
  for (; k + V::W <= K; k += V::W) {
#pragma GCC unroll 16
    for (int j = 0; j < DN; ++j) {
      const vf w = L::vec(W, (n + j) * ldw + k);
#pragma GCC unroll 16
      for (int i = 0; i < DM; ++i) acc[i][j][0] = V::fma(V::load(A + i * lda + k), w, acc[i][j][0]);
    }
  }
  for (int i = 0; i < DM; ++i) {
    for (int j = 0; j < DN; ++j) {
#pragma GCC unroll 16
      for (int a = 1; a < NA; ++a) acc[i][j][0] = V::add(acc[i][j][0], acc[i][j][a]);
      float s = V::hsum(acc[i][j][0]);
      for (int64_t kk = k; kk < K; ++kk) s += A[i * lda + kk] * L::one(W, (n + j) * ldw + kk);
      C[i * ldc + n + j] = bias ? s + bias[n + j] : s;
    }
  }
}

// Rows [m, m + mb) with mb <= DM: picks the instantiation for mb.
template <class V, int DT, int DM, int DN>
void gemv_nt_rows(int64_t mb, const float* A, int64_t lda, int64_t K, const void* W, int64_t ldw,
                  int64_t n, const float* bias, float* C, int64_t ldc) {
  if constexpr (DM > 1) {
    if (mb < DM) return gemv_nt_rows<V, DT, DM - 1, DN>(mb, A, lda, K, W, ldw, n, bias, C, ldc);
  }
  gemv_nt_block<V, DT, DM, DN>(A, lda, K, W, ldw, n, bias, C, ldc);
}

template <class V, int DT>
void gemv_nt_dt(const float* A, int64_t lda, int64_t M, int64_t K, const void* W, int64_t ldw,
                const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (M == 1) {
    for (; n < n1; ++n) gemv_nt_block<V, DT, 1, 1>(A, lda, K, W, ldw, n, bias, C, ldc);
    return;
  }
  for (; n + V::DN <= n1; n += V::DN)
    for (int64_t m = 0; m < M; m += V::DM)
      gemv_nt_rows<V, DT, V::DM, V::DN>(imin(V::DM, M - m), A + m * lda, lda, K, W, ldw, n, bias,
                                        C + m * ldc, ldc);
  for (; n < n1; ++n)
    for (int64_t m = 0; m < M; m += V::DM)
      gemv_nt_rows<V, DT, V::DM, 1>(imin(V::DM, M - m), A + m * lda, lda, K, W, ldw, n, bias,
                                    C + m * ldc, ldc);
}

template <class V>
void gemv_nt(const float* A, int64_t lda, int64_t M, int64_t K, const void* W, int wdtype,
             int64_t ldw, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  switch (wdtype) {
    case kF32: return gemv_nt_dt<V, kF32>(A, lda, M, K, W, ldw, bias, C, ldc, n0, n1);
    case kF16: return gemv_nt_dt<V, kF16>(A, lda, M, K, W, ldw, bias, C, ldc, n0, n1);
    default: return gemv_nt_dt<V, kBF16>(A, lda, M, K, W, ldw, bias, C, ldc, n0, n1);
  }
}

// ---------------------------------------------------------------------------------------------
// Direct kernel, B rows contiguous in n (C = A @ B, e.g. p @ v in attention): B is taken in
// blocks of rows small enough for L1, and every row of A consumes a block before the next one is
// read, so B is streamed from memory once. Within a block, NV vectors of output columns
// accumulate a[k] * B[k, :] in registers. B of dtype DT (a half-precision KV cache's values) is
// converted to float32 in registers.
// ---------------------------------------------------------------------------------------------
template <class V, int DT, int NV>
void gemv_nn_cols(const float* a, int64_t kb, const void* B, int64_t off, int64_t ldb,
                  const float* init, float* c) {
  using vf = typename V::vf;
  using L = Load<V, DT>;
  vf acc[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) acc[v] = init ? V::load(init + v * V::W) : V::zero();
  for (int64_t k = 0; k < kb; ++k) {
    const vf x = V::set1(a[k]);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[v] = V::fma(x, L::vec(B, off + k * ldb + v * V::W), acc[v]);
  }
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) V::store(c + v * V::W, acc[v]);
}

template <class V, int DT>
void gemv_nn_dt(const float* A, int64_t lda, int64_t M, int64_t K, const void* B, int64_t ldb,
                const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  using L = Load<V, DT>;
  constexpr int64_t CW = V::NN_NV * V::W;
  constexpr int64_t kBytes = DT == kF32 ? 4 : 2;
  const int64_t width = n1 - n0;
  const int64_t kblock = width * 64 >= 8192 ? 64 : 8192 / width;  // ~32 KB of float32 B per block
  const char* bytes = static_cast<const char*>(B);
  for (int64_t k0 = 0; k0 < K; k0 += kblock) {
    const int64_t kb = imin(kblock, K - k0);
    const int64_t ok = k0 * ldb;  // element offset of row k0
    // Rows are short and strided (values of one head): prefetch the next block into L2.
    for (int64_t k = k0 + kblock; k < imin(k0 + 2 * kblock, K); ++k)
      for (int64_t n = n0; n < n1; n += 64 / kBytes) __builtin_prefetch(bytes + (k * ldb + n) * kBytes, 0, 2);
    for (int64_t m = 0; m < M; ++m) {
      const float* a = A + m * lda + k0;
      float* c = C + m * ldc;
      // The first block starts from the bias (or zero), later ones from the partial sums in C.
      const float* init = k0 > 0 ? c : bias;
      int64_t n = n0;
      for (; n + CW <= n1; n += CW)
        gemv_nn_cols<V, DT, V::NN_NV>(a, kb, B, ok + n, ldb, init ? init + n : nullptr, c + n);
      for (; n + V::W <= n1; n += V::W)
        gemv_nn_cols<V, DT, 1>(a, kb, B, ok + n, ldb, init ? init + n : nullptr, c + n);
      for (; n < n1; ++n) {
        float s = init ? init[n] : 0.f;
        for (int64_t k = 0; k < kb; ++k) s += a[k] * L::one(B, ok + k * ldb + n);
        c[n] = s;
      }
    }
  }
}

template <class V>
void gemv_nn(const float* A, int64_t lda, int64_t M, int64_t K, const void* B, int bdtype,
             int64_t ldb, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  switch (bdtype) {
    case kF32: return gemv_nn_dt<V, kF32>(A, lda, M, K, B, ldb, bias, C, ldc, n0, n1);
    case kF16: return gemv_nn_dt<V, kF16>(A, lda, M, K, B, ldb, bias, C, ldc, n0, n1);
    default: return gemv_nn_dt<V, kBF16>(A, lda, M, K, B, ldb, bias, C, ldc, n0, n1);
  }
}

// ---------------------------------------------------------------------------------------------
// Packed kernel. For each NC-column block and KC-deep slice: B is packed (converted to float32)
// into panels of NR = NV*W columns, Bp[k*NR + j]; then for each MR-row strip, A is packed into
// Ap[k*MR + i] and the micro-kernel updates an MR x NR tile of C from registers.
// ---------------------------------------------------------------------------------------------
// Lane indices for the butterfly transpose: round s exchanges bit s of the row index with bit s
// of the lane index, as a two-source permutation of rows i and i + 2^s.
template <int W>
struct Butterfly {
  int32_t lo[8][W], hi[8][W];
  constexpr Butterfly() : lo(), hi() {
    for (int s = 0, b = 1; b < W; ++s, b <<= 1)
      for (int l = 0; l < W; ++l) {
        lo[s][l] = (l & b) ? l - b + W : l;
        hi[s][l] = (l & b) ? l + W : l + b;
      }
  }
};

// In-register W x W transpose, r[i][j] becomes r[j][i]: the traits' own shuffle sequence when it
// has one, else log2(W) butterfly rounds of V::permute2.
template <class V>
void transpose(typename V::vf (&r)[V::W]) {
  if constexpr (V::kOwnTranspose) {
    V::transpose(r);
  } else {
    static constexpr Butterfly<V::W> idx{};
#pragma GCC unroll 8
    for (int s = 0, b = 1; b < V::W; ++s, b <<= 1)
#pragma GCC unroll 16
      for (int i = 0; i < V::W; ++i)
        if (!(i & b)) {
          const typename V::vf x = r[i], y = r[i + b];
          r[i] = V::permute2(x, idx.lo[s], y);
          r[i + b] = V::permute2(x, idx.hi[s], y);
        }
  }
}

template <class V, int DT>
void pack_b(const void* B, int64_t sk, int64_t sn, int64_t k0, int64_t kc, int64_t n0,
            int64_t ncols, float* Bp) {
  using L = Load<V, DT>;
  constexpr int NR = V::NV * V::W, W = V::W;
  int64_t k = 0;
  if (sn == 1 && ncols == NR) {  // rows of B are rows of the panel
    for (; k < kc; ++k)
#pragma GCC unroll 16
      for (int v = 0; v < V::NV; ++v)
        V::store(Bp + k * NR + v * W, L::vec(B, (k0 + k) * sk + n0 + v * W));
  } else if (sk == 1 && ncols == NR) {  // columns of B are contiguous: transpose W x W blocks
    for (; k + W <= kc; k += W)
      for (int v = 0; v < V::NV; ++v) {
        typename V::vf r[W];
#pragma GCC unroll 16
        for (int t = 0; t < W; ++t) r[t] = L::vec(B, (n0 + v * W + t) * sn + k0 + k);
        transpose<V>(r);
#pragma GCC unroll 16
        for (int t = 0; t < W; ++t) V::store(Bp + (k + t) * NR + v * W, r[t]);
      }
  }
  for (int64_t j = 0; j < ncols; ++j) {
    const int64_t base = (n0 + j) * sn + k0 * sk;
    for (int64_t kk = k; kk < kc; ++kk) Bp[kk * NR + j] = L::one(B, base + kk * sk);
  }
  for (int64_t j = ncols; j < NR; ++j)
    for (int64_t kk = k; kk < kc; ++kk) Bp[kk * NR + j] = 0.f;
}

template <class V>
void pack_a(const float* A, int64_t lda, int64_t mr, int64_t kc, float* Ap) {
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t k = 0; k < kc; ++k) Ap[k * V::MR + i] = A[i * lda + k];
}

// C[0:MRr, 0:ncols] (+)= Ap^T Bp over kc; `first` stores (bias +) the product instead of adding.
template <class V, int MRr>
void micro(const float* Ap, const float* Bp, int64_t kc, float* C, int64_t ldc, int64_t ncols,
           bool first, const float* bias) {
  using vf = typename V::vf;
  constexpr int NV = V::NV, W = V::W, NR = NV * W;
  vf acc[MRr][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MRr; ++i)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[i][v] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    vf b[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) b[v] = V::load(Bp + k * NR + v * W);
#pragma GCC unroll 16
    for (int i = 0; i < MRr; ++i) {
      const vf a = V::set1(Ap[k * V::MR + i]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fma(a, b[v], acc[i][v]);
    }
  }
  if (ncols == NR) {
#pragma GCC unroll 16
    for (int i = 0; i < MRr; ++i)
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        float* c = C + i * ldc + v * W;
        const vf base = !first ? V::load(c) : bias ? V::load(bias + v * W) : V::zero();
        V::store(c, V::add(base, acc[i][v]));
      }
    return;
  }
  float tile[NR];
  for (int i = 0; i < MRr; ++i) {
    for (int v = 0; v < NV; ++v) V::store(tile + v * W, acc[i][v]);
    float* c = C + i * ldc;
    for (int64_t j = 0; j < ncols; ++j) {
      const float base = !first ? c[j] : bias ? bias[j] : 0.f;
      c[j] = base + tile[j];
    }
  }
}

template <class V, int MRr>
void micro_rows(int64_t mr, const float* Ap, const float* Bp, int64_t kc, float* C, int64_t ldc,
                int64_t ncols, bool first, const float* bias) {
  if constexpr (MRr > 1) {
    if (mr < MRr) return micro_rows<V, MRr - 1>(mr, Ap, Bp, kc, C, ldc, ncols, first, bias);
  }
  micro<V, MRr>(Ap, Bp, kc, C, ldc, ncols, first, bias);
}

template <class V, int DT>
void gemm_packed_dt(const float* A, int64_t lda, int64_t M, int64_t K, const void* B, int64_t sk,
                    int64_t sn, const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1,
                    float* scratch) {
  constexpr int64_t MR = V::MR, NR = V::NV * V::W, KC = V::KC, NC = V::NC;
  float* Bp = scratch;            // KC x NC
  float* Ap = scratch + KC * NC;  // KC x MR
  for (int64_t nc = n0; nc < n1; nc += NC) {
    const int64_t ncw = imin(NC, n1 - nc), npanels = (ncw + NR - 1) / NR;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      const int64_t kc = imin(KC, K - k0);
      for (int64_t p = 0; p < npanels; ++p)
        pack_b<V, DT>(B, sk, sn, k0, kc, nc + p * NR, imin(NR, ncw - p * NR), Bp + p * KC * NR);
      for (int64_t m0 = 0; m0 < M; m0 += MR) {
        const int64_t mr = imin(MR, M - m0);
        pack_a<V>(A + m0 * lda + k0, lda, mr, kc, Ap);
        for (int64_t p = 0; p < npanels; ++p) {
          const int64_t col = nc + p * NR;
          micro_rows<V, V::MR>(mr, Ap, Bp + p * KC * NR, kc, C + m0 * ldc + col, ldc,
                               imin(NR, n1 - col), k0 == 0, bias ? bias + col : nullptr);
        }
      }
    }
  }
}

template <class V>
void gemm_packed(const float* A, int64_t lda, int64_t M, int64_t K, const void* B, int bdtype,
                 int64_t sk, int64_t sn, const float* bias, float* C, int64_t ldc, int64_t n0,
                 int64_t n1, float* scratch) {
  switch (bdtype) {
    case kF32: return gemm_packed_dt<V, kF32>(A, lda, M, K, B, sk, sn, bias, C, ldc, n0, n1, scratch);
    case kF16: return gemm_packed_dt<V, kF16>(A, lda, M, K, B, sk, sn, bias, C, ldc, n0, n1, scratch);
    default: return gemm_packed_dt<V, kBF16>(A, lda, M, K, B, sk, sn, bias, C, ldc, n0, n1, scratch);
  }
}

template <class V>
GemmKernels make_kernels() {
  return GemmKernels{V::kName,
                     V::kDirectMaxM,
                     V::NV * V::W,
                     std::lcm(int64_t{V::NV * V::W}, int64_t{V::DN}),
                     static_cast<size_t>(V::KC) * V::NC + static_cast<size_t>(V::KC) * V::MR,
                     gemv_nt<V>,
                     gemv_nn<V>,
                     gemm_packed<V>};
}

}  // namespace
}  // namespace tsorch
