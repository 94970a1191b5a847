// Matrix-product driver (see gemm.h).
#include "gemm.h"

#include <algorithm>
#include <cstdlib>

#include "cpu.h"
#include "dtype.h"
#include "thread_pool.h"

namespace tsorch {

float* thread_scratch(int slot, size_t n) {
  struct Buffer {
    float* p = nullptr;
    size_t cap = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer buffers[4];
  Buffer& b = buffers[slot];
  if (b.cap < n) {
    std::free(b.p);
    const size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
    b.p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!b.p) std::abort();
    b.cap = n;
  }
  return b.p;
}

namespace {

// Smallest M for which bfloat16 weights take the bf16 dot-product GEMM (where the host has one).
constexpr int64_t kBf16MinM = 2;

// Whether gemm_range runs a direct (unpacked) kernel for this M and B.
bool direct(const GemmKernels& k, int64_t M, const BMatrix& B) {
  return M <= k.direct_max_m && (B.sk == 1 || B.sn == 1);
}

// Whether a product with B takes the bf16 dot-product GEMM (where the host has one).
bool takes_bf16(const BMatrix& B, int64_t M) {
  return B.weights && B.dtype == kBF16 && B.sk == 1 && M >= kBf16MinM;
}

}  // namespace

void gemm_range(const float* A, int64_t lda, int64_t M, int64_t K, const BMatrix& B,
                const float* bias, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  if (M <= 0 || n1 <= n0) return;
  if (K == 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = n0; n < n1; ++n) C[m * ldc + n] = bias ? bias[n] : 0.f;
    return;
  }
  const GemmKernels& k = gemm_kernels();
  const Bf16GemmKernels* bf = bf16_gemm_kernels();
  if (bf && takes_bf16(B, M)) {
    bf->gemm_nt(A, lda, M, K, static_cast<const uint16_t*>(B.p), B.sn, bias, C, ldc, n0, n1);
  } else if (direct(k, M, B) && B.sk == 1) {
    k.gemv_nt(A, lda, M, K, B.p, B.dtype, B.sn, bias, C, ldc, n0, n1);
  } else if (direct(k, M, B)) {
    k.gemv_nn(A, lda, M, K, B.p, B.dtype, B.sk, bias, C, ldc, n0, n1);
  } else {
    float* scratch = thread_scratch(0, k.packed_scratch_floats);
    k.gemm_packed(A, lda, M, K, B.p, B.dtype, B.sk, B.sn, bias, C, ldc, n0, n1, scratch);
  }
}

void gemm_parallel(const float* A, int64_t lda, int64_t M, int64_t K, const BMatrix& B,
                   const float* bias, float* C, int64_t ldc, int64_t N) {
  ThreadPool& pool = ThreadPool::get();
  const Bf16GemmKernels* bf = bf16_gemm_kernels();
  if (bf && takes_bf16(B, M) && K > 0 && N > 0) {
    // A is packed once (by this thread), then the threads split the columns (multiples of 8).
    uint32_t* P = reinterpret_cast<uint32_t*>(thread_scratch(3, static_cast<size_t>(bf->packed_words(M, K))));
    bf->pack_a(A, lda, M, K, P);
    const uint16_t* W = static_cast<const uint16_t*>(B.p);
    const int64_t groups = (N + 7) / 8;
    const int64_t tasks = std::max<int64_t>(1, std::min(groups, split_count(2.0 * M * N * K, pool.size())));
    return pool.parallel_for(tasks, [&](int64_t t) {
      const int64_t n0 = std::min(N, groups * t / tasks * 8), n1 = std::min(N, groups * (t + 1) / tasks * 8);
      bf->gemm_packed(P, M, K, W, B.sn, bias, C, ldc, n0, n1);
    });
  }
  const GemmKernels& k = gemm_kernels();
  if (direct(k, M, B)) {
    // The direct kernels (decode GEMVs) stream B with no per-task setup: split as the other decode
    // GEMVs are (parallel_ranges: one contiguous range of columns per thread, the threads finishing
    // together, a late one holding up no more than a piece), at multiples of direct_granule.
    const int64_t g = k.direct_granule;
    return parallel_ranges((N + g - 1) / g, 2.0 * M * g * K, [&](int64_t c0, int64_t c1) {
      gemm_range(A, lda, M, K, B, bias, C, ldc, std::min(N, c0 * g), std::min(N, c1 * g));
    });
  }
  const int64_t panels = (N + k.panel - 1) / k.panel;
  const int64_t threads = split_count(2.0 * M * N * K, pool.size());
  const int64_t ncols = std::max<int64_t>(1, std::min(panels, threads));
  // Narrow N (fewer panels than threads): also split rows, in multiples of 16.
  const int64_t mrows = std::max<int64_t>(1, std::min((M + 15) / 16, threads / ncols));
  if (ncols * mrows == 1) return gemm_range(A, lda, M, K, B, bias, C, ldc, 0, N);
  pool.parallel_for(ncols * mrows, [&](int64_t t) {
    const int64_t c = t % ncols, r = t / ncols;
    const int64_t n0 = std::min(N, panels * c / ncols * k.panel);
    const int64_t n1 = std::min(N, panels * (c + 1) / ncols * k.panel);
    const int64_t blocks = (M + 15) / 16;
    const int64_t m0 = std::min(M, blocks * r / mrows * 16);
    const int64_t m1 = std::min(M, blocks * (r + 1) / mrows * 16);
    gemm_range(A + m0 * lda, lda, m1 - m0, K, B, bias, C + m0 * ldc, ldc, n0, n1);
  });
}

}  // namespace tsorch

namespace tsorch {

bool gemm_direct(int64_t M, const BMatrix& B) {
  return !(bf16_gemm_kernels() && takes_bf16(B, M)) && direct(gemm_kernels(), M, B);
}

int64_t gemm_direct_granule() { return gemm_kernels().direct_granule; }

}  // namespace tsorch
