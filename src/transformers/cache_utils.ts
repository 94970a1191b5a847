/**
 * KV caches (transformers' cache_utils.py). Each attention layer stores keys and values in a
 * preallocated buffer [B, capacity, Hkv, D] (position-major, as the model computes them, so a
 * decode step's write of one position is one contiguous run per sequence) and attends to the filled
 * prefix as a strided [B, Hkv, Lk, D] view; a decode step copies nothing else.
 * - "dynamic" (DynamicCache): the first buffer holds the prompt plus up to 1024 positions (no more than
 *   maxCacheLen, which generate knows: prompt + maxNewTokens), and capacity doubles when outgrown.
 * - "static" (StaticCache): capacity is fixed at construction (maxCacheLen); shapes never change.
 * A sliding-window attention layer keeps only its window, in a buffer of at most twice the window.
 * Keys and values are stored in the cache's dtype: generate uses the model's dtype (bfloat16 for a
 * bfloat16 checkpoint, as transformers does, halving cache memory) unless told to keep float32.
 */
import { cat, copyInto, empty } from "../tensor/ops.js";
import { keep } from "../tensor/scope.js";
import type { Tensor } from "../tensor/tensor.js";
import type { DType } from "../tensor/dtype.js";
import type { AttentionKVCache, KVReservation } from "../nn/kv_cache.js";
import type { CausalAttentionOptions, SelfAttendingCache } from "../nn/attention.js";
import { LinearAttentionState } from "./cache_linear_attention.js";

export type CacheImplementation = "dynamic" | "static";

/** Positions a dynamic cache's first buffer holds beyond the prompt (capped by maxCacheLen). */
const FIRST_HEADROOM = 1024;

/**
 * Keys/values of one attention layer. A sliding-window layer (`window` > 0 in update, the same on
 * every call) keeps only the last window - 1 positions, the most a later query can see
 * (transformers' DynamicSlidingWindowLayer / StaticSlidingWindowLayer): its buffer holds at most
 * 2 * window positions, and when it is full the kept ones move to its front.
 */
export class LayerKVCache implements AttentionKVCache {
  private keys: Tensor | null = null;
  private values: Tensor | null = null;
  /** Buffer positions [start, end) hold the cached keys/values, oldest first. */
  private start = 0;
  private end = 0;
  private seen = 0;

  /** dtype: what keys and values are stored as (float32, float16 or bfloat16). */
  constructor(private readonly kind: CacheImplementation, private readonly maxCacheLen: number, readonly dtype: DType = "float32") {}

  /** Number of positions seen (cached or, for a sliding window, already dropped). */
  get seqLength(): number { return this.seen; }
  /** Positions kept for later steps (at most window - 1 for a sliding-window layer). */
  get storedLength(): number { return this.end - this.start; }
  /** Positions the buffer has room for. */
  get capacity(): number { return this.keys?.shape[1] ?? 0; }

  /**
   * Append k [B, L, Hkv, D] and v [B, L, Hkv, Dv] (heads not transposed) and return the keys/values
   * attention needs, [B, Hkv, Lk, D] / [B, Hkv, Lk, Dv]: every cached position then the new ones, the
   * last Lk of all positions seen (Lk = seqLength, or for a sliding window of `window` keys
   * min(seqLength, window - 1 + L)). The views read the cache's buffers: they are valid until the
   * layer's next update, reserve or release (a growing buffer goes back to the device, which may hand
   * it out again). Throws when a static cache would overflow.
   */
  update(k: Tensor, v: Tensor, window = 0): { keys: Tensor; values: Tensor } {
    const r = this.makeRoom(k, v, window);
    if (!r) {
      this.seen += k.shape[1];
      return this.passThrough(k, v, window - 1);
    }
    copyInto(k, r.keyBuffer.narrow(1, r.at, k.shape[1]));
    copyInto(v, r.valueBuffer.narrow(1, r.at, v.shape[1]));
    return r;
  }

  /**
   * update() without the copies: make room for the L positions of k [B, L, Hkv, D] / v [B, L, Hkv, Dv]
   * (only their shapes are read), count them as seen, and return the buffers [B, capacity, Hkv, D]
   * / [B, capacity, Hkv, Dv], the position `at` where the caller must write them (positions
   * [at, at + L) of every sequence) and update()'s keys/values views, which read them. Returns null,
   * changing nothing, for a chunk longer than a sliding window's buffer (update() joins it instead).
   * The buffers and views are valid until the layer's next update, reserve or release (as update's).
   * Throws when a static cache would overflow.
   */
  reserve(k: Tensor, v: Tensor, window = 0): KVReservation | null {
    return this.makeRoom(k, v, window);
  }

