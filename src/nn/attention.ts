/**
 * Causal self-attention over a KV cache, shared by every decoder architecture. Mirrors the body of
 * transformers' <Arch>Attention.forward after the q/k/v projections and rotary: cache update,
 * eager attention (grouped-query heads, optional soft-capping and sliding window), and the merge
 * of heads back to [B, L, Hq*Dv]; and RotaryAttention, the q/k/v/o-projection attention module of
 * Llama and the families derived from it.
 */
import { linearResidual, normLinears, rotaryCacheWrite, type QKNormParams } from "../tensor/fused.js";
import { add, applyRotary, checkRotary, empty, scaledDotProductAttention } from "../tensor/ops.js";
import { cacheDecodeAttention, canAttendInCache } from "../tensor/paged_attention.js";
import { tidy } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import type { AttentionKVCache, KVReservation } from "./kv_cache.js";
import { linearResidualQuantized, normLinearsQuantized } from "../tensor/fused_quantized.js";
import { decodeAttentionPlan, type DecodeAttentionStep, type ProjectionWeight } from "../tensor/fused_attention.js";
import { isPlainFloat, isPlainQuantized, Linear, RMSNorm } from "./layers.js";
import { Module, type Parameter } from "./module.js";
import { forwardLinears } from "./quantized.js";

export interface CausalAttentionOptions {
  scale: number;
  /** Additive float mask broadcastable to [B, Hq, L, past + L] (padding), or null. */
  mask: Tensor | null;
  softcap?: number;
  /** Sliding window in keys (0 = full attention); the cache then keeps only the window. */
  window?: number;
  /** Attention sinks [Hq] (gpt-oss): one extra softmax logit per head whose column is dropped. */
  sinks?: Tensor | null;
}

/**
 * A layer cache that runs the attention itself (serve's paged KV cache, which reads keys and values
 * through block tables): attend takes causalAttention's arguments and returns [B, L, Hq*Dv].
 */
export interface SelfAttendingCache {
  attend(q: Tensor, k: Tensor, v: Tensor, o: CausalAttentionOptions): Tensor;
}

function attendsItself(cache: AttentionKVCache | null): cache is AttentionKVCache & SelfAttendingCache {
  return typeof (cache as Partial<SelfAttendingCache> | null)?.attend === "function";
}

/**
 * q [B, L, Hq, D], k [B, L, Hkv, D], v [B, L, Hkv, Dv] (heads not yet transposed, rotary applied)
 * -> [B, L, Hq*Dv]. Appends k/v to `cache` when given; attention is causal over past + new keys.
 * A sliding-window cache returns only the last keys, so the mask is cut to its last Lk columns.
 */
export function causalAttention(q: Tensor, k: Tensor, v: Tensor, cache: AttentionKVCache | null, o: CausalAttentionOptions): Tensor {
  if (attendsItself(cache)) return cache.attend(q, k, v, o);
  const kv = cache ? cache.update(k, v, o.window) : { keys: k.transpose(1, 2), values: v.transpose(1, 2) };
  return attendToKeys(q, kv.keys, kv.values, o);
}

/**
 * The attention of causalAttention once keys and values are known: q [B, L, Hq, D] with keys
 * [B, Hkv, Lk, D] and values [B, Hkv, Lk, Dv] (transposed, the last Lk positions, e.g. what a
 * cache update returned; Gemma 4's KV-sharing layers pass another layer's) -> [B, L, Hq*Dv].
 * The padding mask is cut to its last Lk columns.
 */
export function attendToKeys(q: Tensor, keys: Tensor, values: Tensor, o: CausalAttentionOptions): Tensor {
  const [B, L, Hq] = q.shape;
  const Lk = keys.shape[2], maskLk = o.mask?.shape[o.mask.ndim - 1] ?? 0;
  const mask = o.mask && maskLk > Lk ? o.mask.narrow(o.mask.ndim - 1, maskLk - Lk, Lk) : o.mask;
  const out = scaledDotProductAttention(q.transpose(1, 2), keys, values, {
    mask, scale: o.scale, isCausal: true, softcap: o.softcap, window: o.window, sinks: o.sinks,
  });
  return out.transpose(1, 2).reshape(B, L, Hq * values.shape[3]);
}

