/**
 * The cpu device's native addon (C++ in ./native, built by node-gyp at `npm install` into
 * build/Release/tsorch_cpu.node). This file is the ABI: every function the addon exports is
 * declared here, with its exact contract. All calls are synchronous and run to completion on the
 * addon's thread pool (size: TSORCH_NUM_THREADS, else the machine's core count).
 *
 * Conventions for every function:
 * - Buffers are TypedArrays of any kind (usually Uint8Array byte views). The addon reads the
 *   pointer at the view's byteOffset; a buffer argument is "element 0" of that tensor. Buffers are
 *   not required to be aligned beyond their element size; inputs and outputs never alias unless
 *   stated.
 * - dtype codes (DTYPE_CODE below): 0 float32, 1 float16, 2 bfloat16, 3 int32, 4 int64, 5 bool (u8).
 * - Strides and shapes are plain JS arrays of integers, in elements (not bytes). Stride 0 means the
 *   dimension is broadcast.
 * - Float math is done in float32 (f16/bf16 are converted on load; bf16 rounding on store is
 *   round-to-nearest-even, f16 likewise).
 * - Invalid arguments (an id out of range, an unknown op code) throw a JS RangeError/TypeError with
 *   a message naming the problem; the addon never crashes the process on bad input it can check.
 */
import { loadCpuAddon } from "#cpu-addon";

export type Buf = ArrayBufferView;

/** Unary ops on float32 (`unary`). gelu = exact erf form; gelu_tanh = tanh approximation. */
export const UNARY = {
  neg: 0, exp: 1, log: 2, sqrt: 3, rsqrt: 4, tanh: 5, sigmoid: 6, silu: 7, gelu: 8, gelu_tanh: 9,
  abs: 10, sin: 11, cos: 12, relu: 13, softplus: 14, reciprocal: 15, square: 16, erf: 17,
} as const;

/** Binary ops (`binary`). Comparisons write bool (u8 0/1); logical_and/or take bool inputs. */
export const BINARY = {
  add: 0, sub: 1, mul: 2, div: 3, maximum: 4, minimum: 5, pow: 6,
  eq: 7, ne: 8, lt: 9, le: 10, gt: 11, ge: 12, logical_and: 13, logical_or: 14,
} as const;

/** Last-axis reductions (`reduce`). argmax/argmin write int64; ties resolve to the first index. */
export const REDUCE = { sum: 0, mean: 1, max: 2, min: 3, argmax: 4, argmin: 5, prod: 6 } as const;

export const DTYPE_CODE = { float32: 0, float16: 1, bfloat16: 2, int32: 3, int64: 4, bool: 5 } as const;

export interface NativeCpu {
  /**
   * `nbytes` (>= 1) zero bytes of fresh anonymous memory that starts on a 2 MB boundary, its whole
   * 2 MB pages advised for transparent huge pages (Linux), unmapped when the buffer is collected;
   * null elsewhere or when the mapping fails. Throws RangeError for a non-positive size.
   */
  allocateHuge(nbytes: number): ArrayBuffer | null;

  /**
   * Point the process's file descriptor 2 at /dev/null (for native libraries that print to stderr
   * themselves, such as Dawn while it enumerates adapters). Returns a duplicate of the old
   * descriptor to pass to restoreStderr, or -1 where this is not possible (nothing changed).
   */
  muteStderr(): number;

  /** Undo muteStderr: `saved` is its result (-1 is a no-op). */
  restoreStderr(saved: number): void;

  /**
   * Map file `path` into memory (copy-on-write: writes never reach the file) and return one
   * ArrayBuffer per range [offsets[i], offsets[i] + lengths[i]) over the mapping, without reading
   * or copying anything. The mapping lives until every returned ArrayBuffer is garbage collected.
   * Throws an Error with code ERR_TSORCH_MMAP (cannot open, stat or map the file; a range past
   * its end), ERR_TSORCH_NO_EXTERNAL_BUFFERS (the runtime forbids external ArrayBuffers) or
   * ERR_TSORCH_NO_MMAP (Windows).
   */
  mapRegions(path: string, offsets: number[], lengths: number[]): ArrayBuffer[];

