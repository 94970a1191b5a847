// Linear layers with the pre-quantized weights of Hugging Face Hub checkpoints, decoded inside the
// linear: panels of 64 output channels are dequantized to float32 in a per-thread scratch (L2-sized)
// and multiplied by the packed GEMM (gemm_range); the float32 weight is never materialized whole.
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

// AutoAWQ packs columns 8c + [0, 2, 4, 6, 1, 3, 5, 7] into nibbles 0..7 of word c: column j sits in
// nibble kAwqSlot[j].
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
  const std::vector<float> b = bias_to_f32(bias, bias_dtype, N);
  panel_linear(x, b, out, M, N, K, [&](float* w, int64_t n0, int64_t n1) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = g_idx[k];
      const float* s = scales + g * N;
      const uint32_t* z = reinterpret_cast<const uint32_t*>(qzeros + g * zrow);
      if (awq) {
        const uint32_t* q = reinterpret_cast<const uint32_t*>(qweight + k * zrow);
        for (int64_t n = n0; n < n1; ++n) {
          const int shift = kAwqSlot[n & 7] * 4;
          const int code = static_cast<int>((q[n >> 3] >> shift) & 15u);
          const int zero = static_cast<int>((z[n >> 3] >> shift) & 15u);
          w[(n - n0) * K + k] = static_cast<float>(code - zero) * s[n];
        }
      } else {
        const uint32_t* q = reinterpret_cast<const uint32_t*>(qweight + (k / per) * N);
        const int qshift = static_cast<int>(k % per) * bits;
        for (int64_t n = n0; n < n1; ++n) {
          const int code = static_cast<int>((q[n] >> qshift) & mask);
          const int zero = static_cast<int>((z[n / per] >> ((n % per) * bits)) & mask) + zero_offset;
          w[(n - n0) * K + k] = static_cast<float>(code - zero) * s[n];
        }
      }
    }
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