export interface RotaryAttentionOptions {
  hiddenSize: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  /** Bias on q_proj, k_proj and v_proj. */
  qkvBias: boolean;
  /** Bias on o_proj. */
  oBias: boolean;
  /** Sliding window in keys (0 = full attention). */
  window: number;
  /** eps of the RMSNorms q_norm/k_norm over each head's dims, applied before rotary (Qwen3); absent = none. */
  qkNormEps?: number;
  /** RMSNorm offset of q_norm/k_norm (1: Gemma 3's 1 + weight); default 0. */
  qkNormOffset?: number;
  /** Score scale; default headDim^-0.5 (Gemma 2/3: query_pre_attn_scalar^-0.5). */
  scale?: number;
  /** tanh soft-capping of the scores (Gemma 2 attn_logit_softcapping); 0 or absent = none. */
  softcap?: number;
  /** A learned attention-sink logit per query head, parameter `sinks` [numHeads] (gpt-oss). */
  sinks?: boolean;
}

/**
 * Self-attention with separate q/k/v/o projections and rotary positions: LlamaAttention and the
 * attentions derived from it (Mistral; Qwen2: q/k/v bias; Qwen3: per-head q_norm/k_norm; Gemma:
 * query_pre_attn_scalar scale, soft-capping, Gemma 3's (1 + w) q_norm/k_norm; gpt-oss: sinks).
 * Parameter names equal transformers'. forward: x [B, L, hidden] -> [B, L, hidden].
 */
export class RotaryAttention extends Module {
  readonly q_proj: Linear;
  readonly k_proj: Linear;
  readonly v_proj: Linear;
  readonly o_proj: Linear;
  readonly q_norm: RMSNorm | null;
  readonly k_norm: RMSNorm | null;
  readonly sinks: Parameter | null;
  constructor(private readonly o: RotaryAttentionOptions) {
    super();
    const { hiddenSize: h, numHeads: nq, numKvHeads: nkv, headDim: d } = o;
    this.q_proj = this.module("q_proj", new Linear(h, nq * d, o.qkvBias));
    this.k_proj = this.module("k_proj", new Linear(h, nkv * d, o.qkvBias));
    this.v_proj = this.module("v_proj", new Linear(h, nkv * d, o.qkvBias));
    this.o_proj = this.module("o_proj", new Linear(nq * d, h, o.oBias));
    const eps = o.qkNormEps;
    this.q_norm = eps === undefined ? null : this.module("q_norm", new RMSNorm(d, eps, o.qkNormOffset));
    this.k_norm = eps === undefined ? null : this.module("k_norm", new RMSNorm(d, eps, o.qkNormOffset));
    this.sinks = o.sinks ? this.param("sinks", [nq]) : null;
  }

  /** The options this attention was built with (head counts and sizes, window, sinks). */
  get options(): Readonly<RotaryAttentionOptions> { return this.o; }

  /** cos/sin [B, L, R] rotary tables; mask: additive padding mask or null; cache: this layer's KV cache. */
  forward(x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | null, cache: AttentionKVCache | null): Tensor {
    return tidy(() => this.attend(x, null, cos, sin, mask, cache, null));
  }

  /**
   * residual + forward(norm.forward(x), ...) (the attention half of a pre-norm decoder layer). With
   * plain float projections (no bias, no quantized or Hub weight) and a plain RMSNorm, the norm and
   * q/k/v are one kernel call (tensor/fused.ts normLinears), and with a plain float o_proj the output
   * projection and the residual add are one (linearResidual), where the device has those kernels;
   * a decode step that fits fusedDecodeStep is one decodeAttention call altogether.
   */
  forwardResidual(x: Tensor, norm: Module & { forward(x: Tensor): Tensor }, cos: Tensor, sin: Tensor, mask: Tensor | null,
                  cache: AttentionKVCache | null, residual: Tensor): Tensor {
    return tidy(() => this.attend(x, norm, cos, sin, mask, cache, residual));
  }