  /** Number of threads in the pool. */
  numThreads(): number;
  /** CPU features the addon detected and the kernels it dispatches to, e.g. "avx512f avx512bw
   * avx512vl avx2 fma f16c kernels=avx512 int8=avx512-vnni bf16=f32 clones=x86-64-v4": `kernels`,
   * `int8` and `bf16` name the kernel tables (TSORCH_CPU_ISA, TSORCH_CPU_INT8 and TSORCH_CPU_BF16
   * narrow them), `clones` the copy of the functions compiled per ISA level (isa_clones.h) that
   * this CPU runs: x86-64-v4, x86-64-v3 or baseline (none: compiled once, not GCC on x86-64). */
  cpuFeatures(): string;
  /** Bytes/s of each of `reps` streaming reads of a fresh buffer of `bytes` (rounded down to whole
   * 2 KB pieces; RangeError under 2048 or for reps outside 1-1000) over the thread pool, with the widest loads the CPU has, after
   * one untimed read (benchmarks: bench/host.ts): prefetched and split over the threads as the
   * decode GEMVs read their weights. The buffer is memory of the kind large tensors get
   * (allocateHuge's 2 MB pages where the platform has them). */
  readBandwidth(bytes: number, reps: number): number[];
  /**
   * readBandwidth's whole reads, each followed by a pass that reads the buffer in consecutive calls
   * of `callBytes` each (rounded down to whole 2 KB pieces, at least one a call; every call over
   * the thread pool, as one decode GEMV call is; a call that would run past the buffer's end starts
   * over at its start): `reps` whole-read rates, then `reps` pass rates (bytes/s; empty if the
   * memory cannot be had). The buffer is `bytes` or the largest call, whichever is more. For
   * benchmarks (bench/host.ts). Throws TypeError when callBytes is not an array of integers,
   * RangeError for bytes < 2048, reps outside 1-1000, an empty list or one of over 100000 sizes, a
   * size < 1 or sizes summing to over 2^40.
   */
  readBandwidthInCalls(bytes: number, reps: number, callBytes: number[]): number[];
  /**
   * Bytes/s of the batch-1 decode GEMV kernels with one activation row, K = 1024: `linear` over a
   * float weight of `wDtype` (bits 0) or `linearQuantized` at bits 8 / 4, over about `bytes` of
   * weight in memory like readBandwidth's (mapped and released within the call): `reps` single
   * calls over all of it, then `reps` passes of consecutive calls of about `callBytes` each, then
   * the bytes one such call reads (2 reps + 1 numbers; empty if the memory cannot be had). For
   * benchmarks (bench/host.ts). Throws TypeError for bits other than 0, 8, 4 or a non-float wDtype,
   * RangeError for callBytes or bytes under 1 or reps outside 1-1000.
   */
  decodeReadBandwidth(wDtype: number, bits: number, callBytes: number, bytes: number, reps: number): number[];

  /**
   * Bytes/s of the same decode GEMV kernels as decodeReadBandwidth where W stays in cache: each
   * pool thread calls the kernel over its own weight of about `bytes` (whole rows of K = 1024, at
   * least one; 1 <= bytes <= 2^30, so up to 2^30 bytes a thread; bits 8 / 4: the GEMV kernel alone,
   * the activation quantized once per task rather than per call), all threads at once, ~256 MiB
   * of weight (at most 65536 calls) per thread and rep: `reps` rates (all threads' weight bytes /
   * wall time), then the bytes each thread's call reads (reps + 1 numbers; empty if the memory
   * cannot be had). For benchmarks (bench/host.ts). Throws TypeError for bits or wDtype as
   * decodeReadBandwidth does, RangeError for bytes or reps out of range (1..2^30, 1..1000).
   */
  decodeComputeRate(wDtype: number, bits: number, bytes: number, reps: number): number[];

