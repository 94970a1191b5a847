// conv2d as GEMMs through the shared GEMM kernels (gemm.h), one per sample and group:
//   out[o, p] = sum_k W[o, k] * col[k, p],  k = (c, i, j) over C / groups channels and the kernel,
// p over output pixels. The weight rows are the GEMM's A (float16/bfloat16 weights are converted
// to float32 per task, a bounded block of rows at a time), col is its B. A 1x1 convolution with
// stride 1 and no padding reads the input itself as col (a plain GEMM); any other shape fills col
// (im2col) for a bounded chunk of output pixels at a time, so no buffer grows with the image.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu.h"
#include "dtype.h"
#include "gemm.h"
#include "spatial.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// Floats of the im2col chunk (8 MB); converted weight rows take at most half as many per thread.
constexpr int64_t kChunkFloats = int64_t(1) << 21;

// col[k * np + t] = x[c, ho * sh - ph + i * dh, wo * sw - pw + j * dw] (0 outside) for the
// np output pixels p0 + t (p = ho * Wo + wo) and every k = (c, i, j) of one group's Cg channels.
void im2col(const float* x, int64_t Cg, const Conv2dArgs& a, int64_t p0, int64_t np, float* col) {
  const int64_t KK = a.kh * a.kw, K = Cg * KK;
  parallel_rows(K, static_cast<double>(np), [&](int64_t k) {
    const int64_t c = k / KK, i = (k / a.kw) % a.kh, j = k % a.kw;
    const float* xc = x + c * a.H * a.W;
    const int64_t off = j * a.dw - a.pw;  // input column of output column 0
    float* dst = col + k * np;
    for (int64_t p = p0, end = p0 + np; p < end;) {
      const int64_t ho = p / a.Wo, wo0 = p % a.Wo, run = std::min(a.Wo - wo0, end - p);
      const int64_t hi = ho * a.sh - a.ph + i * a.dh;
      if (hi < 0 || hi >= a.H) {
        std::fill(dst, dst + run, 0.f);
      } else {
        const float* row = xc + hi * a.W;
        // Output columns wo0 + t read input column (wo0 + t) * sw + off, inside [0, W) for t in [lo, hi).
        int64_t lo = off >= 0 ? 0 : (-off + a.sw - 1) / a.sw - wo0;
        int64_t up = a.W - off <= 0 ? 0 : (a.W - off + a.sw - 1) / a.sw - wo0;
        lo = std::clamp<int64_t>(lo, 0, run);
        up = std::clamp<int64_t>(up, lo, run);
        std::fill(dst, dst + lo, 0.f);
        const float* src = row + (wo0 + lo) * a.sw + off;
        if (a.sw == 1) {
          std::memcpy(dst + lo, src, static_cast<size_t>(up - lo) * sizeof(float));
        } else {
          for (int64_t t = lo; t < up; ++t) dst[t] = src[(t - lo) * a.sw];
        }
        std::fill(dst + up, dst + run, 0.f);
      }
      dst += run;
      p += run;
    }
  });
}