  /** q, k, v of `norm.forward(x)` (x itself when norm is null). */
  private project(x: Tensor, norm: (Module & { forward(x: Tensor): Tensor }) | null): Tensor[] {
    const qkv = [this.q_proj, this.k_proj, this.v_proj];
    if (norm instanceof RMSNorm && norm.forward === RMSNorm.prototype.forward && qkv.every((l) => !l.bias)) {
      const n = { weight: norm.weight.value, eps: norm.eps, offset: norm.offset };
      if (qkv.every(isPlainFloat)) return normLinears(x, n, qkv.map((l) => l.weight.value));
      const qs = qkv.map((l) => l.quantized!);
      if (qkv.every(isPlainQuantized) && qs.every((w) => w.bits === qs[0].bits)) return normLinearsQuantized(x, n, qs);
    }
    return forwardLinears(norm ? norm.forward(x) : x, qkv);
  }

  /** q_norm / k_norm as rotaryCacheWrite takes them, when both are plain RMSNorms (forward not replaced) of one eps and offset. */
  private plainQKNorm(): QKNormParams | null {
    const qn = this.q_norm, kn = this.k_norm;
    const plain = (n: RMSNorm | null): n is RMSNorm => n !== null && n.forward === RMSNorm.prototype.forward;
    if (!plain(qn) || !plain(kn) || qn.eps !== kn.eps || qn.offset !== kn.offset) return null;
    return { q: qn.weight.value, k: kn.weight.value, eps: qn.eps, offset: qn.offset };
  }

  private attend(x: Tensor, norm: (Module & { forward(x: Tensor): Tensor }) | null, cos: Tensor, sin: Tensor, mask: Tensor | null,
                 cache: AttentionKVCache | null, residual: Tensor | null): Tensor {
    const [B, L] = x.shape;
    if (residual && L === 1 && !mask && cache) {
      const step = this.fusedDecodeStep(x, norm, cos, sin, cache, residual);
      if (step) return step;
    }
    const { numHeads: nq, numKvHeads: nkv, headDim: d } = this.o;
    const [qp, kp, vp] = this.project(x, norm);
    let q = qp.view(B, L, nq, d);
    let k = kp.view(B, L, nkv, d);
    const v = vp.view(B, L, nkv, d);
    const opts = this.attentionOptions(mask);
    // A cache that lets the caller write (LayerKVCache.reserve): rotary and the KV write in one fused
    // op, with q_norm / k_norm inside it where both are plain RMSNorms of one eps and offset. Norms
    // that are not (a replaced forward, which may throw) and the rotary tables' check run before
    // reserve (which counts the positions as written), so a call that throws leaves the cache as it
    // was; the cache itself checks k/v against its buffers.
    const writes = !!cache && !attendsItself(cache) && !!cache.reserve;
    const plainNorms = writes ? this.plainQKNorm() : null;
    const norms = () => {
      q = this.q_norm!.forward(q);
      k = this.k_norm!.forward(k);
    };
    if (this.q_norm && this.k_norm && !plainNorms) norms();
    let room: KVReservation | null = null;
    if (writes) {
      checkRotary(k, cos, sin);
      room = cache!.reserve!(k, v, opts.window);
      if (!room && plainNorms) norms();
    }
    const out = room ? this.attendReserved(q, k, v, cos, sin, room, plainNorms, opts)
      : causalAttention(applyRotary(q, cos, sin), applyRotary(k, cos, sin), v, cache, opts);
    return this.projectOut(out, residual);
  }

  private attentionOptions(mask: Tensor | null): CausalAttentionOptions {
    const { headDim: d, scale = d ** -0.5, softcap, window } = this.o;
    return { scale, mask, window, softcap, sinks: this.sinks?.value };
  }

  /** The attention of q over a reserved room, after rotary and the KV write (one fused op; q/k normalized inside with plainNorms). */
  private attendReserved(q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor, room: KVReservation, plainNorms: QKNormParams | null,
                         opts: CausalAttentionOptions): Tensor {
    const qr = rotaryCacheWrite(q, k, v, cos, sin, room.keyBuffer, room.valueBuffer, room.at, plainNorms);
    // Decode (one position, attending buffer positions [0, at]: every key the cache keeps, from its
    // front): attend the cache buffers in place.
    const inPlace = !opts.mask && !opts.sinks && !opts.window && room.length === room.at + 1 && canAttendInCache(qr, room.keyBuffer.dtype);
    return inPlace ? cacheDecodeAttention(qr, room.keyBuffer, room.valueBuffer, room.at, { scale: opts.scale, softcap: opts.softcap })
      : attendToKeys(qr, room.keys, room.values, opts);
  }

