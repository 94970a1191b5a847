// The kernels behind each export of the addon (see native.ts for the contracts). addon.cc has
// already validated every argument: codes are known, dtypes are supported by the op, and every
// buffer holds every element the kernel will touch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tsorch {

using Dims = std::vector<int64_t>;

// Op codes, as in native.ts.
enum UnaryOp : int {
  kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kSilu, kGelu, kGeluTanh,
  kAbs, kSin, kCos, kRelu, kSoftplus, kReciprocal, kSquare, kErf, kNumUnary
};
enum BinaryOp : int {
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow,
  kEq, kNe, kLt, kLe, kGt, kGe, kLogicalAnd, kLogicalOr, kNumBinary
};
enum ReduceOp : int { kSum, kMean, kMax, kMin, kArgmax, kArgmin, kProd, kNumReduce };

// copy.cc
void copy(const void* src, int src_dtype, const Dims& src_strides, void* dst, int dst_dtype,
          const Dims& dst_strides, const Dims& shape);

// elementwise.cc
void unary(int op, const float* x, float* out, int64_t n);
// Returns false (after writing the rest) when an integer division by zero occurred.
bool binary(int op, int dtype, const void* a, const Dims& a_strides, const void* b,
            const Dims& b_strides, void* out, const Dims& shape);
void where(const uint8_t* cond, const Dims& cond_strides, const void* a, const Dims& a_strides,
           const void* b, const Dims& b_strides, int dtype, void* out, const Dims& shape);
// A fused chain of float32 elementwise ops (compile/'s fusion): `prog` holds 6 ints per step,
// [0 unary | 1 binary, op code, a kind (0 input, 1 step), a index, b kind, b index]; inputs are
// float32 strided views of `shape` (nin <= kMaxFusedInputs); the last step is written to the
// contiguous float32 `out`.
constexpr int kMaxFusedInputs = 6;
void fused_elementwise(const int32_t* prog, int nsteps, const float* const* in, const Dims* in_strides,
                       int nin, float* out, const Dims& shape);
// The same chain over n contiguous elements of every input into out, on the calling thread (no
// layout analysis or allocation per call: linear_group.cc's epilogues run it per row and piece).
void fused_elementwise_contiguous(const int32_t* prog, int nsteps, const float* const* in, float* out,
                                  int64_t n);

// reduce.cc
// Index in [0, n) (n >= 1) of the first NaN of x, else of its first maximum (max) or minimum.
int64_t arg_extreme_f32(const float* x, int64_t n, bool max);
void reduce(int op, const void* x, int dtype, void* out, int64_t outer, int64_t n);
void cumsum(const void* x, int dtype, void* out, int64_t outer, int64_t n);

// softmax.cc
void softmax(const float* x, float* out, int64_t rows, int64_t n, bool log);

// linear.cc
// A bias (or residual) of `n` values of `dtype` as float32: float32 is read in place (null stays
// null), other dtypes are widened once into `scratch`.
const float* float32_values(const void* p, int dtype, int64_t n, std::vector<float>& scratch);
void linear(const float* x, const void* w, int w_dtype, const void* bias, int bias_dtype,
            float* out, int64_t M, int64_t N, int64_t K);

// gather_linear.cc: out[m] = x[m] @ w[idx[m]]^T; w holds E pointers to [N, K] of w_dtype, idx int64
// [M] in [0, E) (checked by the caller).
void gather_linear(const float* x, const void* const* w, int w_dtype, int64_t E, const int64_t* idx,
                   float* out, int64_t M, int64_t N, int64_t K);

// moe_experts.cc: out [T, H] = for each token t, sum over j < K of weights[t, j] *
// down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]) with e = ids[t, j]; x float32 [T, H], gate_up
// [E, 2I, H] (gate rows 0..I, up rows I..2I) and down [E, H, I] of w_dtype, weights float32 [T, K],
// ids int64 [T, K] in [0, E) (checked by the caller).
void moe_experts(const float* x, const void* gate_up, const void* down, int w_dtype, const float* weights,
                 const int64_t* ids, float* out, int64_t T, int64_t K, int64_t E, int64_t H, int64_t I);

// matmul.cc
void matmul(const float* a, const int64_t a_strides[3], const float* b, const int64_t b_strides[3],
            float* out, int64_t batch, int64_t M, int64_t N, int64_t K);

