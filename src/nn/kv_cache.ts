/**
 * What attention needs from a layer's KV cache. nn/ defines it and transformers/cache_utils.ts
 * implements it (LayerKVCache: dynamic and static caches, sliding windows), so nn/ depends on
 * nothing above it.
 */
import type { Tensor } from "../tensor/tensor.js";

export interface AttentionKVCache {
  /**
   * Append k [B, L, Hkv, D] and v [B, L, Hkv, Dv] (heads not transposed) and return the keys and
   * values to attend to, [B, Hkv, Lk, D] / [B, Hkv, Lk, Dv]: the cached positions, then the new
   * ones. With `window` > 0 (a sliding-window layer) only the last positions a query can see.
   */
  update(k: Tensor, v: Tensor, window?: number): { keys: Tensor; values: Tensor };
  /**
   * Optional: update() without the copies, for a caller that writes k and v itself (a fused rotary
   * + KV-write kernel): room for k's L positions is made and they count as seen; the caller must
   * write k/v into positions [at, at + L) of keyBuffer/valueBuffer before reading keys/values. Null
   * (nothing changed) when the chunk cannot be written in place; then call update().
   */
  reserve?(k: Tensor, v: Tensor, window?: number): KVReservation | null;
}

/**
 * What AttentionKVCache.reserve returns: the cache buffers [B, capacity, Hkv, D|Dv] (contiguous),
 * where to write, and update()'s result. keys/values are views of the buffers' positions
 * [at + L - length, at + L), made when first read (a decode step that attends the buffers in place
 * never reads them): a cache without a window keeps every position from the buffers' front
 * (length = at + L), which decode attention relies on to read the buffers in place.
 */
export interface KVReservation {
  keyBuffer: Tensor;
  valueBuffer: Tensor;
  at: number;
  /** Positions the keys/values views cover (their dim 2, Lk). */
  length: number;
  readonly keys: Tensor;
  readonly values: Tensor;
}