  /**
   * Every pool thread spins reading the steady clock for `seconds`, all at once, counting each
   * gap between two reads longer than `minGapUs` microseconds (time the thread did not run: an
   * interrupt, the hypervisor, another tenant): the number of threads T, then for each thread its
   * gaps and their total seconds, then the median, 99th percentile and largest of the threads'
   * first 65536 gaps each, in microseconds (0 without gaps), then the fraction of those gaps' time
   * that all T threads lost at once, over the span every thread recorded (1 with one thread that
   * had gaps, 0 without gaps, NaN when the threads' spans do not overlap: a task run after
   * another's); 2 T + 5 numbers. For benchmarks
   * (bench/host.ts). Throws RangeError for seconds outside (0, 10] or minGapUs outside [0, 1e6]
   * (NaN included), TypeError for arguments that are not numbers.
   */
  hostStalls(seconds: number, minGapUs: number): number[];

  /**
   * Strided copy with dtype conversion: for every index i of `shape`,
   * dst[sum(i*dstStrides)] = convert(src[sum(i*srcStrides)]). Any dtype to any dtype
   * (float -> int truncates toward zero; to bool is x != 0). Used for contiguous(), cast, cat.
   */
  copy(src: Buf, srcDtype: number, srcStrides: number[], dst: Buf, dstDtype: number,
       dstStrides: number[], shape: number[]): void;

  /** out[i] = op(x[i]) for i < n; x, out contiguous float32. out may alias x. */
  unary(op: number, x: Buf, out: Buf, n: number): void;

  /**
   * Broadcasting binary op. a and b have the same dtype `dtype` (float32, int32, int64, or bool for
   * logical ops) and are read through strides over `shape` (stride 0 = broadcast); out is
   * contiguous over `shape`, of dtype `dtype` for arithmetic and bool for comparisons/logical.
   * Integer division truncates toward zero; integer pow is not supported (TypeError).
   */
  binary(op: number, dtype: number, a: Buf, aStrides: number[], b: Buf, bStrides: number[],
         out: Buf, shape: number[]): void;

  /**
   * A fused chain of float32 elementwise ops in one pass (compile/'s fusion). `prog` (Int32Array)
   * holds 6 ints per step: [0 unary | 1 binary, UNARY/BINARY code (binary: add..pow), operand a kind
   * (0 input, 1 earlier step), a index, operand b kind, b index]. `nin` <= 6 float32 inputs, each a
   * buffer with strides over `shape`, then null/[] for the unused ones; the last step's value is
   * written to the contiguous float32 `out`. Throws RangeError on a malformed step.
   */
  fusedElementwise(prog: Int32Array, nsteps: number, nin: number, ...inputsOutShape: (Buf | number[] | null)[]): void;

  /** out = cond ? a : b, broadcast through strides over `shape`; cond bool; a, b, out of `dtype`. */
  where(cond: Buf, condStrides: number[], a: Buf, aStrides: number[], b: Buf, bStrides: number[],
        dtype: number, out: Buf, shape: number[]): void;

  /** Reduce the last axis of a contiguous [outer, n] tensor of `dtype` (float32, int32 or int64;
   * sums of ints are int64, of floats float32) into out [outer]. */
  reduce(op: number, x: Buf, dtype: number, out: Buf, outer: number, n: number): void;

  /** Inclusive cumulative sum along the last axis of contiguous [outer, n]; dtype float32 or int64
   * (in and out same dtype). */
  cumsum(x: Buf, dtype: number, out: Buf, outer: number, n: number): void;

  /** Row-wise softmax (log=0) or log_softmax (log=1) over the last axis of contiguous float32
   * [rows, n]. -inf entries give 0; a row of all -inf gives all 0 (softmax) / -inf (log). */
  softmax(x: Buf, out: Buf, rows: number, n: number, log: number): void;

  /**
   * out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]): x float32 contiguous [M, K]; w [N, K]
   * contiguous of wDtype (float32, float16 or bfloat16; kept as stored, converted in registers);
   * bias null or [N] of biasDtype; out float32 [M, N]. This is nn.Linear / F.linear.
   */
  linear(x: Buf, w: Buf, wDtype: number, bias: Buf | null, biasDtype: number, out: Buf,
         M: number, N: number, K: number): void;