  private makeRoom(k: Tensor, v: Tensor, window: number): KVReservation | null {
    this.checkFits(k, v);
    const L = k.shape[1];
    const kept = this.end - this.start, need = kept + L;
    if (window > 0 && need > 2 * window) return null;
    const capacity = this.capacity;
    if (this.end + L > capacity) {
      if (need <= capacity) this.moveToFront();
      else if (this.kind === "static" && this.keys) {
        throw new RangeError(`static KV cache overflow: ${need} positions needed, max_cache_len is ${capacity}`);
      } else {
        const wanted = this.kind === "static" ? Math.max(this.maxCacheLen, need)
          : capacity === 0 ? Math.max(need, Math.min(this.maxCacheLen, need + FIRST_HEADROOM)) : Math.max(need, 2 * capacity, 16);
        this.reallocate(k, v, window > 0 ? Math.max(need, Math.min(wanted, 2 * window)) : wanted);
      }
    }
    // Counted once the room is made: an overflow throws with the cache as it was.
    this.seen += L;
    const at = this.end, start = this.start, keyBuffer = this.keys!, valueBuffer = this.values!;
    this.end += L;
    if (window > 0) this.start = Math.max(this.start, this.end - (window - 1));
    return {
      keyBuffer, valueBuffer, at, length: need,
      get keys() { return keyBuffer.narrow(1, start, need).transpose(1, 2); },
      get values() { return valueBuffer.narrow(1, start, need).transpose(1, 2); },
    };
  }

  /**
   * Throws, before anything changes, unless k [B, L, H, D] and v [B, L, H, Dv] agree and fit the
   * buffers (same B, H, D, Dv and device as the keys/values already cached).
   */
  private checkFits(k: Tensor, v: Tensor): void {
    const kv = () => `keys [${k.shape}] and values [${v.shape}]`;  // built only for an error (this runs every step)
    const ks = k.shape, vs = v.shape;
    if (k.ndim !== 4 || v.ndim !== 4 || ks[0] !== vs[0] || ks[1] !== vs[1] || ks[2] !== vs[2]) {
      throw new RangeError(`KV cache: ${kv()} must be [B, L, H, D] and [B, L, H, Dv] with one B, L and H`);
    }
    if (!this.keys || !this.values) return;
    const [B, , H, D] = this.keys.shape;
    if (ks[0] !== B || ks[2] !== H || ks[3] !== D || vs[3] !== this.values.shape[3]) {
      throw new RangeError(`KV cache: ${kv()} do not fit the cached ones [${B}, ·, ${H}, ${D}] and [${B}, ·, ${H}, ${this.values.shape[3]}] (batch size, heads and head sizes stay fixed)`);
    }
    if (k.device !== this.keys.device || v.device !== this.keys.device) {
      throw new Error(`KV cache: keys and values on ${k.device.name} and ${v.device.name}, but the cache is on ${this.keys.device.name}`);
    }
  }

  /**
   * Forget everything cached and hand the buffers back to their device (Device.release: the cpu
   * device pools them for the next allocation of their size, whose pages are then already backed).
   * Views of the buffers handed out before (update's keys/values) must not be used afterwards.
   */
  release(): void {
    for (const buf of [this.keys, this.values]) if (buf) buf.device.release?.(buf.storage);
    this.keys = this.values = null;
    this.start = this.end = this.seen = 0;
  }

  /** New buffers of `capacity` positions holding the cached ones at the front; the old ones go back to the device. */
  private reallocate(k: Tensor, v: Tensor, capacity: number): void {
    const [B, , H, D] = k.shape, kept = this.end - this.start;
    const grow = (old: Tensor | null, d: number) => {
      const buf = keep(empty([B, capacity, H, d], this.dtype, k.device));
      if (old && kept > 0) copyInto(old.narrow(1, this.start, kept), buf.narrow(1, 0, kept));
      if (old) old.device.release?.(old.storage);
      return buf;
    };
    this.keys = grow(this.keys, D);
    this.values = grow(this.values, v.shape[3]);
    this.start = 0;
    this.end = kept;
  }

