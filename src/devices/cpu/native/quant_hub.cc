// Linear layers with the pre-quantized weights of Hugging Face Hub checkpoints, decoded inside the
// linear; the float32 weight is never materialized whole. Batch <= 8 runs the tier's kernels that
// decode in registers (quant_hub_impl.h), one task per panel of output channels (GPTQ / AWQ) or per
// 16 channels (FP8); larger batches decode a panel into a per-thread scratch and multiply it by the
// packed GEMM (gemm_range).
// - GPTQ (AutoGPTQ / GPTQModel) and AWQ (AutoAWQ "gemm"): int4 / int8 codes with a zero point and a
//   float scale per group of inputs; w[n, k] = (q[k, n] - z[g, n]) * s[g, n], g = g_idx[k].
// - FP8 block-scaled (DeepSeek-V3, Qwen3-FP8): float8_e4m3fn w[n, k] times weight_scale_inv of its
//   [block_n, block_k] block.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu.h"
#include "dtype.h"
#include "gemm.h"
#include "ops.h"
#include "quant_hub_kernels.h"
#include "thread_pool.h"

namespace tsorch {

namespace {

// The kernels of the tier the GEMM uses (so TSORCH_CPU_ISA selects both).
const HubKernels& hub_kernels() {
  static const HubKernels* k = [] {
#if defined(TSORCH_X86_KERNELS)
    const char* tier = gemm_kernels().name;
    if (std::strcmp(tier, "avx512") == 0) return &hub_kernels_avx512();
    if (std::strcmp(tier, "avx2") == 0) return &hub_kernels_avx2();
#endif
    return &hub_kernels_portable();
  }();
  return *k;
}

// Largest M run by the in-register kernels; above it panels are decoded for the packed GEMM.
constexpr int64_t kDirectMaxM = 8;
// FP8 output channels decoded at a time for the GEMM.
constexpr int64_t kFp8Panel = 64;

}  // namespace

void linear_packed_int(const float* x, const int32_t* qweight, const int32_t* qzeros,
                       const float* scales, const int32_t* g_idx, int bits, bool awq,
                       int zero_offset, const void* bias, int bias_dtype, float* out, int64_t M,
                       int64_t N, int64_t K) {
  int64_t G = 0;
  for (int64_t k = 0; k < K; ++k) G = std::max<int64_t>(G, g_idx[k] + 1);
  const PackedIntWeight w{qweight, qzeros, scales, g_idx, bits, awq, zero_offset, N, K, G};
  std::vector<float> bias_f32;
  const float* b = float32_values(bias, bias_dtype, N, bias_f32);
  const HubKernels& hk = hub_kernels();
  const int64_t panel = awq ? hk.awq_panel : hk.gptq_panel;
  const int64_t panels = (N + panel - 1) / panel;
  ThreadPool::get().parallel_for(panels, [&](int64_t p) {
    const int64_t n0 = p * panel, n1 = std::min(N, n0 + panel), width = n1 - n0;
    if (M <= kDirectMaxM) return hk.packed_int_rows(w, x, M, b, out, n0, n1);
    float* dst = thread_scratch(1, static_cast<size_t>(K * width));
    hk.packed_int_decode(w, dst, n0, n1);
    gemm_range(x, K, M, K, BMatrix{dst, kF32, width, 1}, b ? b + n0 : nullptr, out + n0, N, 0, width);
  });
}

void linear_fp8_block(const float* x, const uint8_t* weight, const float* scale_inv,
                      int64_t block_n, int64_t block_k, const void* bias, int bias_dtype,
                      float* out, int64_t M, int64_t N, int64_t K) {
  const Fp8Weight w{weight, scale_inv, block_n, block_k, N, K};
  std::vector<float> bias_f32;
  const float* b = float32_values(bias, bias_dtype, N, bias_f32);
  const HubKernels& hk = hub_kernels();
  ThreadPool& pool = ThreadPool::get();
  if (M <= kDirectMaxM) {
    // Chunks of 16 channels, several per thread (the machine is shared).
    const int64_t chunks = (N + 15) / 16;
    const int64_t tasks = std::max<int64_t>(1, std::min(chunks, split_count(2.0 * M * N * K, 4 * pool.size())));
    pool.parallel_for(tasks, [&](int64_t t) {
      const int64_t n0 = std::min(N, chunks * t / tasks * 16), n1 = std::min(N, chunks * (t + 1) / tasks * 16);
      hk.fp8_rows(w, x, M, b, out, n0, n1);
    });
    return;
  }
  const int64_t panels = (N + kFp8Panel - 1) / kFp8Panel;
  pool.parallel_for(panels, [&](int64_t p) {
    const int64_t n0 = p * kFp8Panel, n1 = std::min(N, n0 + kFp8Panel);
    float* dst = thread_scratch(1, static_cast<size_t>((n1 - n0) * K));
    hk.fp8_decode(w, dst, n0, n1);
    gemm_range(x, K, M, K, BMatrix{dst, kF32, 1, K}, b ? b + n0 : nullptr, out + n0, N, 0, n1 - n0);
  });
}

}  // namespace tsorch