  /**
   * Mixture-of-experts projection (gather_mm): out[m, :] = x[m, :] @ weights[idx[m]]^T, with x
   * float32 contiguous [M, K], weights E Uint8Arrays of [N, K] contiguous wDtype (float32, float16
   * or bfloat16), idx int64 [M], out float32 [M, N]. Rows are sorted by expert and every expert's
   * GEMM runs in one parallel region. Throws RangeError naming an idx entry outside [0, E).
   */
  gatherLinear(x: Buf, weights: Uint8Array[], wDtype: number, idx: Buf, out: Buf, M: number, N: number, K: number): void;

  /**
   * The routed experts of a silu-gated MoE block (moe_experts.cc): out [T, H] = sum over K slots of
   * weights[t, j] * down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]), e = ids[t, j]; gateUp [E, 2I, H]
   * and down [E, H, I] of wDtype. Throws RangeError naming an id outside [0, E).
   */
  moeExperts(x: Buf, gateUp: Buf, down: Buf, wDtype: number, weights: Buf, ids: Buf, out: Buf, T: number, K: number, E: number, H: number, I: number): void;

  /**
   * linear plus a residual (compile's epilogue fusion): out = x @ w^T (+ bias) + residual, with x,
   * w, bias as for linear and residual, out float32 contiguous [M, N]; out shares no bytes with
   * x, w, bias or residual. One row adds the residual as the product's bias. bits 0: w a float
   * weight of wDtype (scales null); bits 8 / 4: w block-quantized codes as linearQuantized's q,
   * scales float32 [N, K / 32] (wDtype unused).
   */
  linearAdd(x: Buf, w: Buf, wDtype: number, bias: Buf | null, biasDtype: number, residual: Buf, out: Buf,
    M: number, N: number, K: number, scales: Buf | null, bits: number): void;

  /**
   * Up to three linears sharing one input x float32 [M, K] (compile's linear grouping), as one
   * thread-pool job for few rows: out_g = n(x) @ w_g^T with n the RMS norm of rmsNorm (normW [K]
   * of normDtype, eps, offset) or the identity when normW is null; w_g [N_g, K] of its dtype,
   * out_g float32 [M, N_g]; unused weights (g >= G) null. With prog (fusedElementwise's encoding,
   * inputs 0..G-1 = the products, every N_g equal), out0 [M, N] receives the chain's value and
   * out1, out2 are null. No out shares bytes with x, normW or a weight. bits 8 / 4: every w_g is
   * block-quantized (codes as linearQuantized's q, scales_g float32 [N_g, K / 32], dtypes unused);
   * bits 0: float weights, scales null.
   */
  linearGroup(x: Buf, M: number, K: number, normW: Buf | null, normDtype: number, eps: number, offset: number, G: number,
    w0: Buf, w0Dtype: number, N0: number, out0: Buf, w1: Buf | null, w1Dtype: number, N1: number, out1: Buf | null,
    w2: Buf | null, w2Dtype: number, N2: number, out2: Buf | null, prog: Int32Array | null, nsteps: number,
    scales0: Buf | null, scales1: Buf | null, scales2: Buf | null, bits: number): void;

  /**
   * compile's rotary + KV write (rotaryKVWrite): qOut = rotary(q) (q, qOut [B, L, Hq, D] float32,
   * both null for none), rotary(k) (k [B, L, Hkv, D] float32) and v (float32 [B * L, Hkv, Dv])
   * stored at `slots` (int32 [B * L]) of kCache [N, bs, Hkv, D] and vCache [N, bs, Hkv, Dv] of
   * kvDtype, as rotary then pagedKVWrite. cos/sin float32 [B, L, R]; with rows (int32/int64
   * [B * L] of rowsDtype) they are tables [P, R] and token t uses row rows[t] (RangeError outside).
   * With qNorm and kNorm (weights [D] of normDtype; both null for none), q and k are first
   * normalized per head as rmsNorm(x, weight, normEps, normOffset) (TypeError if one is null).
   */
  rotaryKVWrite(q: Buf | null, qOut: Buf | null, k: Buf, v: Buf, cos: Buf, sin: Buf, kCache: Buf, vCache: Buf, slots: Buf,
    rows: Buf | null, rowsDtype: number, B: number, L: number, Hq: number, Hkv: number, D: number, Dv: number, R: number, P: number,
    N: number, bs: number, kvDtype: number, qNorm: Buf | null, kNorm: Buf | null, normDtype: number, normEps: number, normOffset: number): void;