  /** o_proj(out), plus the residual when given (one fused op for plain float or quantized weights). */
  private projectOut(out: Tensor, residual: Tensor | null): Tensor {
    if (!residual) return this.o_proj.forward(out);
    const o = this.o_proj, bias = o.bias?.value ?? null;
    if (isPlainFloat(o)) return linearResidual(out, o.weight.value, bias, residual);
    if (isPlainQuantized(o)) return linearResidualQuantized(out, o.quantized!, bias, residual);
    return add(residual, o.forward(out));
  }

  /**
   * The decode step of forwardResidual as ONE fused op (tensor/fused_attention.ts
   * decodeAttentionResidual: the norm, q/k/v, q_norm/k_norm, rotary, KV write, attention, o_proj
   * and residual in one kernel call) where it applies: one new position per row and no mask (the
   * caller checks), no window or sinks, a cache the caller writes (reserve) and attends in place, a
   * plain input RMSNorm (or none), plain q/k/v (no bias; all float or all block-quantized of one bit
   * width) and o projections, plain q_norm/k_norm or none, and a device with the kernel. Otherwise
   * null, with nothing done: the room is reserved only once everything else has been checked
   * (decodeAttentionPlan), so nothing after it throws on the caller's input; a reserved room
   * that cannot be attended in place (a cache dtype the paged kernels do not take) is finished with
   * the separate ops.
   */
  private fusedDecodeStep(x: Tensor, norm: (Module & { forward(x: Tensor): Tensor }) | null, cos: Tensor, sin: Tensor,
                          cache: AttentionKVCache, residual: Tensor): Tensor | null {
    const o = this.o;
    if (o.window || this.sinks || attendsItself(cache) || !cache.reserve) return null;
    const qkNorm = this.plainQKNorm();
    if (this.q_norm && !qkNorm) return null;
    if (norm && !(norm instanceof RMSNorm && norm.forward === RMSNorm.prototype.forward)) return null;
    const weight = (l: Linear): ProjectionWeight | null => (isPlainFloat(l) ? l.weight.value : isPlainQuantized(l) ? l.quantized! : null);
    const qkv = [this.q_proj, this.k_proj, this.v_proj].map((l) => (l.bias ? null : weight(l)));
    const ow = weight(this.o_proj);
    if (!ow || qkv.some((w) => !w)) return null;
    const B = x.shape[0], { numHeads: nq, numKvHeads: nkv, headDim: d } = o;
    const opts = this.attentionOptions(null);
    const n = norm instanceof RMSNorm ? { weight: norm.weight.value, eps: norm.eps, offset: norm.offset } : null;
    const step: DecodeAttentionStep = {
      x, norm: n, qkv: qkv as ProjectionWeight[], qkNorm, cos, sin, o: ow, oBias: this.o_proj.bias?.value ?? null, residual,
      heads: { numHeads: nq, numKvHeads: nkv, headDim: d, scale: opts.scale, softcap: opts.softcap ?? 0 },
    };
    const plan = decodeAttentionPlan(step);
    if (!plan) return null;
    const outs = { q: empty([B, 1, nq, d], "float32", x.device), k: empty([B, 1, nkv, d], "float32", x.device), v: empty([B, 1, nkv, d], "float32", x.device) };
    const room = cache.reserve(outs.k, outs.v, 0);
    if (!room) return null;
    if (room.length !== room.at + 1 || !canAttendInCache(outs.q, room.keyBuffer.dtype)) {
      const [qp, kp, vp] = this.project(x, norm);
      const out = this.attendReserved(qp.view(B, 1, nq, d), kp.view(B, 1, nkv, d), vp.view(B, 1, nkv, d), cos, sin, room, qkNorm, opts);
      return this.projectOut(out, residual);
    }
    return plan.run(room, outs);
  }
}
