// Block quantization of weights (llama.cpp's quantize_row_q8_0_ref / quantize_row_q4_0_ref, with
// float32 scales) and the quantized linear driver: decode-sized M runs the tier's dot_rows (weights
// decoded in registers); larger M decodes panels of rows to float32 and runs the float GEMM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu.h"
#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "quant_kernels.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// The quantized kernels of the tier the GEMM uses (so TSORCH_CPU_ISA selects both).
const QuantKernels& quant_kernels() {
  static const QuantKernels* k = [] {
#if defined(TSORCH_X86_KERNELS)
    const char* tier = gemm_kernels().name;
    if (std::strcmp(tier, "avx512") == 0) return &quant_kernels_avx512();
    if (std::strcmp(tier, "avx2") == 0) return &quant_kernels_avx2();
#endif
    return &quant_kernels_portable();
  }();
  return *k;
}

// Largest M run by dot_rows; above it, rows of W are decoded to float32 for the packed GEMM.
constexpr int64_t kDotMaxM = 8;
// Smallest M run by the integer GEMM over repacked panels (where the tier has one).
constexpr int64_t kGemmMinM = 4;
// Rows of W decoded at a time for the GEMM path.
constexpr int64_t kPanelRows = 64;

void quantize_block8(const float* x, uint8_t* q, float* d) {
  float amax = 0.f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  *d = amax / 127.f;
  const float id = *d != 0.f ? 1.f / *d : 0.f;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[i] * id)));
}

void quantize_block4(const float* x, uint8_t* q, float* d) {
  float amax = 0.f, max = 0.f;  // max: the value of largest magnitude, sign kept
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) { amax = std::fabs(x[i]); max = x[i]; }
  *d = max / -8.f;
  const float id = *d != 0.f ? 1.f / *d : 0.f;
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
    q[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

}  // namespace

void quantize_blocks(const void* w, int w_dtype, int bits, uint8_t* q, float* scales, int64_t N,
                     int64_t K) {
  const int64_t nb = K / 32, row = quant_row_bytes(bits, K), bb = bits == 8 ? 32 : 16;
  parallel_rows(N, static_cast<double>(K) * 4, [&](int64_t n) {
    float x[32];
    for (int64_t g = 0; g < nb; ++g) {
      for (int i = 0; i < 32; ++i) x[i] = load_float(w, w_dtype, n * K + g * 32 + i);
      if (bits == 8) quantize_block8(x, q + n * row + g * bb, scales + n * nb + g);
      else quantize_block4(x, q + n * row + g * bb, scales + n * nb + g);
    }
  });
}

void linear_quantized(const float* x, const uint8_t* q, const float* scales, int bits,
                      const void* bias, int bias_dtype, float* out, int64_t M, int64_t N,
                      int64_t K) {
  // A float32 bias (or residual, linear_add) is read in place; other dtypes are widened once.
  std::vector<float> bias_f32;
  const float* b = float32_values(bias, bias_dtype, N, bias_f32);
  if (const IntQuantKernels* ik = int_quant_kernels(); ik && ik->gemm_rows && M >= kGemmMinM) {
    const int64_t arb = ik->gemm_act_row_bytes(K);
    uint8_t* act = reinterpret_cast<uint8_t*>(thread_scratch(2, static_cast<size_t>((M * arb + 3) / 4)));
    parallel_rows(M, static_cast<double>(K) * 8, [&](int64_t m) { ik->gemm_quantize_act(bits, x, K, m, m + 1, K, act); });
    // Panels of 16 rows of W, several per thread; each thread repacks into its own scratch.
    const int64_t panels = (N + 15) / 16;
    ThreadPool& pool = ThreadPool::get();
    const int64_t tasks = std::min(panels, split_count(2.0 * M * N * K, 4 * pool.size()));
    pool.parallel_for(tasks, [&](int64_t t) {
      const int64_t n0 = std::min(N, panels * t / tasks * 16), n1 = std::min(N, panels * (t + 1) / tasks * 16);
      uint8_t* panel = reinterpret_cast<uint8_t*>(thread_scratch(1, static_cast<size_t>(ik->gemm_panel_bytes(K) / 4)));
      ik->gemm_rows(bits, act, M, K, q, scales, b, out, N, n0, n1, panel);
    });
    return;
  }
  if (const IntQuantKernels* ik = int_quant_kernels()) {
    const int64_t arb = ik->act_row_bytes(K);
    uint8_t* act = reinterpret_cast<uint8_t*>(thread_scratch(2, static_cast<size_t>((M * arb + 3) / 4)));
    parallel_rows(M, static_cast<double>(K) * 8, [&](int64_t m) { ik->quantize_act(bits, x, K, m, m + 1, K, act); });
    // Chunks of 24 rows (a multiple of the kernels' tiles), one contiguous range per thread.
    parallel_ranges((N + 23) / 24, 2.0 * M * 24 * K, [&](int64_t c0, int64_t c1) {
      ik->dot_rows(bits, act, M, K, q, scales, b, out, N, std::min(N, c0 * 24), std::min(N, c1 * 24));
    });
    return;
  }
  const QuantKernels& k = quant_kernels();
  if (M <= kDotMaxM) {
    // Chunks of 16 rows, one contiguous range per thread.
    parallel_ranges((N + 15) / 16, 2.0 * M * 16 * K, [&](int64_t c0, int64_t c1) {
      k.dot_rows(bits, x, K, M, K, q, scales, b, out, N, std::min(N, c0 * 16), std::min(N, c1 * 16));
    });
    return;
  }
  const int64_t panels = (N + kPanelRows - 1) / kPanelRows;
  ThreadPool::get().parallel_for(panels, [&](int64_t p) {
    const int64_t n0 = p * kPanelRows, n1 = std::min(N, n0 + kPanelRows);
    float* w = thread_scratch(1, static_cast<size_t>((n1 - n0) * K));
    k.dequant_rows(bits, K, q, scales, w, n0, n1);
    gemm_range(x, K, M, K, BMatrix{w, kF32, 1, K}, b ? b + n0 : nullptr, out + n0, N, 0, n1 - n0);
  });
}