  /**
   * One decode step of a pre-norm rotary attention block over a KV cache's buffers (the eager
   * fused op tensor/fused_attention.ts decodeAttentionResidual): q, k, v (float32 [B, Hq * D],
   * [B, Hkv * D], [B, Hkv * Dv], written) = n(x) @ wq/wk/wv^T as linearGroup with G = 3 (x float32
   * [B, K], the same norm and weight arguments, one `bits` for the three); then as rotaryKVWrite
   * with L = 1 and the slots b * capacity + at of kCache / vCache ([B, capacity, Hkv, D|Dv] of
   * kvDtype: B blocks of `capacity` positions) and the per-head norms qNorm / kNorm (weights [D] of
   * qkNormDtype, or both null); cos / sin float32 [B, R]; then as pagedAttention over positions
   * [0, at] of each row (block table [b]); then out = residual + attn @ wo^T + bias as linearAdd
   * (wo [N, Hq * Dv] of woDtype, or block-quantized with so and bitsO; residual, out float32
   * [B, N]). Every step is that export's kernel, so the results equal the four calls'. Throws as
   * those exports do, before anything is written; at must be < capacity.
   */
  decodeAttention(x: Buf, B: number, K: number, normW: Buf | null, normDtype: number, eps: number, offset: number,
    wq: Buf, wqDtype: number, wk: Buf, wkDtype: number, wv: Buf, wvDtype: number, sq: Buf | null, sk: Buf | null, sv: Buf | null, bits: number,
    q: Buf, k: Buf, v: Buf, qNorm: Buf | null, kNorm: Buf | null, qkNormDtype: number, qkEps: number, qkOffset: number,
    cos: Buf, sin: Buf, R: number, kCache: Buf, vCache: Buf, kvDtype: number, capacity: number, at: number,
    Hq: number, Hkv: number, D: number, Dv: number, scale: number, softcap: number,
    wo: Buf, woDtype: number, so: Buf | null, bitsO: number, bias: Buf | null, biasDtype: number, residual: Buf, out: Buf, N: number): void;

  /**
   * compile's linear + argmax (linearArgmax): out[m] (int64 [M]) = argmax over n of
   * (n(x) @ w^T)[m, n] as reduce's argmax (the first NaN, else the first maximum); x float32
   * [M, K], n the RMS norm of linearGroup (normW null: none), w [N, K] of wDtype (bits 0) or
   * block-quantized with scales (bits 8 / 4, as linearAdd's).
   */
  linearArgmax(x: Buf, M: number, K: number, normW: Buf | null, normDtype: number, eps: number, offset: number,
    w: Buf, wDtype: number, N: number, out: Buf, scales: Buf | null, bits: number): void;

  /**
   * Batched float32 matmul with arbitrary strides: for b < batch,
   * out[b, m, n] = sum_k a[b*as0 + m*as1 + k*as2] * bm[b*bs0 + k*bs1 + n*bs2];
   * out contiguous [batch, M, N].
   */
  matmul(a: Buf, aStrides: number[], b: Buf, bStrides: number[], out: Buf,
         batch: number, M: number, N: number, K: number): void;

