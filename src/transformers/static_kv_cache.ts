/**
 * The graph-ready static KV cache of compiled generation (transformers' StaticCache as
 * torch.compile uses it: fixed shapes, written in place at positions given by a tensor).
 *
 * Each attention layer owns a key and a value buffer [B, capacity, Hkv, D] of the cache dtype
 * where the device's paged kernels take half-precision pools (cpu), else float32 holding keys and
 * values rounded to the cache dtype, so attention reads exactly what a float16/bfloat16 cache holds. A forward writes its new keys/values at the slots of a
 * device tensor and attends through pagedAttention, each query seeing its row's positions
 * <= its own: one block per row, the whole row. Nothing a step does depends on a host value
 * except through its tensors (`bind`), so one traced graph serves every decode step.
 * Rows are independent: row b's tokens sit at positions 0..n_b - 1 (no left padding), and keys
 * at positions beyond a query's own (a right-padded prompt's padding) are never attended.
 */
import type { Device } from "../devices/device.js";
import type { CausalAttentionOptions } from "../nn/attention.js";
import type { DType } from "../tensor/dtype.js";
import { empty } from "../tensor/ops.js";
import { pagedAttention, pagedKernelsTake, pagedKVWrite } from "../tensor/paged_attention.js";
import { keep } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import { KVCache, SelfAttendingLayer } from "./cache_utils.js";
import type { LinearAttentionState } from "./cache_linear_attention.js";

/** The device tensors that place one forward's T = B * L tokens (all int32). */
export interface StaticStep {
  /** Position of every token [B, L] (also the rotary positions). */
  positions: Tensor;
  /** Cache slot of every token [B * L]: row * capacity + position. */
  slots: Tensor;
  /** Row of every token [B * L]. */
  rows: Tensor;
  /** [B, 1]: row b's single block is b. */
  tables: Tensor;
}

/** Key/value heads and head size of one attention layer. */
export interface KVHeads {
  numKvHeads: number;
  headDim: number;
}

export class StaticKVCache extends KVCache {
  private step: StaticStep | null = null;

  /**
   * pools: per attention layer, keys [B, capacity, Hkv, D] and values [B, capacity, Hkv, D]
   * (see allocate); dtype: the precision keys and values are rounded to before storing (by the
   * write itself when the pools hold that dtype).
   */
  constructor(readonly pools: { keys: Tensor; values: Tensor }[], dtype: DType = "float32") {
    super(0, "static", 0, dtype);
    pools.forEach((_, i) => this.layers.push(new SelfAttendingLayer(this, i, "static", "the graph-ready static KV cache attends through its own kernel; this layer needs contiguous keys (not supported by compiled generation)")));
  }

  /**
   * Zero-free buffers for B rows of `capacity` positions, one pair per layer of `heads`: of
   * `dtype` where the device's paged kernels take such pools (cpu: half the bytes to write and read
   * for a half cache), else float32 (webgpu's paged kernels read float32 pools only).
   */
  static allocate(heads: KVHeads[], batch: number, capacity: number, dtype: DType, device: Device): StaticKVCache {
    const pool: DType = pagedKernelsTake(device.type, dtype) ? dtype : "float32";
    const buf = (h: KVHeads) => keep(empty([batch, capacity, h.numKvHeads, h.headDim], pool, device));
    return new StaticKVCache(heads.map((h) => ({ keys: buf(h), values: buf(h) })), dtype);
  }

  /** Positions each row holds. */
  get capacity(): number { return this.pools[0]?.keys.shape[1] ?? 0; }
  /** Not tracked on the host: positions live in the step tensors. */
  override get seqLength(): number { return 0; }

  /** Place the next forward's tokens (see StaticStep); attention layers read them. */
  bind(step: StaticStep): void {
    this.step = step;
  }

  override linearAttention(_layer: number): LinearAttentionState {
    throw new Error("compiled generation: models with linear-attention layers (e.g. Gated DeltaNet) have no static decode step");
  }

  /** q [B, L, Hq, D], k [B, L, Hkv, D], v [B, L, Hkv, Dv] of layer `layer` -> [B, L, Hq*Dv]. */
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor, o: CausalAttentionOptions): Tensor {
    const s = this.step;
    if (!s) throw new Error("StaticKVCache: bind() must place the tokens before a forward");
    const pool = this.pools[layer];
    const [B, L, Hq, D] = q.shape, [, , Hkv] = k.shape, Dv = v.shape[3], T = B * L;
    if (pool.keys.shape[0] !== B || pool.keys.shape[2] !== Hkv || pool.keys.shape[3] !== D || pool.values.shape[3] !== Dv) {
      throw new RangeError(`StaticKVCache: keys [${k.shape}] / values [${v.shape}] do not fit layer ${layer}'s buffers [${pool.keys.shape}] / [${pool.values.shape}]`);
    }
    if (o.mask) throw new Error("StaticKVCache: padding masks are not supported (rows are placed by position, not padded)");
    if (o.sinks) throw new Error("StaticKVCache: attention sinks are not supported by compiled generation");
    // pagedKVWrite rounds to the pools' dtype; float32 pools of a half cache round first.
    const stored = (x: Tensor) => (this.dtype === "float32" || pool.keys.dtype === this.dtype ? x : x.to(this.dtype));
    // The buffers are paged pools of B blocks of `capacity` positions: block b is row b.
    pagedKVWrite(stored(k).reshape(T, Hkv, D), stored(v).reshape(T, Hkv, Dv), pool.keys, pool.values, s.slots);
    const out = pagedAttention(q.reshape(T, Hq, D), pool.keys, pool.values, s.tables, s.rows, s.positions.reshape(T), {
      scale: o.scale, softcap: o.softcap, window: o.window,
    });
    return out.view(B, L, Hq * Dv);
  }
}
