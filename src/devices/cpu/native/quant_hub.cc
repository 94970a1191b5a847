// Linear layers with the pre-quantized weights of Hugging Face Hub checkpoints, decoded inside the
// linear, 64 output channels (a panel) per task; the float32 weight is never materialized whole.
// GPTQ / AWQ at batch <= 8 decode one row of the panel per input k (in L1) and accumulate it into
// every output row; otherwise (and for FP8) the panel is dequantized into a per-thread scratch and
// multiplied by the packed GEMM (gemm_range).
// - GPTQ (AutoGPTQ / GPTQModel) and AWQ (AutoAWQ "gemm"): int4 / int8 codes with a zero point and a
//   float scale per group of inputs; w[n, k] = (q[k, n] - z[g, n]) * s[g, n], g = g_idx[k].
// - FP8 block-scaled (DeepSeek-V3, Qwen3-FP8): float8_e4m3fn w[n, k] times weight_scale_inv of its
//   [block_n, block_k] block.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// Output channels dequantized at a time.
constexpr int64_t kPanel = 64;
// Largest M for which GPTQ / AWQ rows are decoded one k at a time and accumulated directly.
constexpr int64_t kDirectMaxM = 8;

// AutoAWQ packs columns 8c + kAwqOrder[i] into nibble i of word c; column j sits in nibble kAwqSlot[j].
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kAwqSlot[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// The value of every float8_e4m3fn byte (1 sign, 4 exponent bits with bias 7, 3 mantissa bits,
// subnormals; 0x7f / 0xff are NaN, there is no infinity).
const float* e4m3_table() {
  static const std::vector<float> t = [] {
    std::vector<float> v(256);
    for (int c = 0; c < 256; ++c) {
      const int e = (c >> 3) & 15, m = c & 7;
      float x = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.f + m / 8.f, e - 7);
      if ((c & 0x7f) == 0x7f) x = NAN;
      v[c] = (c & 0x80) ? -x : x;
    }
    return v;
  }();
  return t.data();
}

// acc[j] += xv * row[j] over a whole panel (a fixed trip count the compiler vectorizes fully).
inline void accumulate(float* __restrict acc, const float* __restrict row, float xv) {
  for (int j = 0; j < kPanel; ++j) acc[j] += xv * row[j];
}

std::vector<float> bias_to_f32(const void* bias, int bias_dtype, int64_t N) {
  std::vector<float> b;
  if (!bias) return b;
  b.resize(N);
  for (int64_t n = 0; n < N; ++n) b[n] = load_float(bias, bias_dtype, n);
  return b;
}

// out [M, N] = x [M, K] @ W^T + bias, W's rows [n0, n1) decoded into w[(n - n0) * K + k] by `decode`.
template <typename Decode>
void panel_linear(const float* x, const std::vector<float>& bias, float* out, int64_t M, int64_t N,
                  int64_t K, Decode decode) {
  const int64_t panels = (N + kPanel - 1) / kPanel;
  ThreadPool::get().parallel_for(panels, [&](int64_t p) {
    const int64_t n0 = p * kPanel, n1 = std::min(N, n0 + kPanel);
    float* w = thread_scratch(1, static_cast<size_t>((n1 - n0) * K));
    decode(w, n0, n1);
    gemm_range(x, K, M, K, BMatrix{w, kF32, 1, K}, bias.empty() ? nullptr : bias.data() + n0,
               out + n0, N, 0, n1 - n0);
  });
}

}  // namespace

