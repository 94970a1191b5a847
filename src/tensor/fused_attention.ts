/**
 * A decode step of a pre-norm rotary attention block as one eager fused op (the attention half of
 * transformers' LlamaDecoderLayer / Qwen3DecoderLayer for one new position per row, with a KV cache
 * whose buffers it writes and attends in place):
 *
 *   n = rmsNorm(x, norm); q, k, v = n @ wq^T, n @ wk^T, n @ wv^T;
 *   q, k = rmsNorm per head (qkNorm, Qwen3's q_norm / k_norm), then rotary (cos, sin);
 *   k, v written at position `at` of each row's cache buffers; a = attention of q over positions [0, at];
 *   out = residual + a @ wo^T + oBias.
 *
 * decodeAttentionPlan checks a step once (before a caller reserves the cache room); its run is
 * one `decodeAttention` kernel call where the device registers it (cpu: the four kernels below run
 * in turn inside one addon call), else the ops it stands for (normLinears, rotaryCacheWrite,
 * cacheDecodeAttention or sdpa over the buffers, linearResidual, or their quantized forms), with
 * the same kernels in the same order where the device has them, so the same values. What the single
 * call saves is the JavaScript of three ops per layer and step (their checks, views and output
 * tensors) and three JS->native transitions.
 */
import { getKernel, hasKernel, type QuantizedWeight } from "../devices/kernels.js";
import { linearResidual, normLinears, rotaryCacheWrite, type QKNormParams, type RmsNormParams } from "./fused.js";
import { linearResidualQuantized, normLinearsQuantized, type BlockQuantized } from "./fused_quantized.js";
import { cacheDecodeAttention, canAttendInCache, pagedKernelsTake } from "./paged_attention.js";
import { checkSameDevice, empty, scaledDotProductAttention } from "./ops.js";
import { isFloating } from "./dtype.js";
import type { Tensor } from "./tensor.js";
import { traceObserver } from "./trace.js";

/** A projection's weight: float [N, K] as stored, or block-quantized (fused_quantized.ts). */
export type ProjectionWeight = Tensor | BlockQuantized;

/** The block's heads and attention options. */
export interface DecodeAttentionHeads {
  readonly numHeads: number;
  readonly numKvHeads: number;
  /** Head size of q and k (D). */
  readonly headDim: number;
  /** Head size of v (Dv); default headDim. */
  readonly valueDim?: number;
  /** Score scale (transformers: head_dim^-0.5 unless the family sets it). */
  readonly scale: number;
  /** tanh soft-capping of the scores; 0 = none. */
  readonly softcap: number;
}

/** The cache room of the new position: buffers [B, capacity, Hkv, D|Dv] and the position to write and attend through. */
export interface DecodeAttentionRoom {
  readonly keyBuffer: Tensor;
  readonly valueBuffer: Tensor;
  readonly at: number;
}

/** decodeAttentionResidual's arguments but the room and the projections' scratch. */
export interface DecodeAttentionStep {
  readonly x: Tensor;
  readonly norm: RmsNormParams | null;
  readonly qkv: readonly ProjectionWeight[];
  readonly qkNorm: QKNormParams | null;
  readonly cos: Tensor;
  readonly sin: Tensor;
  readonly heads: DecodeAttentionHeads;
  readonly o: ProjectionWeight;
  readonly oBias: Tensor | null;
  readonly residual: Tensor;
}

const quantized = (w: ProjectionWeight): w is BlockQuantized => "bits" in w;
const rowsOf = (w: ProjectionWeight) => (quantized(w) ? w.q.shape[0] : w.shape[0]);
const kernelWeight = (w: ProjectionWeight): Tensor | QuantizedWeight =>
  quantized(w) ? { q: w.q.contiguous(), scales: w.scales.contiguous(), bits: w.bits } : w.contiguous();
const shapeIs = (t: Tensor, s: readonly number[]) => t.ndim === s.length && t.shape.every((n, i) => n === s[i]);

/** A checked decode step (decodeAttentionPlan): run it on a cache room. */
export interface DecodeAttentionPlan {
  /**
   * The step on `room` (buffers [B, capacity, Hkv, D|Dv], contiguous, float32/16/bf16; positions
   * [0, at] of row b are row b's keys, at the new one, written here), with `outs` scratch for the
   * projections (float32 [B, 1, Hq, D], [B, 1, Hkv, D], [B, 1, Hkv, Dv]; their values afterwards
   * are unspecified): float32 [B, 1, N]. One kernel call where the room and the scratch fit and the
   * device's paged kernels take the buffers' dtype, else the separate ops (attention through the
   * paged decode kernel where the device's takes the buffers, else sdpa over them).
   */
  run(room: DecodeAttentionRoom, outs: { q: Tensor; k: Tensor; v: Tensor }): Tensor;
}

