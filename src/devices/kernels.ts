/**
 * The kernel registry: kernels keyed by (op, device type), as in TensorFlow.js's kernel_registry.
 * Registration is explicit and a duplicate throws; a missing kernel throws
 * "op X has no kernel on device Y". The front-end (tensor/ops.ts) validates arguments, computes
 * output shapes and allocates outputs; a kernel only computes. Every signature below states what
 * the front-end guarantees (contiguity, dtypes), so a backend implements no more than that.
 */
import type { TensorView } from "./view.js";

export type UnaryOp =
  | "neg" | "exp" | "log" | "sqrt" | "rsqrt" | "tanh" | "sigmoid" | "silu" | "gelu" | "gelu_tanh"
  | "abs" | "sin" | "cos" | "relu" | "softplus" | "reciprocal" | "square" | "erf";
export type BinaryOp =
  | "add" | "sub" | "mul" | "div" | "maximum" | "minimum" | "pow"
  | "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "logical_and" | "logical_or";
export type ReduceOp = "sum" | "mean" | "max" | "min" | "argmax" | "argmin" | "prod";

export interface SdpaParams {
  scale: number;
  /** tanh soft-capping of scores (Gemma 2); 0 = off. */
  softcap: number;
  /** Causal masking: key j is masked for query i when j > i + causalOffset; -1 = no causal mask. */
  causalOffset: number;
  /** Sliding window size in keys (with causalOffset >= 0); 0 = unlimited. */
  window: number;
  /** Attention sinks: contiguous float32 [Hq], one extra softmax logit per query head whose column is dropped; null = none. */
  sinks: TensorView | null;
}

/** conv2d geometry (torch.nn.functional.conv2d), per spatial dim [h, w]. */
export interface Conv2dParams {
  stride: [number, number];
  padding: [number, number];
  dilation: [number, number];
  groups: number;
}

export interface PagedAttentionParams {
  scale: number;
  /** tanh soft-capping of scores; 0 = off. */
  softcap: number;
  /** Sliding window in keys; 0 = unlimited. */
  window: number;
}

/** An operand of a fused step: input `input` of the fused kernel, or the value of an earlier step. */
export type FusedOperand = { readonly input: number } | { readonly step: number };

/** One step of a fused elementwise chain (compile/'s fusion pass): a float32 op on operands. */
export interface FusedStep {
  readonly op: UnaryOp | BinaryOp;
  readonly args: readonly FusedOperand[];
}

/** Binary ops a fused chain may contain (float32 in, float32 out). */
export const FUSABLE_BINARY: ReadonlySet<BinaryOp> = new Set(["add", "sub", "mul", "div", "maximum", "minimum", "pow"]);