// attention.cc
struct SdpaArgs {
  const float* q; int64_t qs[4];
  const void* k; int64_t ks[4];  // of kv_dtype (float32, float16 or bfloat16)
  const void* v; int64_t vs[4];  // of kv_dtype
  float* out;
  const float* mask; int64_t ms[3];
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  float scale, softcap;
  int64_t causal_offset, window;
  int kv_dtype;
  const float* sinks;  // [Hq] attention-sink logits (gpt-oss), or null
};
void sdpa(const SdpaArgs& a);

// causal_conv1d.cc
// x and out [B, L, C], w [C, K], state (may be null = zeros) and state_out [B, K - 1, C]: float32
// contiguous. state_out must not alias state.
void causal_conv1d(const float* x, const float* w, const float* state, float* out,
                   float* state_out, int64_t B, int64_t L, int64_t C, int64_t K);

// gated_delta.cc
// q, k [B, L, H, Dk], v and out [B, L, H, Dv], g and beta [B, L, H], state (may be null = zeros)
// and state_out [B, H, Dk, Dv]: all float32 contiguous.
void gated_delta_rule(const float* q, const float* k, const float* v, const float* g,
                      const float* beta, const float* state, float* out, float* state_out,
                      int64_t B, int64_t L, int64_t H, int64_t Dk, int64_t Dv);
// paged_attention.cc (slots, sequence rows and positions already checked to be in range)
void paged_kv_write(const float* k, const float* v, void* k_cache, void* v_cache, int kv_dtype,
                    const int32_t* slots, int64_t T, int64_t k_row, int64_t v_row);
struct PagedAttentionArgs {
  const float* q; const void* k_cache; const void* v_cache;  // pools of kv_dtype
  const int32_t* tables; const int32_t* seq; const int32_t* pos;
  float* out;
  int64_t T, Hq, Hkv, D, Dv, bs, max_blocks;
  float scale, softcap;
  int64_t window;
  int kv_dtype;
};
void paged_attention(const PagedAttentionArgs& a);

// norm.cc. rms_norm: out = x / sqrt(mean(x^2) + eps) * (offset + w) per row of n; w (never null)
// float32 / float16 / bfloat16 [n].
void rms_norm(const float* x, const void* w, int w_dtype, float* out, int64_t rows, int64_t n,
              float eps, float offset);
void layer_norm(const float* x, const void* w, int w_dtype, const void* b, int b_dtype, float* out,
                int64_t rows, int64_t n, float eps);

// rotary.cc
void rotary(const float* x, const float* cos, const float* sin, float* out, int64_t B, int64_t L,
            int64_t H, int64_t D, int64_t R);

// embedding.cc (ids already checked to be in range)
void embedding(const void* table, int table_dtype, const void* ids, int ids_dtype, float* out,
               int64_t n, int64_t dim);

// mxfp4.cc: rows of nb blocks (16 bytes each) with one scale byte per block (scale rows
// scale_row bytes apart) -> float32 [rows, nb * 32]
void dequant_mxfp4(const uint8_t* blocks, const uint8_t* scales, int64_t scale_row, float* out,
                   int64_t rows, int64_t nb);

// quant.cc: block quantization (see quant_kernels.h for the layouts). w [N, K] of w_dtype (K a
// multiple of 32) -> q (N * K bytes for bits 8, N * K / 2 for bits 4) and scales float32 [N, K / 32].
void quantize_blocks(const void* w, int w_dtype, int bits, uint8_t* q, float* scales, int64_t N,
                     int64_t K);
// out [M, N] float32 = x [M, K] float32 @ W^T (+ bias [N] of bias_dtype, or null), W quantized as above.
void linear_quantized(const float* x, const uint8_t* q, const float* scales, int bits,
                      const void* bias, int bias_dtype, float* out, int64_t M, int64_t N,
                      int64_t K);
// One weight of linear_quantized_group: W [N, K] (q, scales as above), bias [N] of bias_dtype or
// null, out [M, N] float32.
struct QuantLinearPart {
  const uint8_t* q;
  const float* scales;
  const void* bias;
  int bias_dtype;
  float* out;
  int64_t N;
};
// linear_quantized of the same x [M, K] with each of ws[0..nw) (same bits): at decode sizes x is
// quantized to int8 once and every weight's rows run in one pool job.
void linear_quantized_group(const float* x, int bits, int64_t M, int64_t K, const QuantLinearPart* ws,
                            int nw);