  /**
   * Scaled dot-product attention with grouped KV heads (Hq % Hkv == 0; query head h reads kv
   * head floor(h / (Hq / Hkv))).
   * q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv]: float32, read through 4 strides each
   * (in the order B, H, L, D). out: float32 contiguous [B, Lq, Hq, Dv].
   * score = (q . k) * scale; if softcap > 0: score = softcap * tanh(score / softcap);
   * then masking: if causalOffset >= 0, key j is masked for query i when j > i + causalOffset;
   * if window > 0 (and causalOffset >= 0), also when j <= i + causalOffset - window (sliding
   * window of `window` keys);
   * mask: null or a float32 additive mask read as mask[b*ms0 + h*ms1 + i*ms2 + j] (3 strides,
   * stride 0 to broadcast), added after softcap. A query whose keys are all masked outputs zeros.
   * Softmax in float32, then out = p @ v. Mirrors transformers' eager_attention_forward.
   * k and v may instead both be float16 or bfloat16 (kvDtype; a half-precision KV cache), read
   * as stored.
   * sinks: null or float32 [Hq]: per query head one more softmax logit whose column is dropped
   * (gpt-oss attention sinks), so each row's probabilities sum below 1.
   */
  sdpa(q: Buf, qStrides: number[], k: Buf, kStrides: number[], v: Buf, vStrides: number[],
       out: Buf, mask: Buf | null, maskStrides: number[],
       B: number, Hq: number, Hkv: number, Lq: number, Lk: number, D: number, Dv: number,
       scale: number, softcap: number, causalOffset: number, window: number, kvDtype: number,
       sinks: Buf | null): void;

  /**
   * Paged KV write: for t < T, row t of k [T, Hkv, D] goes to slot slots[t] of kCache
   * [N, bs, Hkv, D] (slot = block * bs + offset), and likewise v [T, Hkv, Dv] into vCache.
   * k, v float32; the pools of kvDtype (float32, float16 or bfloat16: rounded to nearest even);
   * slots int32. A slot outside [0, N * bs) throws RangeError naming it.
   */
  pagedKVWrite(k: Buf, v: Buf, kCache: Buf, vCache: Buf, slots: Buf, T: number, N: number, bs: number,
               Hkv: number, D: number, Dv: number, kvDtype: number): void;

  /**
   * Paged attention over a ragged batch: query token t (q [T, Hq, D] float32) of sequence
   * s = tokenSeq[t] at position p = tokenPos[t] attends, with grouped kv heads, to the keys at
   * positions max(0, p - window + 1) .. p (window 0 = all) of its sequence, position j being slot
   * blockTables[s * maxBlocks + j / bs] * bs + j % bs of kCache [N, bs, Hkv, D] / vCache
   * [N, bs, Hkv, Dv] (pools of kvDtype, read as float32). score = (q . k) * scale, soft-capped
   * when softcap > 0, softmax in float32, out [T, Hq, Dv] = p @ v. Int32 tables/tokenSeq/tokenPos;
   * an entry outside its range throws.
   */
  pagedAttention(q: Buf, kCache: Buf, vCache: Buf, blockTables: Buf, tokenSeq: Buf, tokenPos: Buf, out: Buf,
                 T: number, Hq: number, Hkv: number, D: number, Dv: number, N: number, bs: number,
                 S: number, maxBlocks: number, scale: number, softcap: number, window: number, kvDtype: number): void;

  /** RMSNorm over the last axis of contiguous float32 [rows, n]:
   * out = x / sqrt(mean(x^2) + eps) * (offset + w); w [n] of wDtype (offset is 1 for Gemma). */
  rmsNorm(x: Buf, w: Buf, wDtype: number, out: Buf, rows: number, n: number, eps: number,
          offset: number): void;

  /**
   * Causal depthwise conv1d over time with a carried state (causal_conv1d.cc): x [B, L, C], w
   * [C, K], state [B, K - 1, C] or null (zeros); writes out [B, L, C] and the new state (the last
   * K - 1 rows of [state; x]) to stateOut. All float32 contiguous; stateOut must not alias state.
   */
  causalConv1d(x: Buf, w: Buf, state: Buf | null, out: Buf, stateOut: Buf, B: number, L: number, C: number, K: number): void;

  /**
   * The gated delta rule, one fused scan per (batch, head) over the tokens (gated_delta.cc):
   * q, k [B, L, H, Dk], v [B, L, H, Dv], g (log decay) and beta [B, L, H], state [B, H, Dk, Dv] or
   * null (zeros); writes out [B, L, H, Dv] and the final state to stateOut. All float32 contiguous.
   */
  gatedDeltaRule(q: Buf, k: Buf, v: Buf, g: Buf, beta: Buf, state: Buf | null, out: Buf, stateOut: Buf,
                 B: number, L: number, H: number, Dk: number, Dv: number): void;