/**
 * The step `s` checked once for the one-kernel-call path (a caller makes the plan before it
 * reserves the cache room, so that nothing the step takes can throw after it), or null where that
 * path does not apply: tracing; a device without `decodeAttention`; x not float32 [B, 1, K]; a norm
 * weight not float [K]; wq/wk/wv not [Hq*D | Hkv*D | Hkv*Dv, K], all float or all block-quantized
 * of one bit width; qkNorm weights not [D] of one float dtype; cos/sin not [B, 1, R] (R <= D,
 * even); o not [N, Hq*Dv], oBias not float [N]; residual not float32 [B, 1, N]. Throws
 * checkSameDevice's error for tensors on several devices.
 */
export function decodeAttentionPlan(s: DecodeAttentionStep): DecodeAttentionPlan | null {
  const { x, norm, qkv, qkNorm, cos, sin, heads, o, oBias, residual } = s;
  const parts = (w: ProjectionWeight) => (quantized(w) ? [w.q, w.scales] : [w]);
  checkSameDevice("decode_attention", x, norm?.weight, ...qkv.flatMap(parts), qkNorm?.q, qkNorm?.k, cos, sin, ...parts(o), oBias, residual);
  if (traceObserver() !== null || !hasKernel("decodeAttention", x.device.type)) return null;
  if (x.dtype !== "float32" || x.ndim !== 3 || x.shape[1] !== 1 || x.shape[0] < 1) return null;
  const { numHeads: Hq, numKvHeads: Hkv, headDim: D, valueDim: Dv = D } = heads;
  const fits = (w: ProjectionWeight, n: number, k: number) => quantized(w)
    ? k % 32 === 0 && w.q.dtype === "int32" && w.scales.dtype === "float32" && w.q.ndim === 2 && w.q.shape[0] === n
      && w.q.shape[1] === (k * w.bits) / 32 && w.scales.ndim === 2 && w.scales.shape[0] === n && w.scales.shape[1] === k / 32
    : w.ndim === 2 && w.shape[0] === n && w.shape[1] === k && isFloating(w.dtype);
  const bits = (w: ProjectionWeight) => (quantized(w) ? w.bits : 0);
  const floatOf = (t: Tensor, shape: readonly number[]) => shapeIs(t, shape) && isFloating(t.dtype);
  const [B, , K] = x.shape, N = rowsOf(o), R = cos.shape[cos.ndim - 1];
  const ok = qkv.length === 3 && Hkv >= 1 && Hq % Hkv === 0 && fits(qkv[0], Hq * D, K) && fits(qkv[1], Hkv * D, K) && fits(qkv[2], Hkv * Dv, K)
    && qkv.every((w) => bits(w) === bits(qkv[0])) && fits(o, N, Hq * Dv) && (!oBias || floatOf(oBias, [N]))
    && residual.dtype === "float32" && shapeIs(residual, [B, 1, N]) && (!norm || floatOf(norm.weight, [K]))
    && (!qkNorm || (floatOf(qkNorm.q, [D]) && floatOf(qkNorm.k, [D]) && qkNorm.q.dtype === qkNorm.k.dtype))
    && shapeIs(cos, [B, 1, R]) && shapeIs(sin, [B, 1, R]) && R % 2 === 0 && R <= D;
  return ok ? { run: (room, outs) => (roomFits(s, room, outs) ? kernelCall(s, room, outs) : composed(s, room)) } : null;
}

/**
 * The decode step above (x float32 [B, 1, K]; norm (input_layernorm) or null; qkv = [wq [Hq*D, K],
 * wk [Hkv*D, K], wv [Hkv*Dv, K]] (no bias); qkNorm or null; cos/sin [B, 1, R] (R <= D, even); o
 * [N, Hq*Dv] with oBias [N] or null; residual float32 [B, 1, N]) on `room` with scratch `outs`, as
 * DecodeAttentionPlan.run: float32 [B, 1, N]. One kernel call where decodeAttentionPlan makes a plan
 * and the room fits, else the separate ops, which throw what those ops throw (checkSameDevice's
 * error, RangeError for shapes).
 */
export function decodeAttentionResidual(x: Tensor, norm: RmsNormParams | null, qkv: readonly ProjectionWeight[], qkNorm: QKNormParams | null,
                                        cos: Tensor, sin: Tensor, room: DecodeAttentionRoom, heads: DecodeAttentionHeads,
                                        o: ProjectionWeight, oBias: Tensor | null, residual: Tensor,
                                        outs: { q: Tensor; k: Tensor; v: Tensor }): Tensor {
  const step: DecodeAttentionStep = { x, norm, qkv, qkNorm, cos, sin, heads, o, oBias, residual };
  return decodeAttentionPlan(step)?.run(room, outs) ?? composed(step, room);
}