// C[m * ldc + n] = sum_k W(m, k) B(k, n) for m < M, n < ncols over the pool, in R x Cb tasks of
// row blocks (of the weights W [M, K], float32/16/bf16) and column panels (of the pixels). Each
// task packs its own rows of W and its own columns of B, so the split that duplicates the least
// packing (Cb * M * K + R * K * ncols) is chosen among those with 4 tasks per thread (many tasks
// let a thread that runs late on a shared machine hold up no one). Half weights are converted to
// float32 per task, a bounded block of rows at a time.
void gemm_tiles(const void* w, int w_dtype, int64_t M, int64_t K, const BMatrix& B, float* C,
                int64_t ldc, int64_t ncols) {
  constexpr int64_t kRowBlock = 16;
  ThreadPool& pool = ThreadPool::get();
  const int64_t panel = gemm_kernels().panel;
  const int64_t row_blocks = (M + kRowBlock - 1) / kRowBlock, panels = (ncols + panel - 1) / panel;
  const int64_t tasks = split_count(2.0 * M * K * ncols, 4 * pool.size());
  const int64_t usable = std::min(tasks, row_blocks * panels);
  int64_t R = 1, Cb = 1;
  double best = -1;
  for (int64_t r = 1; r <= std::min(tasks, row_blocks); ++r) {
    const int64_t c = std::min(tasks / r, panels);
    const double cost = static_cast<double>(c) * M + static_cast<double>(r) * ncols;
    if (2 * r * c >= usable && (best < 0 || cost < best)) best = cost, R = r, Cb = c;
  }
  const int64_t convert_rows = std::max<int64_t>(kRowBlock, kChunkFloats / 2 / std::max<int64_t>(K, 1));
  pool.parallel_for(R * Cb, [&](int64_t t) {
    const int64_t r = t / Cb, c = t % Cb;
    const int64_t m0 = std::min(M, row_blocks * r / R * kRowBlock), m1 = std::min(M, row_blocks * (r + 1) / R * kRowBlock);
    const int64_t n0 = std::min(ncols, panels * c / Cb * panel), n1 = std::min(ncols, panels * (c + 1) / Cb * panel);
    if (w_dtype == kF32)
      return gemm_range(static_cast<const float*>(w) + m0 * K, K, m1 - m0, K, B, nullptr,
                        C + m0 * ldc, ldc, n0, n1);
    float* A = thread_scratch(3, static_cast<size_t>(std::min(convert_rows, m1 - m0) * K));
    for (int64_t r0 = m0; r0 < m1; r0 += convert_rows) {
      const int64_t rows = std::min(convert_rows, m1 - r0);
      for (int64_t i = 0; i < rows * K; ++i) A[i] = load_float(w, w_dtype, r0 * K + i);
      gemm_range(A, K, rows, K, B, nullptr, C + r0 * ldc, ldc, n0, n1);
    }
  });
}

}  // namespace

void conv2d(const Conv2dArgs& a) {
  const int64_t G = a.groups, Cg = a.C / G, Og = a.O / G;
  const int64_t K = Cg * a.kh * a.kw, P = a.Ho * a.Wo, HW = a.H * a.W;
  if (P == 0 || Og == 0) return;
  const bool pointwise = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.ph == 0 && a.pw == 0;
  const int64_t chunk = std::max<int64_t>(64, kChunkFloats / std::max<int64_t>(K, 1) / 64 * 64);
  const int64_t pc = pointwise ? P : std::min(P, chunk);
  float* col = pointwise ? nullptr : thread_scratch(1, static_cast<size_t>(K * pc));
  const int64_t es = dtype_size(a.w_dtype);
  std::vector<float> bias(a.bias ? a.O : 0);
  for (size_t o = 0; o < bias.size(); ++o) bias[o] = load_float(a.bias, a.bias_dtype, o);

  for (int64_t n = 0; n < a.N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const float* xg = a.x + (n * a.C + g * Cg) * HW;
      float* og = a.out + (n * a.O + g * Og) * P;
      const void* wg = static_cast<const char*>(a.w) + g * Og * K * es;
      for (int64_t p0 = 0; p0 < P; p0 += pc) {
        const int64_t np = std::min(pc, P - p0);
        BMatrix B{xg + p0, kF32, P, 1};
        if (!pointwise) {
          im2col(xg, Cg, a, p0, np, col);
          B = BMatrix{col, kF32, np, 1};
        }
        gemm_tiles(wg, a.w_dtype, Og, K, B, og + p0, P, np);
      }
      if (!bias.empty()) {
        parallel_rows(Og, static_cast<double>(P), [&](int64_t o) {
          const float b = bias[g * Og + o];
          float* row = og + o * P;
          for (int64_t p = 0; p < P; ++p) row[p] += b;
        });
      }
    }
  }
}

}  // namespace tsorch