/** The ops a device implements. `out` tensors are freshly allocated and contiguous unless noted. */
export interface KernelSignatures {
  /** dst[i] = cast(src[i]) over src's shape; both may be strided views (dst is written in place). */
  copy(src: TensorView, dst: TensorView): void;
  /** float32 contiguous x. */
  unary(op: UnaryOp, x: TensorView, out: TensorView): void;
  /** a, b: same dtype (float32/int32/int64, bool for logical ops), strided views already broadcast
   * to out's shape. out: that dtype, or bool for comparisons. */
  binary(op: BinaryOp, a: TensorView, b: TensorView, out: TensorView): void;
  /** cond bool, a/b same dtype as out; all strided views broadcast to out's shape. */
  where(cond: TensorView, a: TensorView, b: TensorView, out: TensorView): void;
  /** Reduce the last axis of contiguous x [..., n] into out [...]. */
  reduce(op: ReduceOp, x: TensorView, out: TensorView): void;
  /** Inclusive cumsum over the last axis; x contiguous float32 or int64. */
  cumsum(x: TensorView, out: TensorView): void;
  /** Softmax (or log-softmax) over the last axis of contiguous float32 x. */
  softmax(x: TensorView, out: TensorView, log: boolean): void;
  /** out [M, N] f32 = x [M, K] f32 @ w[N, K]^T (+ bias[N]); w/bias float32, float16 or bfloat16. */
  linear(x: TensorView, w: TensorView, bias: TensorView | null, out: TensorView): void;
  /** Linear with a weight chosen per row (mixture-of-experts experts; MLX's gather_mm):
   * out[m, :] = x[m, :] @ w[idx[m]]^T. x [M, K] contiguous float32; idx [M] contiguous int64 with
   * values in [0, w.length) (the front-end cannot read them: a kernel throws RangeError where it can
   * check); w: E weights [N, K], contiguous, of one dtype (float32, float16 or bfloat16); out [M, N]
   * float32. Rows of one expert may appear anywhere, in any number (including none). */
  gatherLinear(x: TensorView, w: TensorView[], idx: TensorView, out: TensorView): void;
  /** The routed experts of a mixture-of-experts block with silu-gated MLPs, fused (optional: the
   * front-end composes gatherLinear where a device lacks it): out[t] = sum_j weights[t, j] *
   * down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]), e = ids[t, j]. x [T, H] contiguous float32;
   * gateUp [E, 2I, H] (gate rows 0..I, up rows I..2I) and down [E, H, I] contiguous, of one dtype
   * (float32, float16 or bfloat16); weights [T, K] contiguous float32; ids [T, K] contiguous int64 in
   * [0, E) (a kernel throws RangeError where it can check); out [T, H] float32. */
  moeExperts(x: TensorView, gateUp: TensorView, down: TensorView, weights: TensorView, ids: TensorView, out: TensorView): void;
  /** out [B, M, N] = a [B, M, K] @ b [B, K, N]; a, b float32 strided 3-D views. */
  matmul(a: TensorView, b: TensorView, out: TensorView): void;
  /** q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] strided views, q float32, k and v
   * both float32, both float16 or both bfloat16; mask null or
   * float32 additive, a view broadcast to [B, Hq, Lq, Lk] with unit last stride; out [B, Lq, Hq, Dv]. */
  sdpa(q: TensorView, k: TensorView, v: TensorView, mask: TensorView | null, out: TensorView, p: SdpaParams): void;
  /** Attention through a paged KV cache (vLLM's PagedAttention), over a ragged batch of T query
   * tokens: q [T, Hq, D] contiguous float32; kCache [N, bs, Hkv, D] / vCache [N, bs, Hkv, Dv]
   * contiguous block pools of one dtype (float32, bfloat16 or float16; a device taking fewer
   * declares it with restrictPoolDtypes); blockTables [S, maxBlocks] int32 (block ids of each sequence);
   * tokenSeq [T] int32 (sequence of each token, < S); tokenPos [T] int32 (its position). Token t
   * attends to the keys at positions max(0, pos - window + 1) .. pos of its sequence, whose slots
   * are blockTables[seq][p / bs] * bs + p % bs; out [T, Hq, Dv]. */
  pagedAttention(q: TensorView, kCache: TensorView, vCache: TensorView, blockTables: TensorView, tokenSeq: TensorView, tokenPos: TensorView, out: TensorView, p: PagedAttentionParams): void;
  /** Write k [T, Hkv, D] / v [T, Hkv, Dv] (contiguous float32) into the pools kCache
   * [N, bs, Hkv, D] / vCache [N, bs, Hkv, Dv] at slots [T] int32 (slot = block * bs + offset). */
  pagedKVWrite(k: TensorView, v: TensorView, kCache: TensorView, vCache: TensorView, slots: TensorView): void;
  /** out = x * rsqrt(mean(x^2) + eps) * (offset + w) over the last axis; x contiguous float32. */
  rmsNorm(x: TensorView, w: TensorView, out: TensorView, eps: number, offset: number): void;
  /** Causal depthwise conv1d with a carried state: x [B, L, C], w [C, K], state [B, K - 1, C] or
   * null (zeros), all contiguous float32; writes out [B, L, C] and the new state into stateOut
   * [B, K - 1, C] (a fresh tensor). See tensor/ops.ts. */
  causalConv1d(x: TensorView, w: TensorView, state: TensorView | null, out: TensorView, stateOut: TensorView): void;
  /** The gated delta rule scan (Gated DeltaNet): q, k [B, L, H, Dk], v [B, L, H, Dv], g, beta
   * [B, L, H], state [B, H, Dk, Dv] or null (zeros), all contiguous float32; writes out
   * [B, L, H, Dv] and the final state into stateOut [B, H, Dk, Dv]. See tensor/ops.ts. */
  gatedDeltaRule(q: TensorView, k: TensorView, v: TensorView, g: TensorView, beta: TensorView, state: TensorView | null, out: TensorView, stateOut: TensorView): void;
  /** LayerNorm over the last axis; x contiguous float32; w, b may be null. */
  layerNorm(x: TensorView, w: TensorView | null, b: TensorView | null, out: TensorView, eps: number): void;
  /** out [N, O, Ho, Wo] f32 = conv2d(x [N, C, H, W] f32, w [O, C / groups, kh, kw] float32/16/bf16
   * as stored, bias [O] float32/16/bf16 or null), all contiguous; Ho, Wo as torch computes them
   * (the front-end checks they are >= 1 and that groups divides C and O). */
  conv2d(x: TensorView, w: TensorView, bias: TensorView | null, out: TensorView, p: Conv2dParams): void;
  /** GroupNorm over x [N, C, S] contiguous f32 (S = spatial size, may be 1): each (n, group of
   * C / groups channels) normalised with its mean and biased variance, then * w[c] + b[c]; w, b
   * [C] contiguous float32/16/bf16 or null; out [N, C, S]. */
  groupNorm(x: TensorView, w: TensorView | null, b: TensorView | null, out: TensorView, groups: number, eps: number): void;
  /** Nearest upsampling: out [B, Ho, Wo] = x [B, H, W] at (min(floor(ho * scaleH), H - 1),
   * min(floor(wo * scaleW), W - 1)), the products in float32 (scales are float32 values); x and
   * out contiguous float32. */
  upsampleNearest2d(x: TensorView, out: TensorView, scaleH: number, scaleW: number): void;
  /** x [B, L, H, D] contiguous float32; cos/sin [B, L, R] contiguous float32; rotate_half style. */
  rotary(x: TensorView, cos: TensorView, sin: TensorView, out: TensorView): void;
  /** out [n, dim] float32 = table[ids]; table [V, dim] contiguous (any float dtype); ids contiguous
   * int32/int64. Throws RangeError on an id outside [0, V). */
  embedding(table: TensorView, ids: TensorView, out: TensorView): void;
  /**
   * MXFP4 to float32: blocks int32 [R, nb, 4] (each block's 16 packed bytes as 4 little-endian
   * words) and scales int32 [R, S] (each row's nb scale bytes, padded to S = ceil(nb / 4) words),
   * both contiguous -> out float32 [R, nb * 32].
   */
  dequantMxfp4(blocks: TensorView, scales: TensorView, out: TensorView): void;
  /**
   * Block quantization of a weight (llama.cpp's q8_0 / q4_0 layouts with float32 scales): w [N, K]
   * contiguous float32/16/bf16, K a multiple of 32 -> q int32 [N, K * bits / 32] (the payload bytes
   * as little-endian words: bits 8, 32 int8 codes per block; bits 4, 16 bytes per block, byte j
   * holding element j in its low nibble and j + 16 in its high nibble, value = nibble - 8) and
   * scales float32 [N, K / 32]; both contiguous.
   */
  quantizeBlocks(w: TensorView, bits: 4 | 8, q: TensorView, scales: TensorView): void;
  /** out [M, N] f32 = x [M, K] f32 @ W^T (+ bias[N], float32/16/bf16), W as quantizeBlocks writes
   * it (q int32 [N, K * bits / 32], scales float32 [N, K / 32]); all contiguous. */
  linearQuantized(x: TensorView, q: TensorView, scales: TensorView, bits: 4 | 8, bias: TensorView | null, out: TensorView): void;
  /** linearQuantized of one x [M, K] with each of 2 or 3 weights of the same bits (qs[i], scales[i],
   * biases[i] as linearQuantized takes them; outs[i] [M, N_i]): one call, the input quantized once
   * (decode's q/k/v and gate/up projections). */
  linearQuantizedGroup(x: TensorView, qs: TensorView[], scales: TensorView[], biases: (TensorView | null)[], bits: 4 | 8, outs: TensorView[]): void;
  /**
   * Linear with a GPTQ / AWQ packed weight (Hub checkpoints, see tensor/quant_hub_ops.ts): out
   * [M, N] f32 = x [M, K] f32 @ W^T (+ bias[N], float32/16/bf16), w[n, k] = (q - (z + zeroOffset))
   * * scales[g_idx[k], n]. GPTQ (awq false, bits 4 or 8): qweight int32 [K / (32 / bits), N] packed
   * along K, low bits first; AWQ (awq true, bits 4): qweight int32 [K, N / 8] packed along N in
   * AutoAWQ's order [0, 2, 4, 6, 1, 3, 5, 7]. qzeros int32 [G, N / (32 / bits)] packed along N as
   * the layout's; scales float32 [G, N]; gIdx int32 [K] with values in [0, G). All contiguous.
   */
  linearPackedInt(x: TensorView, qweight: TensorView, qzeros: TensorView, scales: TensorView, gIdx: TensorView,
                  bits: 4 | 8, awq: boolean, zeroOffset: 0 | 1, bias: TensorView | null, out: TensorView): void;
  /**
   * Linear with an FP8 block-scaled weight (DeepSeek-V3 / Qwen3-FP8): out [M, N] f32 = x [M, K] f32
   * @ W^T (+ bias[N]), W float8_e4m3fn [N, K] held as int32 words [N, K / 4] (the same bytes), each
   * [blockN, blockK] block multiplied by scaleInv float32 [ceil(N / blockN), ceil(K / blockK)].
   */
  linearFp8Block(x: TensorView, weight: TensorView, scaleInv: TensorView, blockN: number, blockK: number,
                 bias: TensorView | null, out: TensorView): void;
  /** Row-wise stable sort of contiguous float32 [..., n]; values and int64 indices. */
  sort(x: TensorView, values: TensorView, indices: TensorView, descending: boolean): void;
  /** Row-wise top-k (largest first) of contiguous float32 [..., n]; values and int64 indices. */
  topk(x: TensorView, k: number, values: TensorView, indices: TensorView): void;
  /** A fused chain of float32 elementwise ops, one pass (made by compile/'s fusion; called eagerly by
   * tensor/fused.ts siluMul): inputs float32 strided views broadcast to out's shape; per element, each
   * step applies its unary op or FUSABLE_BINARY op to inputs or earlier steps' values; the last step's
   * value goes to out (float32). Every step's value is used once, by a later step, except the last. */
  fusedElementwise(steps: readonly FusedStep[], inputs: TensorView[], out: TensorView): void;
  /** out = x @ w^T + bias + residual (made by compile/'s epilogue fusion; called eagerly by
   * tensor/fused.ts linearResidual and gatedMlpResidual): x float32 [M, K], w [N, K] as linear, bias
   * [N] or null, residual and out contiguous float32 [M, N] (out shares no storage with x, w, bias or
   * residual). */
  linearAdd(x: TensorView, w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void;
  /** outs[i] = n(x) @ ws[i]^T for linears sharing one input (made by compile/'s linear grouping; called
   * eagerly by tensor/fused.ts normLinears and gatedMlpResidual): x contiguous float32 [M, K]; n =
   * rmsNorm(·, norm.weight, eps, offset) over K, or the identity when norm is null; ws[i] [N_i, K] as
   * linear (no bias), outs[i] contiguous float32 [M, N_i], sharing no storage with x, the norm weight
   * or a weight; at most 3 weights. With an `epilogue` (fusedElementwise's steps, input i = product i),
   * the weights share one shape [N, K] and outs is one contiguous float32 [M, N]: the chain's value of
   * the products. */
  linearGroup(x: TensorView, norm: LinearGroupNorm | null, ws: TensorView[], outs: TensorView[], epilogue?: readonly FusedStep[] | null): void;
  /** qOut = rotary(q), and rotary(k) and v written into the pools as pagedKVWrite does (made by
   * compile's rotary + KV-write fusion; called eagerly by tensor/fused.ts rotaryCacheWrite): q (or
   * null, with qOut) and k [B, L, H, D] contiguous float32 with cos/sin [B, L, R] as rotary; v [B * L,
   * Hkv, Dv]; kCache, vCache and slots as pagedKVWrite; the rotated k itself is not stored anywhere
   * else. With `rows` (contiguous int32/int64 [B * L], made by compile's rotary-gather fusion), cos/sin
   * are instead contiguous float32 tables [P, R] and token t uses row rows[t] (embedding(rows, table)'s
   * rows; an id outside [0, P) throws embedding's RangeError at the next read). */
  rotaryKVWrite(q: TensorView | null, qOut: TensorView | null, k: TensorView, v: TensorView, cos: TensorView, sin: TensorView,
    kCache: TensorView, vCache: TensorView, slots: TensorView, rows?: TensorView | null): void;
  /** out[m] = argmax over n of (n(x) @ w^T)[m, n], as reduce's argmax (the first NaN, else the first
   * maximum), made by compile's linear-argmax fusion (a greedy step's LM head), never by the
   * front-end: x contiguous float32 [M, K]; norm as linearGroup's, or null; w [N, K] as linear (no
   * bias); out contiguous int64 of M elements. */
  linearArgmax(x: TensorView, norm: LinearGroupNorm | null, w: TensorView, out: TensorView): void;
  /** out [T, N] = pagedAttention(q, …)'s [T, Hq * Dv] rows @ w^T + bias + residual (made by compile's
   * attention-projection fusion, never by the front-end): the arguments of pagedAttention (no out)
   * and of linearAdd (its x being the attention's output). */
  pagedAttentionLinearAdd(q: TensorView, kCache: TensorView, vCache: TensorView, blockTables: TensorView, tokenSeq: TensorView, tokenPos: TensorView,
    p: PagedAttentionParams, w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void;
  /** out [M, N] = h @ w^T + bias + residual with h [M, I] = linearGroup(x, norm, ws, [h], epilogue)
   * (made by compile's MLP fusion; called eagerly by tensor/fused.ts gatedMlpResidual: a gated MLP's
   * norm, gate/up, SiLU(gate) * up, down projection and residual add): the arguments of linearGroup
   * with an epilogue (no outs) and of linearAdd (its x being h); out shares no storage with x, the norm
   * weight or ws. */
  linearGroupLinearAdd(x: TensorView, norm: LinearGroupNorm | null, ws: TensorView[], epilogue: readonly FusedStep[],
    w: TensorView, bias: TensorView | null, residual: TensorView, out: TensorView): void;
  /** linearGroup with block-quantized weights (made by compile's linear grouping from
   * linearQuantized / linearQuantizedGroup nodes; called eagerly by tensor/fused_quantized.ts
   * normLinearsQuantized and gatedMlpResidualQuantized): ws[i] as linearQuantized
   * takes its weight, all of one bits, N_i its q's rows; each product equals linearQuantized's. */
  linearGroupQuantized(x: TensorView, norm: LinearGroupNorm | null, ws: QuantizedWeight[], outs: TensorView[], epilogue?: readonly FusedStep[] | null): void;
  /** linearAdd with a block-quantized weight (compile's epilogue fusion of linearQuantized and a
   * residual add; called eagerly by tensor/fused_quantized.ts linearResidualQuantized and
   * gatedMlpResidualQuantized): out = linearQuantized(x, w…, bias) + residual, shapes and aliasing as
   * linearAdd's. */
  linearAddQuantized(x: TensorView, w: QuantizedWeight, bias: TensorView | null, residual: TensorView, out: TensorView): void;
  /** linearArgmax with a block-quantized LM head (compile's linear-argmax fusion): the logits
   * linearQuantized computes, reduced as linearArgmax's. */
  linearArgmaxQuantized(x: TensorView, norm: LinearGroupNorm | null, w: QuantizedWeight, out: TensorView): void;
  /** rotaryKVWrite of q and k normalized per head first: rmsNorm(q, norm.q, eps, offset) and
   * rmsNorm(k, norm.k, …) over their last dim D (Qwen3's q_norm / k_norm), then rotary (cos/sin, or
   * with `rows` the tables, as rotaryKVWrite's) and the KV write; the values of rmsNorm then
   * rotaryKVWrite (called eagerly by tensor/fused.ts rotaryCacheWrite; made by compile's q/k-norm
   * fusion, compile/passes/rotary_norm.ts). */
  normRotaryKVWrite(q: TensorView, qOut: TensorView, k: TensorView, v: TensorView, cos: TensorView, sin: TensorView,
    kCache: TensorView, vCache: TensorView, slots: TensorView, norm: QKNorm, rows?: TensorView | null): void;
  /** One decode step of a pre-norm rotary attention block over a KV cache's buffers (called eagerly
   * by tensor/fused_attention.ts decodeAttentionResidual; never made by compile): q, k, v
   * (contiguous float32 [B, Hq * D], [B, Hkv * D], [B, Hkv * Dv], written) = linearGroup(x, norm,
   * qkv, [q, k, v]) (x contiguous float32 [B, K]; qkv all float or all block-quantized of one bits);
   * then normRotaryKVWrite (qkNorm) or rotaryKVWrite (null) of them with cos/sin [B, 1, R] into slot
   * b * capacity + at of kCache / vCache (contiguous [B, capacity, Hkv, D|Dv], pools of B blocks);
   * then pagedAttention of rotary(q) over positions [0, at] of row b's block (p.scale, p.softcap, no
   * window); then out [B, N] = linearAdd(attention [B, Hq * Dv], o, bias, residual). The values of
   * those kernels called in turn. */
  decodeAttention(x: TensorView, norm: LinearGroupNorm | null, qkv: (TensorView | QuantizedWeight)[], q: TensorView, k: TensorView, v: TensorView,
    qkNorm: QKNorm | null, cos: TensorView, sin: TensorView, kCache: TensorView, vCache: TensorView, at: number,
    p: { readonly scale: number; readonly softcap: number }, o: TensorView | QuantizedWeight, bias: TensorView | null, residual: TensorView, out: TensorView): void;
}

/** Per-head RMS norms of q and k (rmsNorm weights [D], eps and weight offset), as normRotaryKVWrite takes them. */
export interface QKNorm {
  readonly q: TensorView;
  readonly k: TensorView;
  readonly eps: number;
  readonly offset: number;
}

/** A block-quantized weight [N, K] as linearQuantized takes it (q int32 [N, K * bits / 32], scales
 * float32 [N, K / 32], both contiguous): the weight kind of the *Quantized fused kernels. */
export interface QuantizedWeight {
  readonly q: TensorView;
  readonly scales: TensorView;
  readonly bits: 4 | 8;
}

/** The RMS norm a linearGroup applies to its input first (rmsNorm's weight [K], eps and weight offset). */
export interface LinearGroupNorm {
  readonly weight: TensorView;
  readonly eps: number;
  readonly offset: number;
}

export type OpName = keyof KernelSignatures;

/** Kernels by device type, then op (two lookups: no key string is built per kernel call). */
const registry = new Map<string, Map<string, Function>>();

/** Register `fn` as op `op` on devices of `deviceType`. A duplicate registration throws. */
export function registerKernel<K extends OpName>(op: K, deviceType: string, fn: KernelSignatures[K]): void {
  let ops = registry.get(deviceType);
  if (!ops) registry.set(deviceType, (ops = new Map()));
  if (ops.has(op)) throw new Error(`kernel for op '${op}' on device '${deviceType}' is already registered`);
  ops.set(op, fn);
}

/** Register every kernel of a (partial) table. */
export function registerKernels(deviceType: string, table: Partial<KernelSignatures>): void {
  for (const [op, fn] of Object.entries(table)) registerKernel(op as OpName, deviceType, fn as never);
}

/**
 * Sees every kernel call made through getKernel while installed (compile/'s tracer): it gets the
 * op, the device type, the kernel and its arguments, and must run the kernel itself.
 */
export type KernelObserver = (op: OpName, deviceType: string, kernel: Function, args: unknown[]) => void;
let observer: KernelObserver | null = null;

/** Install (or with null remove) the kernel observer; returns the previous one. */
export function setKernelObserver(o: KernelObserver | null): KernelObserver | null {
  const prev = observer;
  observer = o;
  return prev;
}

/** Pool dtypes by device type, then op, where a device's kernels take fewer than the front-end's. */
const poolDtypes = new Map<string, Map<string, readonly string[]>>();

/**
 * Declare that op `op` on `deviceType` reads and writes KV block pools of these dtypes only (webgpu's
 * paged-attention kernels: float32); undeclared, a kernel takes every dtype its front-end allows.
 */
export function restrictPoolDtypes(op: OpName, deviceType: string, dtypes: readonly string[]): void {
  let ops = poolDtypes.get(deviceType);
  if (!ops) poolDtypes.set(deviceType, (ops = new Map()));
  ops.set(op, dtypes);
}

/** Whether op `op`'s kernel on `deviceType` takes KV block pools of `dtype` (see restrictPoolDtypes). */
export function kernelTakesPools(op: OpName, deviceType: string, dtype: string): boolean {
  return poolDtypes.get(deviceType)?.get(op)?.includes(dtype) ?? true;
}

/** Whether op `op` has a kernel on devices of `deviceType` (front-ends of optional fused ops). */
export function hasKernel(op: OpName, deviceType: string): boolean {
  return registry.get(deviceType)?.has(op) ?? false;
}

/** Look up a kernel; throws "op X has no kernel on device Y". */
export function getKernel<K extends OpName>(op: K, deviceType: string): KernelSignatures[K] {
  const fn = registry.get(deviceType)?.get(op);
  if (!fn) throw new Error(`op '${op}' has no kernel on device '${deviceType}'`);
  if (observer) {
    const seen = observer;
    return ((...args: unknown[]) => seen(op, deviceType, fn, args)) as KernelSignatures[K];
  }
  return fn as KernelSignatures[K];
}

/** Ops registered for a device type (for diagnostics and the conformance suite). */
export function registeredOps(deviceType: string): OpName[] {
  return [...(registry.get(deviceType)?.keys() ?? [])] as OpName[];
}