void linear_packed_int(const float* x, const int32_t* qweight, const int32_t* qzeros,
                       const float* scales, const int32_t* g_idx, int bits, bool awq,
                       int zero_offset, const void* bias, int bias_dtype, float* out, int64_t M,
                       int64_t N, int64_t K) {
  const int per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t zrow = N / per;
  int64_t G = 0;
  for (int64_t k = 0; k < K; ++k) G = std::max<int64_t>(G, g_idx[k] + 1);
  const std::vector<float> b = bias_to_f32(bias, bias_dtype, N);
  const int64_t panels = (N + kPanel - 1) / kPanel;
  ThreadPool::get().parallel_for(panels, [&](int64_t p) {
    const int64_t n0 = p * kPanel, n1 = std::min(N, n0 + kPanel), width = n1 - n0;
    // The panel k-major (w[k * width + j] = W[n0 + j, k]), and each group's zero points as floats:
    // code - zero is exact, so w = (code - zero) * scale rounds once, as the tools' dequantizers.
    float* zf = thread_scratch(2, static_cast<size_t>(G * width));
    for (int64_t g = 0; g < G; ++g) {
      const uint32_t* z = reinterpret_cast<const uint32_t*>(qzeros + g * zrow);
      for (int64_t n = n0; n < n1; ++n) {
        const int shift = awq ? kAwqSlot[n & 7] * 4 : static_cast<int>(n % per) * bits;
        zf[g * width + n - n0] = static_cast<float>(static_cast<int>((z[n / per] >> shift) & mask) + zero_offset);
      }
    }
    // Row k of the panel: w[n0 + j, k] for j < width.
    auto decode = [&](int64_t k, float* row) {
      const int64_t g = g_idx[k];
      const float* s = scales + g * N + n0;
      const float* z = zf + g * width;
      if (awq) {
        // Word c holds columns 8c + kAwqOrder[i] in nibbles i = 0..7 (N and kPanel are multiples of 8).
        const uint32_t* q = reinterpret_cast<const uint32_t*>(qweight + k * zrow + n0 / 8);
        for (int64_t c = 0; c < width / 8; ++c) {
          const uint32_t word = q[c];
          float* r = row + 8 * c;
          const float* zc = z + 8 * c;
          const float* sc = s + 8 * c;
          for (int i = 0; i < 8; ++i) {
            const int j = kAwqOrder[i];
            r[j] = (static_cast<float>((word >> (4 * i)) & 15u) - zc[j]) * sc[j];
          }
        }
      } else {
        const uint32_t* q = reinterpret_cast<const uint32_t*>(qweight + (k / per) * N + n0);
        const int shift = static_cast<int>(k % per) * bits;
        for (int64_t j = 0; j < width; ++j) row[j] = (static_cast<float>((q[j] >> shift) & mask) - z[j]) * s[j];
      }
    };
    if (M <= kDirectMaxM) {
      // Decode: one row of the panel at a time (in L1), accumulated into every output row.
      alignas(64) float row[kPanel] = {};
      alignas(64) float acc[kDirectMaxM][kPanel] = {};
      for (int64_t k = 0; k < K; ++k) {
        decode(k, row);
        for (int64_t m = 0; m < M; ++m) accumulate(acc[m], row, x[m * K + k]);
      }
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < width; ++j) out[m * N + n0 + j] = acc[m][j] + (b.empty() ? 0.f : b[n0 + j]);
      return;
    }
    float* w = thread_scratch(1, static_cast<size_t>(K * width));
    for (int64_t k = 0; k < K; ++k) decode(k, w + k * width);
    gemm_range(x, K, M, K, BMatrix{w, kF32, width, 1}, b.empty() ? nullptr : b.data() + n0, out + n0, N, 0, width);
  });
}

void linear_fp8_block(const float* x, const uint8_t* weight, const float* scale_inv,
                      int64_t block_n, int64_t block_k, const void* bias, int bias_dtype,
                      float* out, int64_t M, int64_t N, int64_t K) {
  const float* lut = e4m3_table();
  const int64_t sk = (K + block_k - 1) / block_k;
  const std::vector<float> b = bias_to_f32(bias, bias_dtype, N);
  panel_linear(x, b, out, M, N, K, [&](float* w, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* q = weight + n * K;
      const float* s = scale_inv + (n / block_n) * sk;
      float* row = w + (n - n0) * K;
      for (int64_t k0 = 0; k0 < K; k0 += block_k) {
        const float d = s[k0 / block_k];
        for (int64_t k = k0, k1 = std::min(K, k0 + block_k); k < k1; ++k) row[k] = lut[q[k]] * d;
      }
    }
  });
}

}  // namespace tsorch