bool quant_rows_prepare(const float* x, int bits, int64_t M, int64_t K, QuantRows* r) {
  *r = QuantRows{};
  r->x = x;
  r->bits = bits;
  r->M = M;
  r->K = K;
  if (const IntQuantKernels* ik = int_quant_kernels()) {
    if (ik->gemm_rows && M >= kGemmMinM) return false;
    r->ik = ik;
    r->chunk = 24;
    uint8_t* act = reinterpret_cast<uint8_t*>(thread_scratch(2, static_cast<size_t>((M * ik->act_row_bytes(K) + 3) / 4)));
    for (int64_t m = 0; m < M; ++m) ik->quantize_act(bits, x, K, m, m + 1, K, act);
    r->act = act;
    return true;
  }
  if (M > kDotMaxM) return false;
  r->chunk = 16;
  return true;
}

void quant_rows(const QuantRows& r, const uint8_t* q, const float* scales, const float* bias, float* C,
                int64_t ldc, int64_t n0, int64_t n1) {
  if (r.ik) r.ik->dot_rows(r.bits, r.act, r.M, r.K, q, scales, bias, C, ldc, n0, n1);
  else quant_kernels().dot_rows(r.bits, r.x, r.K, r.M, r.K, q, scales, bias, C, ldc, n0, n1);
}

void linear_quantized_group(const float* x, int bits, int64_t M, int64_t K, const QuantLinearPart* ws,
                            int nw) {
  const IntQuantKernels* ik = int_quant_kernels();
  if (!ik || (ik->gemm_rows && M >= kGemmMinM)) {
    for (int w = 0; w < nw; ++w)
      linear_quantized(x, ws[w].q, ws[w].scales, bits, ws[w].bias, ws[w].bias_dtype, ws[w].out, M, ws[w].N, K);
    return;
  }
  std::vector<std::vector<float>> bias_f32(nw);
  std::vector<const float*> b(nw, nullptr);
  std::vector<int64_t> chunks(nw + 1, 0);  // chunks[w]: the first 24-row chunk of weight w, in one numbering
  for (int w = 0; w < nw; ++w) {
    b[w] = float32_values(ws[w].bias, ws[w].bias_dtype, ws[w].N, bias_f32[w]);
    chunks[w + 1] = chunks[w] + (ws[w].N + 23) / 24;
  }
  const int64_t arb = ik->act_row_bytes(K);
  uint8_t* act = reinterpret_cast<uint8_t*>(thread_scratch(2, static_cast<size_t>((M * arb + 3) / 4)));
  for (int64_t m = 0; m < M; ++m) ik->quantize_act(bits, x, K, m, m + 1, K, act);
  // As linear_quantized's decode split, over the chunks of all the weights together.
  const int64_t total = chunks[nw];
  parallel_ranges(total, 2.0 * M * 24 * K, [&](int64_t c0, int64_t c1) {
    for (int w = 0; w < nw; ++w) {
      const int64_t lo = std::max(c0, chunks[w]), hi = std::min(c1, chunks[w + 1]);
      if (lo >= hi) continue;
      const int64_t N = ws[w].N, n0 = std::min(N, (lo - chunks[w]) * 24), n1 = std::min(N, (hi - chunks[w]) * 24);
      ik->dot_rows(bits, act, M, K, ws[w].q, ws[w].scales, b[w], ws[w].out, N, n0, n1);
    }
  });
}

}  // namespace tsorch