  /** LayerNorm over the last axis: out = (x - mean) / sqrt(var + eps) * w + b (biased variance);
   * w, b [n] of their dtypes, either may be null (then 1 / 0). */
  layerNorm(x: Buf, w: Buf | null, wDtype: number, b: Buf | null, bDtype: number, out: Buf,
            rows: number, n: number, eps: number): void;

  /**
   * torch.nn.functional.conv2d (conv2d.cc): x float32 [N, C, H, W]; w [O, C / groups, kh, kw] of
   * wDtype (float32, float16 or bfloat16, read as stored); bias null or [O] of biasDtype; out
   * float32 [N, O, Ho, Wo] with Ho = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1 (likewise Wo);
   * all contiguous. Throws RangeError when groups does not divide C and O or the padded input is
   * smaller than the dilated kernel. Temporary memory is bounded (im2col in chunks).
   */
  conv2d(x: Buf, w: Buf, wDtype: number, bias: Buf | null, biasDtype: number, out: Buf,
         N: number, C: number, H: number, W: number, O: number, kh: number, kw: number,
         sh: number, sw: number, ph: number, pw: number, dh: number, dw: number, groups: number): void;

  /** GroupNorm (group_norm.cc) over float32 [N, C, S]: per (n, group of C / groups channels)
   * out = (x - mean) / sqrt(var + eps) * w[c] + b[c] (biased variance); w, b [C] of their dtypes
   * or null (1 / 0). */
  groupNorm(x: Buf, w: Buf | null, wDtype: number, b: Buf | null, bDtype: number, out: Buf,
            N: number, C: number, S: number, groups: number, eps: number): void;

  /** Nearest upsampling (upsample.cc), PyTorch's cpu index rule: out [B, Ho, Wo] = x [B, H, W]
   * at (min(floor(float32(ho) * scaleH), H - 1), min(floor(float32(wo) * scaleW), W - 1)), with
   * the scales rounded to float32. float32, contiguous. */
  upsampleNearest2d(x: Buf, out: Buf, B: number, H: number, W: number, Ho: number, Wo: number,
                    scaleH: number, scaleW: number): void;

  /**
   * Rotary position embedding, transformers' rotate_half convention, on x float32 contiguous
   * [B, L, H, D]; cos, sin float32 contiguous [B, L, R] (R = rotary dims <= D, even). For r < R/2:
   * out[..r] = x[r]*cos[r] - x[r+R/2]*sin[r]; out[..r+R/2] = x[r+R/2]*cos[r+R/2] + x[r]*sin[r+R/2];
   * dims >= R are copied unchanged. out may alias x.
   */
  rotary(x: Buf, cos: Buf, sin: Buf, out: Buf, B: number, L: number, H: number, D: number,
         R: number): void;

  /** Embedding lookup: out[i, :] = float32(table[ids[i], :]); table [V, dim] of tableDtype,
   * ids int32 or int64 (idsDtype) of length n. An id outside [0, V) throws RangeError naming it. */
  embedding(table: Buf, tableDtype: number, V: number, ids: Buf, idsDtype: number, out: Buf,
            n: number, dim: number): void;

  /** MXFP4 to float32 [rows, nb * 32] (transformers' convert_moe_packed_tensors): row r has nb
   * blocks of 16 bytes (e2m1 codes, low nibble first) at blocks[r * nb * 16], and their uint8
   * scale exponents (bias 127) at scales[r * scaleRow]. */
  dequantMxfp4(blocks: Buf, scales: Buf, scaleRow: number, out: Buf, rows: number, nb: number): void;

  /** Block quantization (llama.cpp q8_0 / q4_0 layouts, float32 scales): w [N, K] of wDtype
   * (K a multiple of 32) -> q (bits 8: N*K int8 codes; bits 4: N*K/2 bytes of nibble pairs) and
   * scales float32 [N, K / 32]. */
  quantizeBlocks(w: Buf, wDtype: number, bits: number, q: Buf, scales: Buf, N: number, K: number): void;