/** Whether the room and the scratch fit a planned step's one kernel call (checkSameDevice's error for another device). */
function roomFits(s: DecodeAttentionStep, room: DecodeAttentionRoom, outs: { q: Tensor; k: Tensor; v: Tensor }): boolean {
  const { x, heads } = s;
  const { keyBuffer: kBuf, valueBuffer: vBuf, at } = room;
  checkSameDevice("decode_attention", x, kBuf, vBuf, outs.q, outs.k, outs.v);
  const { numHeads: Hq, numKvHeads: Hkv, headDim: D, valueDim: Dv = D } = heads;
  const B = x.shape[0], cap = kBuf.shape[1];
  return pagedKernelsTake(x.device.type, kBuf.dtype) && shapeIs(kBuf, [B, cap, Hkv, D]) && shapeIs(vBuf, [B, cap, Hkv, Dv])
    && kBuf.dtype === vBuf.dtype && kBuf.isContiguous && vBuf.isContiguous && kBuf.offset === 0 && vBuf.offset === 0
    && Number.isInteger(at) && at >= 0 && at < cap
    && shapeIs(outs.q, [B, 1, Hq, D]) && shapeIs(outs.k, [B, 1, Hkv, D]) && shapeIs(outs.v, [B, 1, Hkv, Dv])
    && [outs.q, outs.k, outs.v].every((t) => t.dtype === "float32" && t.isContiguous);
}

/** The one decodeAttention kernel call of a planned step whose room fits. */
function kernelCall(s: DecodeAttentionStep, room: DecodeAttentionRoom, outs: { q: Tensor; k: Tensor; v: Tensor }): Tensor {
  const { x, norm, qkv, qkNorm, cos, sin, heads, o, oBias, residual } = s;
  const B = x.shape[0];
  const out = empty([B, 1, rowsOf(o)], "float32", x.device);
  const f32 = (t: Tensor) => (t.dtype === "float32" ? t : t.to("float32")).contiguous();
  getKernel("decodeAttention", x.device.type)(x.reshape(B, x.shape[2]).contiguous(), norm && { weight: norm.weight.contiguous(), eps: norm.eps, offset: norm.offset },
    qkv.map(kernelWeight), outs.q, outs.k, outs.v, qkNorm && { q: qkNorm.q.contiguous(), k: qkNorm.k.contiguous(), eps: qkNorm.eps, offset: qkNorm.offset },
    f32(cos), f32(sin), room.keyBuffer, room.valueBuffer, room.at, { scale: heads.scale, softcap: heads.softcap }, kernelWeight(o), oBias?.contiguous() ?? null,
    residual.contiguous(), out);
  return out;
}

/** decodeAttentionResidual as the separate ops (the same kernels in the same order where the device has them). */
function composed(s: DecodeAttentionStep, room: DecodeAttentionRoom): Tensor {
  const { x, norm, qkv, qkNorm, cos, sin, heads, o, oBias, residual } = s;
  const { numHeads: Hq, numKvHeads: Hkv, headDim: D, valueDim: Dv = D, scale, softcap } = heads;
  const { keyBuffer: kBuf, valueBuffer: vBuf, at } = room;
  const B = x.shape[0];
  const projected = qkv.every(quantized) ? normLinearsQuantized(x, norm, qkv as BlockQuantized[])
    : qkv.some(quantized) ? null : normLinears(x, norm, qkv as Tensor[]);
  if (!projected) throw new RangeError("decode_attention: the q/k/v weights must be all float or all block-quantized");
  const [q, k, v] = projected.map((t, i) => t.view(B, 1, [Hq, Hkv, Hkv][i], [D, D, Dv][i]));
  const qr = rotaryCacheWrite(q, k, v, cos, sin, kBuf, vBuf, at, qkNorm);
  let a: Tensor;
  if (canAttendInCache(qr, kBuf.dtype)) {
    a = cacheDecodeAttention(qr, kBuf, vBuf, at, { scale, softcap });
  } else {
    const keys = kBuf.narrow(1, 0, at + 1).transpose(1, 2), values = vBuf.narrow(1, 0, at + 1).transpose(1, 2);
    a = scaledDotProductAttention(qr.transpose(1, 2), keys, values, { scale, softcap }).transpose(1, 2).reshape(B, 1, Hq * Dv);
  }
  return quantized(o) ? linearResidualQuantized(a, o, oBias, residual) : linearResidual(a, o, oBias, residual);
}
