// conv2d as GEMMs through the shared GEMM driver (gemm.h), one per group:
//   out[o, p] = sum_k W[o, k] * col[k, p],  k = (c, i, j) over C / groups channels and the kernel,
// p over output pixels. The weight rows are the GEMM's A (float32; float16/bfloat16 weights are
// converted a bounded block of rows at a time), col is its B. A 1x1 convolution with stride 1 and
// no padding reads the input itself as col (a plain GEMM); any other shape fills col (im2col) for
// a bounded chunk of output pixels at a time, so no buffer grows with the image.
#include <algorithm>
#include <cstring>
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "spatial.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// Floats of the im2col chunk and of the converted weight block (8 MB each).
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

}  // namespace

void conv2d(const Conv2dArgs& a) {
  const int64_t G = a.groups, Cg = a.C / G, Og = a.O / G;
  const int64_t K = Cg * a.kh * a.kw, P = a.Ho * a.Wo, HW = a.H * a.W;
  if (P == 0 || Og == 0) return;
  const bool pointwise = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.ph == 0 && a.pw == 0;
  const int64_t chunk = std::max<int64_t>(64, kChunkFloats / std::max<int64_t>(K, 1) / 64 * 64);
  const int64_t pc = pointwise ? P : std::min(P, chunk);
  const int64_t orows = a.w_dtype == kF32 ? Og : std::min(Og, std::max<int64_t>(1, kChunkFloats / std::max<int64_t>(K, 1)));
  float* col = pointwise ? nullptr : thread_scratch(1, static_cast<size_t>(K * pc));
  float* wf = a.w_dtype == kF32 ? nullptr : thread_scratch(2, static_cast<size_t>(K * orows));
  std::vector<float> bias(a.bias ? a.O : 0);
  for (size_t o = 0; o < bias.size(); ++o) bias[o] = load_float(a.bias, a.bias_dtype, o);

  for (int64_t n = 0; n < a.N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const float* xg = a.x + (n * a.C + g * Cg) * HW;
      float* og = a.out + (n * a.O + g * Og) * P;
      for (int64_t o0 = 0; o0 < Og; o0 += orows) {
        const int64_t mo = std::min(orows, Og - o0);
        const int64_t wrow = (g * Og + o0) * K;
        const float* A = static_cast<const float*>(a.w) + wrow;
        if (wf) {
          parallel_rows(mo, static_cast<double>(K), [&](int64_t r) {
            for (int64_t k = 0; k < K; ++k) wf[r * K + k] = load_float(a.w, a.w_dtype, wrow + r * K + k);
          });
          A = wf;
        }
        for (int64_t p0 = 0; p0 < P; p0 += pc) {
          const int64_t np = std::min(pc, P - p0);
          BMatrix B{xg + p0, kF32, P, 1};
          if (!pointwise) {
            im2col(xg, Cg, a, p0, np, col);
            B = BMatrix{col, kF32, np, 1};
          }
          gemm_parallel(A, K, mo, K, B, nullptr, og + o0 * P + p0, P, np);
        }
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