// linear_quantized's decode path by column ranges (the fused kernels of fused.h): prepare takes
// x [M, K] (on the integer path quantizing its rows once, into the calling thread's
// thread_scratch slot 2) and returns false when M takes linear_quantized's GEMM path instead;
// quant_rows then computes C[m*ldc + n] for n0 <= n < n1 (+ bias[n], float32 or null), single-
// threaded, each value as linear_quantized computes it. n0 a multiple of `chunk` (linear_quantized's
// split), so tiles fall as there. Valid while that scratch slot is not reused.
struct IntQuantKernels;
struct QuantRows {
  const IntQuantKernels* ik = nullptr;  // null: the float-activation kernels
  const uint8_t* act = nullptr;
  const float* x = nullptr;
  int bits = 0;
  int64_t M = 0, K = 0, chunk = 0;
};
bool quant_rows_prepare(const float* x, int bits, int64_t M, int64_t K, QuantRows* r);
void quant_rows(const QuantRows& r, const uint8_t* q, const float* scales, const float* bias, float* C,
                int64_t ldc, int64_t n0, int64_t n1);

// quant_hub.cc: linear with Hub pre-quantized weights (all contiguous; bias of bias_dtype or null).
// GPTQ (awq false): qweight int32 [K / (32 / bits), N] packed along K; AWQ (awq true, bits 4):
// qweight int32 [K, N / 8] packed along N in AutoAWQ's order. Both: qzeros int32 [G, N / (32 / bits)]
// (same packing along N as the layout's), scales float32 [G, N], g_idx int32 [K] (values < G, checked
// by the caller); w[n, k] = (q - (z + zero_offset)) * scale.
void linear_packed_int(const float* x, const int32_t* qweight, const int32_t* qzeros,
                       const float* scales, const int32_t* g_idx, int bits, bool awq,
                       int zero_offset, const void* bias, int bias_dtype, float* out, int64_t M,
                       int64_t N, int64_t K);
// FP8: weight float8_e4m3fn bytes [N, K], scale_inv float32 [ceil(N / block_n), ceil(K / block_k)].
void linear_fp8_block(const float* x, const uint8_t* weight, const float* scale_inv,
                      int64_t block_n, int64_t block_k, const void* bias, int bias_dtype,
                      float* out, int64_t M, int64_t N, int64_t K);

// sort.cc
void sort(const float* x, float* values, int64_t* indices, int64_t rows, int64_t n, bool descending);
void topk(const float* x, float* values, int64_t* indices, int64_t rows, int64_t n, int64_t k);

// Bytes per second of `reps` streaming reads of a buffer of `bytes` over the thread pool; with
// `calls`, then the rates of `reps` passes reading the buffer in consecutive calls of those sizes
// (rounded down to whole 2 KB pieces, at least one a call; the buffer grows to hold the largest,
// and a call that would run past its end starts over at its start), each pass made right after a
// whole read (membw.cc; empty if the memory cannot be had).
std::vector<double> read_bandwidth(int64_t bytes, int reps, const std::vector<int64_t>& calls = {});
// Bytes/s of the batch-1 decode GEMV kernels (linear for a float weight of w_dtype when bits is 0,
// else linear_quantized at bits 8 / 4) with one activation row, K = 1024, over a weight of about
// `bytes`: `reps` single calls over all of it, then `reps` passes of consecutive calls of about
// `call_bytes` each, then the bytes of W one such call reads (membw.cc; empty if the memory cannot
// be had).
std::vector<double> decode_read_bandwidth(int w_dtype, int bits, int64_t call_bytes, int64_t bytes, int reps);
// Bytes/s of the same kernels where W stays in cache: each pool thread calls the kernel over its
// own weight of about `bytes` (whole rows, at least one; block-quantized weights: the GEMV kernel
// alone, the activation quantized once per task), all threads at once, ~256 MiB of weight (at
// most 65536 calls) per thread and rep: `reps` rates (all threads' bytes / wall time), then the
// bytes of W each thread's call reads (membw.cc; empty if the memory cannot be had).
std::vector<double> decode_compute_rate(int w_dtype, int bits, int64_t bytes, int reps);
// Every pool thread spins reading the steady clock for `seconds`, all at once, counting each gap
// between two reads longer than `min_gap_us` (time the thread did not run): the number of threads
// T, then per thread its gaps and their total seconds, then the median, 99th percentile and largest
// of the threads' first 65536 gaps each, in microseconds (0 without gaps), then the fraction of
// those gaps' time that all T threads lost at once, over the span every thread recorded (1 with
// one thread that had gaps, 0 without gaps, NaN when the threads' spans do not overlap): 2 T + 5
// numbers (host_stalls.cc).
std::vector<double> host_stalls(double seconds, double min_gap_us);

}  // namespace tsorch