  /** Move the cached positions to the front of the buffers (through a copy when the ranges overlap). */
  private moveToFront(): void {
    const kept = this.end - this.start;
    for (const buf of [this.keys!, this.values!]) {
      const src = buf.narrow(1, this.start, kept);
      copyInto(this.start < kept ? src.contiguous() : src, buf.narrow(1, 0, kept));
    }
    this.start = 0;
    this.end = kept;
  }

  /**
   * A chunk longer than the sliding window's buffer: attention gets the cached and new positions
   * joined, and only the last `keep` of them stay cached.
   */
  private passThrough(k: Tensor, v: Tensor, keep: number): { keys: Tensor; values: Tensor } {
    const kept = this.end - this.start;
    const join = (buf: Tensor | null, x: Tensor) => {
      const fresh = x.to(x.device, this.dtype); // rounded as if it had been cached
      return kept > 0 ? cat([buf!.narrow(1, this.start, kept), fresh], 1) : fresh;
    };
    const keys = join(this.keys, k), values = join(this.values, v);
    const all = keys.shape[1];
    if (this.capacity < keep) this.reallocate(k, v, 2 * (keep + 1));
    copyInto(keys.narrow(1, all - keep, keep), this.keys!.narrow(1, 0, keep));
    copyInto(values.narrow(1, all - keep, keep), this.values!.narrow(1, 0, keep));
    this.start = 0;
    this.end = keep;
    return { keys: keys.transpose(1, 2), values: values.transpose(1, 2) };
  }
}

/**
 * A layer of a cache that attends through its own kernel (nn/attention's SelfAttendingCache: the
 * paged serving cache, the graph-ready static cache): attention goes to `owner.attend(layer, ...)`;
 * `update()` (contiguous keys) throws `refusal`.
 */
export class SelfAttendingLayer extends LayerKVCache implements SelfAttendingCache {
  constructor(private readonly owner: { attend(layer: number, q: Tensor, k: Tensor, v: Tensor, o: CausalAttentionOptions): Tensor },
              private readonly layer: number, kind: CacheImplementation, private readonly refusal: string) {
    super(kind, 0);
  }

  override update(): never {
    throw new Error(this.refusal);
  }

  override reserve(): never {
    throw new Error(this.refusal);
  }

  attend(q: Tensor, k: Tensor, v: Tensor, o: CausalAttentionOptions): Tensor {
    return this.owner.attend(this.layer, q, k, v, o);
  }
}

/** One LayerKVCache per decoder layer (transformers' Cache / past_key_values). */
export class KVCache {
  readonly layers: LayerKVCache[];
  /** dtype: what keys and values are stored as: float32 (default), float16 or bfloat16. */
  constructor(numLayers: number, readonly kind: CacheImplementation = "dynamic", maxCacheLen = 0, readonly dtype: DType = "float32") {
    if (kind !== "dynamic" && kind !== "static") throw new Error(`unknown cache implementation '${kind}'; supported: dynamic, static`);
    if (dtype !== "float32" && dtype !== "float16" && dtype !== "bfloat16") throw new Error(`KV cache dtype must be float32, float16 or bfloat16, got '${dtype}'`);
    this.layers = Array.from({ length: numLayers }, () => new LayerKVCache(kind, maxCacheLen, dtype));
  }
  /** Positions cached so far (of the attention layers: in a hybrid model, layer 0 may be linear attention). */
  get seqLength(): number { return Math.max(0, ...this.layers.map((l) => l.seqLength)); }

  /**
   * Empty every layer and hand its buffers back to the device (LayerKVCache.release); linear-attention
   * states are dropped. Only the layers' own buffers: the pools of a StaticKVCache or a serving
   * PagedKVCache (whose layers attend through them) are not handed back.
   */
  release(): void {
    for (const l of this.layers) l.release();
    this.linearStates.clear();
  }

  private readonly linearStates = new Map<number, LinearAttentionState>();
  /** The conv and recurrent state of linear-attention layer `layer` (e.g. Gated DeltaNet), made on first use. */
  linearAttention(layer: number): LinearAttentionState {
    let state = this.linearStates.get(layer);
    if (!state) this.linearStates.set(layer, (state = new LinearAttentionState()));
    return state;
  }
}