  /** out [M, N] float32 = x [M, K] float32 @ W^T (+ bias [N] of biasDtype), W block-quantized as
   * quantizeBlocks writes it. */
  linearQuantized(x: Buf, q: Buf, scales: Buf, bits: number, bias: Buf | null, biasDtype: number, out: Buf,
                  M: number, N: number, K: number): void;

  /** linearQuantized of one x [M, K] with 2 or 3 weights, each given as the 6 arguments q, scales,
   * bias, biasDtype, out, N (22 arguments; for 2 weights the third's q null): x is quantized once
   * and all their rows run in one pool job. */
  linearQuantizedGroup(x: Buf, bits: number, M: number, K: number, ...weights: (Buf | number | null)[]): void;

  /** out [M, N] float32 = x @ W^T (+ bias), W a GPTQ (awq 0) / AWQ (awq 1) packed weight with G
   * groups (KernelSignatures.linearPackedInt). A g_idx entry outside [0, G) throws RangeError. */
  linearPackedInt(x: Buf, qweight: Buf, qzeros: Buf, scales: Buf, gIdx: Buf, bits: number, awq: number, zeroOffset: number,
                  bias: Buf | null, biasDtype: number, out: Buf, M: number, N: number, K: number, G: number): void;

  /** out [M, N] float32 = x @ W^T (+ bias), W float8_e4m3fn bytes [N, K] times scaleInv float32
   * [ceil(N / blockN), ceil(K / blockK)] per block (KernelSignatures.linearFp8Block). */
  linearFp8Block(x: Buf, weight: Buf, scaleInv: Buf, blockN: number, blockK: number, bias: Buf | null, biasDtype: number,
                 out: Buf, M: number, N: number, K: number): void;

  /** Row-wise sort of contiguous float32 [rows, n]; stable; values and int64 indices out. */
  sort(x: Buf, outValues: Buf, outIndices: Buf, rows: number, n: number, descending: number): void;

  /** Row-wise top-k (largest first, ties by lower index) of float32 [rows, n]; values float32 and
   * int64 indices, each [rows, k]. */
  topk(x: Buf, outValues: Buf, outIndices: Buf, rows: number, n: number, k: number): void;
  /**
   * A native graph of recorded calls (export `names[i]` with arguments `args[i]`: null, numbers,
   * TypedArrays, arrays of numbers); `slotRefs` rows [node, arg, slot, byteStart, byteLength] mark
   * the buffer arguments that view bytes of a graphRun slot. Throws TypeError naming the node and
   * argument it cannot hold.
   */
  graphCreate(names: string[], args: unknown[][], slotRefs: number[][]): unknown;
  /** Runs every node of `graph` in order, in this one call (`slots`: this replay's slot buffers). */
  graphRun(graph: unknown, slots: Buf[]): void;
}

let cached: NativeCpu | undefined;

/**
 * Load the addon (once). `#cpu-addon` is ./addon_node.ts in Node (throws a clear error when the
 * addon was not built) and ./addon_browser.ts in browsers (throws: use the webgpu device).
 */
export function native(): NativeCpu {
  return recorder ?? (cached ??= loadCpuAddon() as NativeCpu);
}

let recorder: NativeCpu | null = null;

/**
 * Run `fn` with every addon call it makes through native() recorded instead of run: `record`
 * gets the addon function, its arguments and its export name (./graph.ts records a compiled graph
 * this way).
 */
export function recordNativeCalls(record: (fn: (...args: unknown[]) => unknown, args: unknown[], name: string) => void, fn: () => void): void {
  const addon = (cached ??= loadCpuAddon() as NativeCpu) as unknown as Record<string, (...args: unknown[]) => unknown>;
  recorder = new Proxy({}, { get: (_t, name: string) => (...args: unknown[]) => record(addon[name], args, name) }) as NativeCpu;
  try {
    fn();
  } finally {
    recorder = null;
  }
}
